"""Where a kspec op's gradients come from (issue [AD]): the gradient rule kspec/torch/_autograd.py calls.

- A spec kernel with a ``grad`` table (or ``"auto"``): its backward kernel's op, on the call's own arguments; a
  reduction's output and gradient are viewed with the reduced axes kept (extent 1), so that the backward kernel,
  elementwise over the inputs' shape, broadcasts them back.
- A fused function: for the call's argument types, its kernels with their derived backwards
  (kspec.grad.differentiable_program); the values between kernels are recomputed by their ops (the op saved only
  its outputs), then the backward kernels' ops run in reverse. A kernel that cannot be differentiated raises a
  kspec error when (and only when) a gradient is asked.

The ops are registered with :func:`kspec.torch.register` (passed in: this module is below it) the first time a
backward needs them, so a model that never trains defines none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..grad import (
    DiffStep,
    by_input,
    differentiable_program,
    kept_shape,
    result_nodes,
    run_backward,
    run_forward,
    shared_for,
)
from ._autograd import GradientRule
from ._tensors import array_spec


def of_spec_kernel(kernel: Any, params: Sequence[str], scalars: Sequence[str], register: Any, reduction: bool) -> GradientRule:
    names = kernel.spec.backward()[0]
    backward_ops: dict[bool, Any] = {}  # shared variant or not -> its op

    def gradients(args: Sequence[Any], keywords: Mapping[str, Any], outputs: Sequence[Any], grads: Sequence[Any]) -> list[Any]:
        inputs = args[: len(params)]
        shared = shared_for(kernel.spec, inputs)  # a bias's gradient summed (sum_to_size) from the input's
        op = backward_ops.get(bool(shared))
        if op is None:
            op = backward_ops[bool(shared)] = register(kernel.backward_kernel(bool(shared)), scalars=sorted(scalars))
        if reduction:
            kept = kept_shape([tuple(getattr(a, "shape", ())) for a in inputs], keywords.get("axis"))
            outputs, grads = [o.reshape(kept) for o in outputs], [g.reshape(kept) for g in grads]
        by_name = by_input(names, op(*inputs, *outputs, *grads), shared)
        return [by_name.get(param) for param in params]

    return gradients


def of_fused(fused: Any, op: str, register: Any) -> GradientRule:
    def gradients(args: Sequence[Any], keywords: Mapping[str, Any], outputs: Sequence[Any], grads: Sequence[Any]) -> list[Any]:
        import torch

        stand_ins = [array_spec(a) if isinstance(a, torch.Tensor) else a for a in args]
        form = differentiable_program(fused, stand_ins, {}, f"kspec.torch: op kspec::{op}")
        program = form._replace(args=tuple(args))
        saved = {node: out for node, out in zip(result_nodes(program), outputs) if node is not None}
        ops = _Ops(register)
        values = run_forward(program, ops.forward, saved)
        return run_backward(program, values, grads, ops)

    return gradients


class _Ops:
    """The reverse pass on tensors, through kspec ops (what AOTAutograd can trace)."""

    def __init__(self, register: Any) -> None:
        self.register = register

    def _op(self, kernel: Any, params: Sequence[str], inputs: Sequence[Any]) -> Any:
        import torch

        return self.register(kernel, scalars=[p for p, a in zip(params, inputs) if not isinstance(a, torch.Tensor)])

    def forward(self, step: DiffStep, inputs: list[Any]) -> Any:
        return self._op(step.kernel, step.params, inputs)(*inputs, **step.kwargs)

    def backward(self, step: DiffStep, inputs: list[Any], outputs: list[Any], grads: list[Any]) -> Sequence[Any]:
        if step.reduction:
            kept = kept_shape([tuple(getattr(a, "shape", ())) for a in inputs], step.kwargs.get("axis"))
            outputs, grads = [o.reshape(kept) for o in outputs], [g.reshape(kept) for g in grads]
        shared = shared_for(step.kernel.spec, inputs)
        made = self._op(step.kernel.backward_kernel(bool(shared)), step.params, inputs)(*inputs, *outputs, *grads)
        found = by_input(step.names, made, shared)
        return [found[name] for name in step.names]

    def reduce_to(self, grad: Any, like: Any) -> Any:
        shape = getattr(like, "shape", None)
        return grad.sum_to_size(shape) if shape is not None and grad.shape != shape else grad

    def add(self, a: Any, b: Any) -> Any:
        return a + b

    def zeros_like(self, a: Any) -> Any:
        import torch

        return torch.zeros_like(a)
