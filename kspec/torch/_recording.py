"""Bare eager kernel calls that autograd records: ``kernel(x, b)`` on tensors that require grad.

The kernels layer sends such a call here (kspec/kernels/callpath/_frameworks.py's ``run_by_torch``: a tensor that requires
grad, grad mode on), and it runs as the op :func:`kspec.torch.register` defines for the kernel with the call's
numbers as scalars, the op a bare call inside ``torch.compile`` traces as (:mod:`._bare`): its eager path records
the backward (a spec's ``grad``, a fused function's derived one) or, for a kernel without gradients, an output
whose backward raises an error naming the kernel. The op for a kernel and the kinds of its arguments is looked
up once; later calls pay a dictionary lookup on top of the registered callable.

On kspec's CPU device a call on CPU tensors comes here too, with or without grad: where nothing is recorded the
kernel runs on NumPy views of the tensors' memory (``t.numpy()``: no copy) and its results come back as tensors
(a given output as the tensor given), as code written for CuPy's arrays runs on PyTorch's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._errors import KspecTypeError, KspecValueError, kernel_label
from ..fuse import FusedFunction
from ._bare import resolve

WITH_GRAD = "with tensors that require grad"

# (kernel id, the arguments' types (numbers are the op's scalars), the keywords given[, a fused function's tensors'
# dtypes and ranks: its number of outputs follows them]) -> (kernel, the registered callable)
_registered: dict[tuple[Any, ...], tuple[Any, Any]] = {}


def call(register: Any, kernel: Any, *args: Any, **kwargs: Any) -> Any:
    """``kernel(*args, **kwargs)`` run as its registered op, so that autograd records it; on CPU tensors with
    nothing to record (kspec's CPU device), run on their memory."""
    if not _records(args):
        return _on_host_memory(kernel, args, kwargs)
    if kwargs and kwargs.get("stream") is not None:
        raise KspecValueError(
            f"kspec.torch: {_label(kernel)}: stream= {WITH_GRAD}: autograd records the kernel on PyTorch's current "
            "stream; choose it with `with torch.cuda.stream(s):`"
        )
    if kwargs:
        kwargs.pop("stream", None)
    fused = isinstance(kernel, FusedFunction)
    key: tuple[Any, ...] = (id(kernel), tuple(map(type, args)), tuple(kwargs))
    if fused:
        key += tuple((a.dtype, a.dim()) for a in args if hasattr(a, "requires_grad"))
    found = _registered.get(key)
    if found is None or found[0] is not kernel:
        _no_outputs_given(kernel, args, fused)
        registered, _ = resolve(register, kernel, list(args), dict(kwargs), WITH_GRAD)
        if len(_registered) >= 1024:  # a program making kernels without end: start over
            _registered.clear()
        found = _registered[key] = (kernel, registered)
    return found[1](*args, **kwargs)


def _records(args: tuple[Any, ...]) -> bool:
    """Whether autograd records a call on these arguments: a tensor among them requires grad, grad mode on."""
    import torch

    return torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)


def _on_host_memory(kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The call on NumPy views of the CPU tensors' memory, its results as tensors: a given output comes back as the
    tensor given (the kernel wrote into its memory), a new one as a tensor over the array's memory."""
    import torch

    given: dict[int, Any] = {}

    def view(a: Any) -> Any:
        if not isinstance(a, torch.Tensor):
            return a
        if not a.is_cpu:
            raise KspecTypeError(f"kspec.torch: {_label(kernel)}: a {a.device} tensor among CPU tensors on kspec's CPU "
                                 "device: pass every tensor on the CPU")  # fmt: skip
        try:
            array = a.detach().numpy()
        except TypeError as exc:  # a dtype NumPy lacks (bfloat16 without ml_dtypes), a conjugate or neg view
            raise KspecTypeError(f"kspec.torch: {_label(kernel)}: a CPU tensor of {a.dtype} has no NumPy view for "
                                 f"kspec's CPU device: {exc}") from None  # fmt: skip
        given[id(array)] = a
        return array

    arrays = [view(a) for a in args]
    return _as_tensors(kernel(*arrays, **kwargs), given)


def _as_tensors(made: Any, given: dict[int, Any]) -> Any:
    """A host call's results as tensors: a given output as the tensor given, a new array as a tensor over its
    memory. A module function, not a closure: a closure calling itself is a reference cycle, which would keep
    the tensors alive until the garbage collector runs."""
    import torch

    if isinstance(made, tuple):
        return tuple(_as_tensors(r, given) for r in made)
    found = given.get(id(made))
    if found is not None:
        return found
    return torch.from_numpy(made) if isinstance(made, np.ndarray) else made


def _no_outputs_given(kernel: Any, args: tuple[Any, ...], fused: bool) -> None:
    """Outputs to write into are refused, as PyTorch refuses ``out=`` where an argument requires grad."""
    if fused:
        return
    inputs = len(kernel.in_params)
    if len(args) > inputs:
        given = ", ".join(p.name for p in kernel.out_params[: len(args) - inputs])
        raise KspecTypeError(
            f"kspec.torch: {_label(kernel)}: outputs given ({given}) {WITH_GRAD}: autograd cannot record a kernel "
            "writing into given tensors (PyTorch refuses out= arguments there too). Leave the outputs out to get "
            "new tensors, or call it under torch.no_grad() or on detached tensors"
        )


def _label(kernel: Any) -> str:
    return kernel_label(str(getattr(kernel, "kernel_name", None) or getattr(kernel, "name", "?")))


def refusal(what: str, name: str, args: tuple[Any, ...]) -> Exception:
    """The error for a kernel autograd cannot record (the kernels layer's hand-off reads it by name)."""
    return KspecTypeError(
        f"kspec.torch: {what} '{name}' {WITH_GRAD}: its outputs are not planned, so autograd cannot record it; "
        "call it under torch.no_grad() or on detached tensors"
    )
