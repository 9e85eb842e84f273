"""Autograd for kspec ops.

A kspec op's backward asks the op's gradient rule (kspec/torch/_backward_of.py: a spec kernel's backward kernel,
or a fused function's kernels in reverse) for one gradient per argument, computed with kspec ops (registered like
any, so AOTAutograd traces them into the backward graph of a compiled function), and sums each to its argument's
shape (``sum_to_size``: the axes it was broadcast along). Scalars and arguments that need no gradient get None.

Two front doors share that: ``torch.library.register_autograd`` on ``kspec::<name>`` (:func:`add_autograd`: what
``torch.compile`` traces, and ``torch.ops.kspec.<name>`` called by name), and a plain ``torch.autograd.Function``
(:func:`eager_function`) that eager calls take without the dispatcher (kspec/torch/_eager.py). Both save the same
values (:func:`save`) and run the same backward (:func:`gradients_of`). An eager forward also hands its backward
what it already worked out for the call (a fused function's program): the rule then does not look it up again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..grad import sum_to_shape

NAMESPACE = "kspec"

# (positional arguments, keyword-only arguments, outputs, the outputs' gradients, whether each positional argument
# needs its gradient, what the forward found for the call (a Forward's third item; None: look it up)) -> one
# gradient (or None) per positional argument
GradientRule = Callable[[Sequence[Any], Mapping[str, Any], Sequence[Any], Sequence[Any], Sequence[bool], Any],
                        Sequence[Any]]

# (the op's positional arguments, its keyword arguments) -> (its outputs, the values its backward reads besides them,
# what the rule would look up again for the call: a fused function's program, or None)
Forward = Callable[[Sequence[Any], Mapping[str, Any]], tuple[tuple[Any, ...], Sequence[Any], Any]]


def save(ctx: Any, inputs: Sequence[Any], outputs: Sequence[Any], keywords: Mapping[str, Any] | None,
         kept: Sequence[Any] = (), found: Any = None, outputs_read: Sequence[bool] | None = None) -> None:  # fmt: skip
    """Keep what the backward reads: the tensor inputs, the outputs (``kept`` after them: values between a fused
    function's kernels), the numbers and keywords, and what the forward ``found`` for the rule. ``outputs_read``:
    per output, whether the backward reads its value (None: all do; the op decides once, kspec.spec's
    ``outputs_read``). An output it never reads is not kept, only its shape, dtype and device: autograd would
    otherwise hold an activation-sized array until the backward."""
    import torch

    ctx.kspec_keywords = dict(keywords or {})
    ctx.kspec_found = found
    ctx.kspec_grads = len(outputs)  # the outputs with gradients: not the kept values
    unsaved: dict[int, tuple[Any, Any, Any]] = {}  # output position -> (shape, dtype, device)
    if outputs_read is not None:
        unsaved = {j: (o.shape, o.dtype, o.device) for j, (o, read) in enumerate(zip(outputs, outputs_read)) if not read}
        outputs = [o for o, read in zip(outputs, outputs_read) if read]
    ctx.kspec_unsaved = unsaved
    ctx.save_for_backward(*[a for a in inputs if isinstance(a, torch.Tensor)], *outputs, *kept)
    ctx.kspec_layout = [None if isinstance(a, torch.Tensor) else a for a in inputs]
    ctx.kspec_outputs = len(outputs) + len(kept)


def gradients_of(ctx: Any, grads: Sequence[Any], needed: Sequence[bool], gradients: GradientRule) -> tuple[Any, ...]:
    """One gradient (or None) per positional argument saved by :func:`save`, for the outputs' ``grads``."""
    import torch

    grads = grads[: ctx.kspec_grads]
    saved = ctx.saved_tensors
    split = len(saved) - ctx.kspec_outputs
    tensors, outputs = iter(saved[:split]), saved[split:]
    args = [next(tensors) if value is None else value for value in ctx.kspec_layout]
    unsaved = ctx.kspec_unsaved
    if unsaved:
        outputs, grads = _with_stand_ins(outputs, grads, unsaved)
    grads = tuple(g if g is not None else torch.zeros_like(o) for g, o in zip(grads, outputs))
    # kspec's backward kernels give grad * f'(z) (JAX's convention for complex values); PyTorch's is
    # grad * conj(f'(z)) = conj(conj(grad) * f'(z)): the same kernels, conjugated on the way in and out. The saved
    # tensors are the tensor arguments and the outputs (less those not kept: their dtypes)
    complex_values = any(t.is_complex() for t in saved) or any(dtype.is_complex for _, dtype, _ in unsaved.values())
    if complex_values:
        grads = tuple(torch.conj_physical(g) if g.is_complex() else g for g in grads)
    made = gradients(args, ctx.kspec_keywords, outputs, grads, needed, ctx.kspec_found)
    result: list[Any] = []
    for k, (arg, grad) in enumerate(zip(args, made)):
        if grad is None or not needed[k] or not isinstance(arg, torch.Tensor):
            result.append(None)
            continue
        if complex_values and grad.is_complex():
            grad = torch.conj_physical(grad) if arg.is_complex() else grad.real  # a real input: real
        result.append(sum_to_shape(grad, arg))
    return tuple(result)


def _with_stand_ins(kept: Sequence[Any], grads: Sequence[Any], unsaved: Mapping[int, tuple[Any, Any, Any]]
                    ) -> tuple[list[Any], list[Any]]:  # fmt: skip
    """(the outputs, their gradients) where the outputs in ``unsaved`` (the backward reads none of them) were not
    kept: each stands in as its gradient, which has its shape and dtype (zeros where none came), so the backward
    kernel's parameters bind as before; ``kept``: the kept outputs in order, then the values after them."""
    import torch

    outputs, grads, rest = [], list(grads), iter(kept)
    for j, grad in enumerate(grads):
        if j not in unsaved:
            outputs.append(next(rest))
            continue
        if grad is None:
            shape, dtype, device = unsaved[j]
            grads[j] = torch.zeros(shape, dtype=dtype, device=device)
        outputs.append(grads[j])
    outputs.extend(rest)  # a fused function's values between kernels (never left out)
    return outputs, grads


def add_autograd(lib: Any, name: str, gradients: GradientRule, hidden: bool = False,
                 outputs_read: Sequence[bool] | None = None) -> None:  # fmt: skip
    """Give op ``name`` a backward. ``gradients`` may raise (a kspec error naming what cannot be
    differentiated): only when a gradient is asked. ``hidden``: the op's last output is a ``Tensor[]`` of values
    kept for the backward (kspec/torch/_saving.py): saved too, and passed to ``gradients`` after the outputs.
    ``outputs_read``: as for :func:`save`."""
    import torch

    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any, keyword_only_inputs: Any = None) -> None:
        outputs = output if isinstance(output, tuple) else (output,)
        kept: Sequence[Any] = ()
        if hidden:
            outputs, kept = outputs[:-1], outputs[-1]
        save(ctx, inputs, outputs, keyword_only_inputs, kept, outputs_read=outputs_read)

    def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
        return gradients_of(ctx, grads, ctx.needs_input_grad, gradients)

    torch.library.register_autograd(f"{NAMESPACE}::{name}", backward, setup_context=setup_context, lib=lib)


