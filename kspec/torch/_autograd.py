"""Autograd for the op of a kernel whose spec declares gradients (issue [AD]).

``torch.library.register_autograd`` on ``kspec::<name>``: the forward saves its tensor inputs and outputs; the
backward calls the op of the kernel's backward kernel (registered like any kspec op, so AOTAutograd traces it
into the backward graph of a compiled function) and sums each input's gradient to the input's shape
(``sum_to_size``: the axes it was broadcast along). Scalars and inputs without a gradient entry get None.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

NAMESPACE = "kspec"


def add_autograd(lib: Any, name: str, params: Sequence[str], backward_op: Any, names: Sequence[str]) -> None:
    """Give op ``name`` (input parameters ``params``, in order) the backward ``backward_op``, which returns the gradients
    of ``names`` (one tensor, or a tuple) from the inputs, the outputs and the outputs' gradients."""
    import torch

    wanted = [param in names for param in params]

    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        outputs = output if isinstance(output, tuple) else (output,)
        ctx.save_for_backward(*[a for a in inputs if isinstance(a, torch.Tensor)], *outputs)
        ctx.kspec_layout = [None if isinstance(a, torch.Tensor) else a for a in inputs]
        ctx.kspec_outputs = len(outputs)

    def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
        saved = ctx.saved_tensors
        split = len(saved) - ctx.kspec_outputs
        tensors, outputs = iter(saved[:split]), saved[split:]
        args = [next(tensors) if value is None else value for value in ctx.kspec_layout]
        grads = tuple(g if g is not None else torch.zeros_like(o) for g, o in zip(grads, outputs))
        made = backward_op(*args, *outputs, *grads)
        by_name = dict(zip(names, made if isinstance(made, (tuple, list)) else (made,)))
        result: list[Any] = []
        for k, (param, arg) in enumerate(zip(params, args)):
            grad = by_name.get(param) if wanted[k] and ctx.needs_input_grad[k] else None
            if grad is not None and isinstance(arg, torch.Tensor) and grad.shape != arg.shape:
                grad = grad.sum_to_size(arg.shape)
            result.append(grad if isinstance(arg, torch.Tensor) else None)
        return tuple(result)

    torch.library.register_autograd(f"{NAMESPACE}::{name}", backward, setup_context=setup_context, lib=lib)
