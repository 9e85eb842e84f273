"""A declared backward for code kspec cannot differentiate: raw kernels, ``kspec.jit`` kernels, anything.

kspec reads an elementwise or reduction kernel's code and a fused function's trace, but not a raw kernel's CUDA
or a jit kernel's launches. ``kspec.custom_vjp`` joins a Python function of arrays that runs such kernels (and
returns its outputs) to a backward the user writes: another kspec kernel, or a Python function of arrays. The
joined function is differentiated the same way as a spec kernel: by ``kspec.vjp``, and by PyTorch's autograd
when it is called on tensors that require grad (a ``torch.autograd.Function``)::

    @kspec.custom_vjp
    def scale(x, s):
        y = cupy.empty_like(x)
        scale_raw((blocks,), (256,), (x, y, np.float32(s), np.int32(x.size)))
        return y

    @scale.defbackward
    def _(x, s, y, grad_y):        # the inputs, the outputs, the outputs' gradients
        return grad_y * s, None     # one gradient per input (None: none)

A gradient of another shape than its input (an input broadcast by the forward) is summed to the input's shape.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .._errors import KspecTypeError, KspecValueError
from ._sums import reduced, sum_to_shape


class CustomVJP:
    """A function with a declared backward (see the module docstring)."""

    __name__: str  # the forward's (functools.update_wrapper)

    def __init__(self, forward: Callable[..., Any], backward: Callable[..., Any] | None = None) -> None:
        if not callable(forward):
            raise KspecTypeError(f"kspec.custom_vjp: forward: expected a function of arrays, got {type(forward).__name__}")
        functools.update_wrapper(self, forward)
        self.forward = forward
        self.backward: Callable[..., Any] | None = None
        self._torch_apply: Callable[..., Any] | None = None
        if backward is not None:
            self.defbackward(backward)

    def defbackward(self, backward: Callable[..., Any]) -> Callable[..., Any]:
        """Set the backward: ``backward(*inputs, *outputs, *grads)`` returns one gradient per input (a tuple, or
        the gradient itself for a function of one input; None where there is none). Usable as a decorator."""
        if not callable(backward):
            raise KspecTypeError(
                f"kspec.custom_vjp: backward of '{self.__name__}': expected a kernel or a function, got {type(backward).__name__}"
            )
        self.backward = backward
        return backward

    def __call__(self, *args: Any) -> Any:
        if _needs_torch_autograd(args):
            if self._torch_apply is None:
                self._torch_apply = _torch_function(self)
            return self._torch_apply(*args)
        return self.forward(*args)

    def vjp(self, *args: Any) -> tuple[Any, Callable[..., tuple[Any, ...]]]:
        """``(outputs, back)`` as :func:`kspec.vjp` gives them."""
        if self.backward is None:
            raise KspecValueError(f"kspec.custom_vjp: '{self.__name__}' has no backward yet: declare it with .defbackward")
        result = self.forward(*args)
        outputs = result if isinstance(result, tuple) else (result,)

        def back(*grads: Any) -> tuple[Any, ...]:
            if len(grads) != len(outputs):
                raise KspecTypeError(
                    f"kspec.custom_vjp: '{self.__name__}' returns {len(outputs)} array(s); the backward takes one "
                    f"gradient per array, got {len(grads)}"
                )
            return self.gradients(args, outputs, grads, lambda g, a: reduced(g, a, None))

        return result, back

    def gradients(self, args: tuple[Any, ...], outputs: tuple[Any, ...], grads: tuple[Any, ...],
                  reduce_to: Callable[[Any, Any], Any]) -> tuple[Any, ...]:  # fmt: skip
        """The declared backward's gradients, one per input, each summed to its input's shape by ``reduce_to``."""
        if self.backward is None:
            raise KspecValueError(f"kspec.custom_vjp: '{self.__name__}' has no backward yet: declare it with .defbackward")
        made = self.backward(*args, *outputs, *grads)
        made = made if isinstance(made, tuple) else (made,)
        if len(made) != len(args):
            raise KspecValueError(
                f"kspec.custom_vjp: the backward of '{self.__name__}' returned {len(made)} gradient(s) for "
                f"{len(args)} input(s): return one per input (None where there is none)"
            )
        return tuple(None if g is None else reduce_to(g, a) for g, a in zip(made, args))


def custom_vjp(forward: Callable[..., Any] | None = None, *, backward: Callable[..., Any] | None = None) -> Any:
    """``forward`` (a function of arrays, e.g. one that launches raw or ``kspec.jit`` kernels) with a declared
    backward: ``@kspec.custom_vjp`` then ``@f.defbackward``, or ``kspec.custom_vjp(f, backward=b)``."""
    if forward is None:
        return lambda f: CustomVJP(f, backward)
    return CustomVJP(forward, backward)


def _needs_torch_autograd(args: tuple[Any, ...]) -> bool:
    for arg in args:
        if type(arg).__module__.partition(".")[0] == "torch" and getattr(arg, "requires_grad", False):
            import torch

            return torch.is_grad_enabled()
    return False


def _torch_function(fn: CustomVJP) -> Callable[..., Any]:
    """A ``torch.autograd.Function`` whose backward is ``fn``'s declared one (made once per function)."""
    import torch

    class Declared(torch.autograd.Function):  # type: ignore[misc]
        @staticmethod
        def forward(ctx: Any, *args: Any) -> Any:
            result = fn.forward(*args)
            outputs = result if isinstance(result, tuple) else (result,)
            ctx.kspec_layout = [None if isinstance(a, torch.Tensor) else a for a in args]
            ctx.save_for_backward(*[a for a in args if isinstance(a, torch.Tensor)], *outputs)
            ctx.kspec_outputs = len(outputs)
            return result

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:
            saved = ctx.saved_tensors
            split = len(saved) - ctx.kspec_outputs
            tensors, outputs = iter(saved[:split]), saved[split:]
            args = tuple(next(tensors) if v is None else v for v in ctx.kspec_layout)
            grads = tuple(g if g is not None else torch.zeros_like(o) for g, o in zip(grads, outputs))
            made = fn.gradients(args, tuple(outputs), grads, sum_to_shape)
            return tuple(g if isinstance(a, torch.Tensor) and ctx.needs_input_grad[k] else None
                         for k, (g, a) in enumerate(zip(made, args)))  # fmt: skip

    Declared.__name__ = Declared.__qualname__ = f"{fn.__name__}_kspec_custom_vjp"
    return Declared.apply
