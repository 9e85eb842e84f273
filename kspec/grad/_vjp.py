"""``kspec.vjp``: a kernel's outputs and the function that maps their gradients to its inputs' gradients.

Without a framework (CuPy, PyTorch or kspec arrays on the GPU; NumPy on the CPU device):
``z, back = kspec.vjp(kernel, x, y)`` runs the kernel; ``gx, gy = back(gz)`` runs its backward kernel
(kspec/spec/_backward.py) on the same inputs, the outputs and ``gz``, then sums each input's gradient over the
axes the input was broadcast along, so that it has the input's shape. An input without a gradient entry (and a
raw input) gets None.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._errors import KspecTypeError, KspecValueError
from ..fuse import FusedFunction
from ..kernels import ElementwiseKernel, ReductionKernel
from ._custom import CustomVJP
from ._program import DiffStep, assemble, differentiable_program, run_backward, run_forward
from ._summed import summed_backward
from ._sums import kept_shape, reduced

GRAD_PREFIX = "grad_"  # an output's incoming gradient: grad_<output> (kspec/spec/_grad.py)


def vjp(kernel: Any, *args: Any, **kwargs: Any) -> tuple[Any, Callable[..., tuple[Any, ...]]]:
    """``(outputs, back)``: ``kernel(*args, **kwargs)``'s result as the kernel returns it, and ``back(*grads)``,
    which takes one gradient per output (arrays of the outputs' shape, or broadcastable to it) and returns one
    entry per input parameter: its gradient, shaped as that argument, or None where the spec's ``grad`` table
    has no entry."""
    if isinstance(kernel, CustomVJP):
        if kwargs:
            raise KspecTypeError(f"kspec.vjp: '{kernel.__name__}' (kspec.custom_vjp) takes its arguments positionally")
        return kernel.vjp(*args)
    if isinstance(kernel, FusedFunction):
        return _fused_vjp(kernel, args, kwargs)
    if isinstance(kernel, ReductionKernel):
        return _reduction_vjp(kernel, _spec_of(kernel), args, kwargs)
    spec = _spec_of(kernel)
    n_in, n_out = len(spec.in_params), len(spec.out_params)
    if len(args) not in (n_in, n_in + n_out):
        raise KspecTypeError(
            f"kernel '{spec.name}': kspec.vjp takes its {n_in} inputs (and optionally its {n_out} outputs), got "
            f"{len(args)} arguments"
        )
    inputs = args[:n_in]
    names = spec.backward()[0]
    for param, arg in zip(spec.in_params, inputs):
        if param.name in names:
            _check_floating(spec.name, param.name, arg)
    result = kernel(*args, **kwargs)
    outputs = result if isinstance(result, tuple) else (result,)
    stream = kwargs.get("stream")

    def back(*grads: Any) -> tuple[Any, ...]:
        if len(grads) != n_out:
            raise KspecTypeError(
                f"kernel '{spec.name}': the backward takes one gradient per output ({n_out}: "
                f"{', '.join(GRAD_PREFIX + p.name for p in spec.out_params)}), got {len(grads)}"
            )
        by_name = summed_backward(kernel).gradients((*inputs, *outputs, *grads), stream)  # in the inputs' shapes
        return tuple(by_name.get(p.name) for p in spec.in_params)

    return result, back


def _fused_vjp(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Callable[..., tuple[Any, ...]]]:
    """A fused function's vjp: its kernels run with their derived backwards kept (kspec/grad/_program.py); the
    backward runs them in reverse, one gradient per argument of the function."""
    stream = kwargs.pop("stream", None)
    program = differentiable_program(fn, args, kwargs, "kspec.vjp")
    ops = _KernelOps(stream)
    values = run_forward(program, ops.forward)
    result = assemble(program, values)
    count = len(program.results) if program.returns_tuple else 1

    def back(*grads: Any) -> tuple[Any, ...]:
        if len(grads) != count:
            raise KspecTypeError(
                f"fused function '{fn.kernel_name}': the backward takes one gradient per returned array ({count}), "
                f"got {len(grads)}"
            )
        return tuple(run_backward(program, values, grads, ops))

    return result, back


class _KernelOps:
    """kspec.vjp's array operations: the kernels themselves, on the caller's arrays and stream."""

    def __init__(self, stream: Any) -> None:
        self.on = {"stream": stream} if stream is not None else {}
        self.beside: Any = None  # the kernel whose binaries serve the gradient sums (a fused function's: none)

    def forward(self, step: DiffStep, inputs: list[Any]) -> Any:
        return step.kernel(*inputs, **step.kwargs, **self.on)

    def backward(self, step: DiffStep, inputs: list[Any], outputs: list[Any], grads: list[Any]) -> Sequence[Any]:
        if step.reduction:
            kept = kept_shape([tuple(getattr(a, "shape", ())) for a in inputs], step.kwargs.get("axis"))
            outputs, grads = [o.reshape(kept) for o in outputs], [g.reshape(kept) for g in grads]
        found = summed_backward(step.kernel).gradients((*inputs, *outputs, *grads), self.on.get("stream"))
        return [found[name] for name in step.names]

    def reduce_to(self, grad: Any, like: Any) -> Any:
        return reduced(grad, like, self.on.get("stream"), self.beside)

    def add(self, a: Any, b: Any) -> Any:
        return _helper("add")(a, b, **self.on)

    def zeros_like(self, a: Any) -> Any:
        return _helper("zeros")(a, **self.on)


def _helper(name: str) -> Any:
    if not _helpers:
        _helpers["add"] = ElementwiseKernel("T a, T b", "T c", "c = a + b", "kspec_grad_add")
        _helpers["zeros"] = ElementwiseKernel("T a", "T z", "z = T(0)", "kspec_grad_zeros")
    return _helpers[name]


_helpers: dict[str, Any] = {}


def _reduction_vjp(kernel: Any, spec: Any, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> tuple[Any, Callable[..., tuple[Any, ...]]]:  # fmt: skip
    """A reduction's vjp: its backward kernel runs over the inputs' broadcast shape, the output and its gradient
    reshaped with the reduced axes kept (extent 1), so that they broadcast back along them."""
    n_in = len(spec.in_params)
    if len(args) != n_in:
        raise KspecTypeError(
            f"kernel '{spec.name}': kspec.vjp takes the reduction's {n_in} inputs (and its output as out=, where only "
            f"the output binds a type), got {len(args)} arguments"
        )
    for param, arg in zip(spec.in_params, args):
        if param.name in spec.backward()[0]:
            _check_floating(spec.name, param.name, arg)
    result = kernel(*args, **kwargs)
    kept = kept_shape([tuple(getattr(a, "shape", ())) for a in args], kwargs.get("axis"))
    stream = kwargs.get("stream")

    def back(grad: Any) -> tuple[Any, ...]:
        by_name = summed_backward(kernel).gradients((*args, result.reshape(kept), grad.reshape(kept)), stream)
        return tuple(by_name.get(p.name) for p in spec.in_params)

    return result, back


def _spec_of(kernel: Any) -> Any:
    spec = getattr(kernel, "spec", None) if isinstance(kernel, (ElementwiseKernel, ReductionKernel)) else None
    if spec is None:
        raise KspecTypeError(
            "kernel: kspec.vjp takes an ElementwiseKernel or ReductionKernel whose spec declares gradients, a "
            f"kspec.fuse function or a kspec.custom_vjp function (for raw and jit kernels); got {type(kernel).__name__}"
        )
    if spec.grad is None:
        raise KspecValueError(
            f"kernel '{spec.name}' declares no gradient: give its spec a grad table (input name -> expression of "
            "the inputs, the outputs and grad_<output>)"
        )
    return spec


def _check_floating(kernel: str, name: str, arg: Any) -> None:
    import numpy as np

    dtype = getattr(arg, "dtype", None)
    kind = np.dtype(type(arg)).kind if dtype is None and isinstance(arg, (int, float, complex)) else None
    if dtype is not None:
        try:
            kind = np.dtype(str(dtype).removeprefix("torch.")).kind
        except TypeError:
            kind = None
    if kind is not None and kind not in "fc":
        raise KspecTypeError(
            f"kernel '{kernel}': input {name!r} is {dtype if dtype is not None else type(arg).__name__}; a gradient "
            "needs a floating or complex input"
        )
