"""Bare eager kernel calls that autograd records: ``kernel(x, b)`` on tensors that require grad.

The kernels layer sends such a call here (kspec/kernels/callpath/_frameworks.py's ``recorded_by``: a tensor that requires
grad, grad mode on), and it runs as the op :func:`kspec.torch.register` defines for the kernel with the call's
numbers as scalars, the op a bare call inside ``torch.compile`` traces as (:mod:`._bare`): its eager path records
the backward (a spec's ``grad``, a fused function's derived one) or, for a kernel without gradients, an output
whose backward raises an error naming the kernel. The op for a kernel and the kinds of its arguments is looked
up once; later calls pay a dictionary lookup on top of the registered callable.
"""

from __future__ import annotations

from typing import Any

from .._errors import KspecTypeError, KspecValueError, kernel_label
from ..fuse import FusedFunction
from ._bare import resolve

WITH_GRAD = "with tensors that require grad"

# (kernel id, the arguments' types (numbers are the op's scalars), the keywords given[, a fused function's tensors'
# dtypes and ranks: its number of outputs follows them]) -> (kernel, the registered callable)
_registered: dict[tuple[Any, ...], tuple[Any, Any]] = {}


def call(register: Any, kernel: Any, *args: Any, **kwargs: Any) -> Any:
    """``kernel(*args, **kwargs)`` run as its registered op, so that autograd records it."""
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
