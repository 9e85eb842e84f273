"""Eager calls of kspec ops without PyTorch's dispatcher.

An op called by name (``torch.ops.kspec.<name>``) goes through the dispatcher: with autograd, its ``Autograd``
kernel calls back into Python, which applies an ``autograd.Function`` that redispatches below autograd, which
calls back into Python again for the CUDA kernel. :func:`eager_op` is the callable :func:`kspec.torch.register`
returns: where the call is an ordinary eager one (plain tensors, no mode or functorch transform active, not
traced by Dynamo), it runs what the dispatcher would run, directly: the op's implementation for the tensors'
device, inside the op's own ``autograd.Function`` (kspec/torch/_autograd.py) where autograd records. Any other
call (``torch.compile``, ``make_fx``, fake tensors, ``vmap``, tensor subclasses, an argument the schema refuses)
takes the op, so tracing sees the operator and errors are the dispatcher's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._autograd import Forward, GradientRule, eager_function, no_gradients
from ._schema import OpSignature

_NUMBERS = (int, float, bool, complex)


def eager_op(name: str, overload: Any, signature: OpSignature, plain: tuple[Callable[..., Any], Callable[..., Any]],
             recorded: tuple[Forward, Forward] | None, gradients: GradientRule | None,
             outputs_read: Sequence[bool] | None = None) -> Callable[..., Any]:  # fmt: skip
    """The callable for op ``name``. ``plain``: its implementations on CUDA and on host tensors (the dispatcher's
    CUDA and CPU kernels); ``recorded``: the same where autograd records (their outputs, and the values the
    backward reads besides them); ``gradients``: its gradient rule (None: the kernel has none, and the outputs of
    calls that autograd records raise an error naming it on backward); ``outputs_read``: per output, whether the
    backward reads it (kspec/torch/_autograd.py's ``save``; None: all)."""
    import torch

    is_compiling = torch.compiler.is_compiling
    grad_enabled = torch.is_grad_enabled
    modes = (torch._C._len_torch_dispatch_stack, torch._C._is_torch_function_mode_enabled,
             torch._C._are_functorch_transforms_active)  # fmt: skip
    plain_types = (torch.Tensor, torch.nn.Parameter)
    tensor_at = tuple(n not in signature.scalars for n in signature.inputs)
    count = len(tensor_at)
    function = eager_function(name, gradients if gradients is not None else no_gradients(name), signature.returns_tuple,
                              outputs_read if gradients is not None else None)
    on_cuda, on_cpu = plain
    recording = recorded or (spec_forward(on_cuda), spec_forward(on_cpu))

    def call(*args: Any, **kwargs: Any) -> Any:
        if is_compiling() or len(args) != count or modes[0]() or modes[1]() or modes[2]():
            return overload(*args, **kwargs)
        cuda = cpu = records = False
        for a, is_tensor in zip(args, tensor_at):
            if is_tensor:
                if type(a) not in plain_types:
                    return overload(*args, **kwargs)  # a subclass, or not a tensor: its rules, or the schema's error
                if a.is_cuda:
                    cuda = True
                elif a.is_cpu:
                    cpu = True
                else:
                    return overload(*args, **kwargs)  # meta and other devices: the dispatcher's answer
                records = records or a.requires_grad
            elif type(a) not in _NUMBERS:
                return overload(*args, **kwargs)
        if not (cuda or cpu):
            return overload(*args, **kwargs)
        if records and grad_enabled():
            return function.apply(recording[0] if cuda else recording[1], kwargs, *args)
        return (on_cuda if cuda else on_cpu)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.overload = overload  # type: ignore[attr-defined]  # torch.ops.kspec.<name>.default
    return call


def spec_forward(call: Callable[..., Any]) -> Forward:
    """A :data:`Forward` of an implementation that returns the outputs (one, or a tuple), keeps nothing and finds
    nothing for the backward."""

    def run(args: Sequence[Any], keywords: Mapping[str, Any]) -> tuple[tuple[Any, ...], Sequence[Any], Any]:
        result = call(*args, **keywords)
        return (result if isinstance(result, tuple) else (result,)), (), None

    return run