def eager_function(name: str, gradients: GradientRule, returns_tuple: bool,
                   outputs_read: Sequence[bool] | None = None) -> Any:  # fmt: skip
    """A ``torch.autograd.Function`` for op ``name``'s eager calls: ``apply(forward, keywords, *args)`` runs
    ``forward`` (kspec/torch/_eager.py gives the call's implementation) below autograd and records the op's
    backward, as the op's own autograd does, without the dispatcher's trips through Python on the way.
    ``outputs_read``: as for :func:`save`."""
    import torch

    def forward(ctx: Any, run: Forward, keywords: Mapping[str, Any], *args: Any) -> Any:
        outputs, kept, found = run(args, keywords)
        save(ctx, args, outputs, keywords, kept, found, outputs_read)
        return outputs if returns_tuple else outputs[0]

    def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
        return (None, None, *gradients_of(ctx, grads, ctx.needs_input_grad[2:], gradients))

    members = {"forward": staticmethod(forward), "backward": staticmethod(backward)}
    return type(f"kspec_{name}_eager", (torch.autograd.Function,), members)


def no_gradients(name: str) -> GradientRule:
    """The rule of an op whose kernel has no gradients: asked for one, it raises an error naming the kernel
    (PyTorch's convention for operators without a derivative), where PyTorch's fallback for an op without
    autograd would warn and leave the inputs without gradients."""
    from .._errors import KspecNotImplementedError

    def raises(args: Sequence[Any], keywords: Mapping[str, Any], outputs: Sequence[Any], grads: Sequence[Any],
               needed: Sequence[bool], found: Any = None) -> Sequence[Any]:  # fmt: skip
        raise KspecNotImplementedError(
            f"kspec.torch: kernel '{name}' has no gradients, and a backward through it was asked for: declare "
            "them in its spec (grad = \"auto\" derives them from its operation, or a table per input), or call "
            "it under torch.no_grad() or on detached tensors where none should flow"
        )

    return raises
