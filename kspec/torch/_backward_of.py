"""Where a kspec op's gradients come from (issue [AD]), per kind of kernel, for kspec/torch/_autograd.py.

- A spec kernel with a ``grad`` table (or ``"auto"``): its backward kernel's op, on the call's own arguments.
- A reduction with ``grad``: the same, with the output and its gradient viewed with the reduced axes kept
  (extent 1), so that the backward kernel, elementwise over the inputs' shape, broadcasts them back.
- A fused function: for the call's argument types, the one elementwise kernel it runs, differentiated by
  ``grad = "auto"`` (kspec.grad.auto_kernel); a call that runs reductions or several kernels raises a kspec
  error when (and only when) a gradient is asked of it.

The backward ops are registered with :func:`kspec.torch.register` (passed in: this module is below it) the first
time a backward needs them, so a model that never trains defines none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._errors import KspecNotImplementedError
from ._autograd import Backward
from ._tensors import array_spec


def of_spec_kernel(kernel: Any, params: Sequence[str], scalars: Sequence[str], register: Any,
                   reduction: bool) -> Callable[[Sequence[Any], Mapping[str, Any]], Backward]:  # fmt: skip
    names = kernel.spec.backward()[0]
    targets = {param: k for k, param in enumerate(params) if param in names}
    found: list[Any] = []

    def backward_of(args: Sequence[Any], keywords: Mapping[str, Any]) -> Backward:
        if not found:
            found.append(register(kernel.backward_kernel(), scalars=sorted(scalars)))
        inputs = args[: len(params)]
        if not reduction:
            return Backward(found[0], inputs, names, targets)
        from ..grad import kept_shape

        kept = kept_shape([tuple(a.shape) if hasattr(a, "shape") else () for a in inputs], keywords.get("axis"))
        return Backward(found[0], inputs, names, targets, kept)

    return backward_of


def of_fused(fused: Any, op: str, register: Any) -> Callable[[Sequence[Any], Mapping[str, Any]], Backward]:
    def backward_of(args: Sequence[Any], keywords: Mapping[str, Any]) -> Backward:
        import torch

        from ..grad import auto_kernel

        form = fused.elementwise_form(*[array_spec(a) if isinstance(a, torch.Tensor) else a for a in args])
        if form is None:
            raise KspecNotImplementedError(
                f"kspec.torch: op kspec::{op} (fused function '{fused.kernel_name}') has no gradient for these "
                "arguments: its call runs reductions, several kernels or in-place updates, and only fused "
                "functions that are one elementwise kernel are differentiable yet"
            )
        spec, index, _ = form
        kernel = auto_kernel(spec)
        params = [p.name for p in spec.in_params]
        scalars = [name for name, k in zip(params, index) if not isinstance(args[k], torch.Tensor)]
        names = kernel.spec.backward()[0]
        targets = {name: k for name, k in zip(params, index) if name in names}
        backward_op = register(kernel.backward_kernel(), scalars=scalars)
        return Backward(backward_op, [args[k] for k in index], names, targets)

    return backward_of
