"""Autograd for kspec ops (issue [AD]).

``torch.library.register_autograd`` on ``kspec::<name>``: the forward saves its tensor inputs and outputs; the
backward asks the op's gradient rule (kspec/torch/_backward_of.py: a spec kernel's backward kernel, or a fused
function's kernels in reverse) for one gradient per argument, computed with kspec ops (registered like any, so
AOTAutograd traces them into the backward graph of a compiled function), and sums each to its argument's shape
(``sum_to_size``: the axes it was broadcast along). Scalars and arguments that need no gradient get None.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..grad import sum_to_shape

NAMESPACE = "kspec"

# (positional arguments, keyword-only arguments, outputs, the outputs' gradients, whether each positional argument
# needs its gradient) -> one gradient (or None) per positional argument
GradientRule = Callable[[Sequence[Any], Mapping[str, Any], Sequence[Any], Sequence[Any], Sequence[bool]], Sequence[Any]]


def add_autograd(lib: Any, name: str, gradients: GradientRule, hidden: bool = False) -> None:
    """Give op ``name`` a backward. ``gradients`` may raise (a kspec error naming what cannot be
    differentiated): only when a gradient is asked. ``hidden``: the op's last output is a ``Tensor[]`` of values
    kept for the backward (kspec/torch/_saving.py): saved too, and passed to ``gradients`` after the outputs."""
    import torch

    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any, keyword_only_inputs: Any = None) -> None:
        ctx.kspec_keywords = dict(keyword_only_inputs or {})
        outputs = output if isinstance(output, tuple) else (output,)
        if hidden:
            outputs = (*outputs[:-1], *outputs[-1])
            ctx.kspec_grads = len(output) - 1  # the outputs with gradients: not the kept values
        ctx.save_for_backward(*[a for a in inputs if isinstance(a, torch.Tensor)], *outputs)
        ctx.kspec_layout = [None if isinstance(a, torch.Tensor) else a for a in inputs]
        ctx.kspec_outputs = len(outputs)

    def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
        if hidden:
            grads = grads[: ctx.kspec_grads]
        saved = ctx.saved_tensors
        split = len(saved) - ctx.kspec_outputs
        tensors, outputs = iter(saved[:split]), saved[split:]
        args = [next(tensors) if value is None else value for value in ctx.kspec_layout]
        grads = tuple(g if g is not None else torch.zeros_like(o) for g, o in zip(grads, outputs))
        # kspec's backward kernels give grad * f'(z) (JAX's convention for complex values); PyTorch's is
        # grad * conj(f'(z)) = conj(conj(grad) * f'(z)): the same kernels, conjugated on the way in and out
        complex_values = any(t.is_complex() for t in (*outputs, *[a for a in args if isinstance(a, torch.Tensor)]))
        if complex_values:
            grads = tuple(torch.conj_physical(g) if g.is_complex() else g for g in grads)
        made = gradients(args, ctx.kspec_keywords, outputs, grads, ctx.needs_input_grad)
        result: list[Any] = []
        for k, (arg, grad) in enumerate(zip(args, made)):
            if grad is None or not ctx.needs_input_grad[k] or not isinstance(arg, torch.Tensor):
                result.append(None)
                continue
            if complex_values and grad.is_complex():
                grad = torch.conj_physical(grad) if arg.is_complex() else grad.real  # a real input: real
            result.append(sum_to_shape(grad, arg))
        return tuple(result)

    torch.library.register_autograd(f"{NAMESPACE}::{name}", backward, setup_context=setup_context, lib=lib)
