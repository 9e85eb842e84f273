"""Autograd for kspec ops (issue [AD]).

``torch.library.register_autograd`` on ``kspec::<name>``: the forward saves its tensor inputs and outputs; the
backward asks where the call's gradients come from (:class:`Backward`, kspec/torch/_backward_of.py), calls that
backward kernel's op (registered like any kspec op, so
AOTAutograd traces it into the backward graph of a compiled function) and sums each input's gradient to the
input's shape (``sum_to_size``: the axes it was broadcast along). Scalars and inputs without a gradient get None.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

NAMESPACE = "kspec"


class Backward(NamedTuple):
    """How one call's gradients are computed."""

    op: Any  # the backward kernel's op: (inputs..., outputs..., outputs' gradients...) -> the gradients of `names`
    inputs: Sequence[Any]  # the backward kernel's inputs, taken from the call's arguments
    names: Sequence[str]  # the gradients the op returns, in order
    targets: Mapping[str, int]  # a gradient's name -> the position of the op argument it belongs to
    kept: tuple[int, ...] | None = None  # a reduction's: the outputs and their gradients viewed with this shape


def add_autograd(lib: Any, name: str, backward_of: Callable[[Sequence[Any], Mapping[str, Any]], Backward]) -> None:
    """Give op ``name`` a backward: ``backward_of(args, keywords)`` says, for the call's positional arguments
    (tensors and scalars in the op's order) and keyword-only ones (a reduction's ``axis``, ``keepdims``), which
    backward op runs and where its gradients go. It may raise (a kspec error naming what
    cannot be differentiated): only when a gradient is asked."""
    import torch

    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any, keyword_only_inputs: Any = None) -> None:
        ctx.kspec_keywords = dict(keyword_only_inputs or {})
        outputs = output if isinstance(output, tuple) else (output,)
        ctx.save_for_backward(*[a for a in inputs if isinstance(a, torch.Tensor)], *outputs)
        ctx.kspec_layout = [None if isinstance(a, torch.Tensor) else a for a in inputs]
        ctx.kspec_outputs = len(outputs)

    def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
        saved = ctx.saved_tensors
        split = len(saved) - ctx.kspec_outputs
        tensors, outputs = iter(saved[:split]), saved[split:]
        args = [next(tensors) if value is None else value for value in ctx.kspec_layout]
        plan = backward_of(args, ctx.kspec_keywords)
        grads = tuple(g if g is not None else torch.zeros_like(o) for g, o in zip(grads, outputs))
        if plan.kept is not None:
            outputs, grads = tuple(o.reshape(plan.kept) for o in outputs), tuple(g.reshape(plan.kept) for g in grads)
        made = plan.op(*plan.inputs, *outputs, *grads)
        result: list[Any] = [None] * len(args)
        for grad_name, grad in zip(plan.names, made if isinstance(made, (tuple, list)) else (made,)):
            k = plan.targets.get(grad_name)
            if k is None or not ctx.needs_input_grad[k] or not isinstance(args[k], torch.Tensor):
                continue
            result[k] = grad if result[k] is None else result[k] + grad  # an argument read by several inputs
        for k, grad in enumerate(result):
            if grad is not None and grad.shape != args[k].shape:
                result[k] = grad.sum_to_size(args[k].shape)
        return tuple(result)

    torch.library.register_autograd(f"{NAMESPACE}::{name}", backward, setup_context=setup_context, lib=lib)
