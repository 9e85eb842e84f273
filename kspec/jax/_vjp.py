"""A kspec call that JAX can differentiate: ``jax.custom_vjp`` over the traced call, whose backward is
the kernel's backward kernel (its spec's ``grad`` table, kspec/spec/_backward.py) run through kspec.jax too.

The backward reads the forward's arguments (static scalars back in their places), its outputs (those it reads:
kspec.spec's ``outputs_read``; the others are no residuals) and their gradients, and writes one gradient per
differentiated input; each is summed over the axes its input was broadcast along. An input without a gradient
entry, and an output given as an argument, gets zeros (float0 for integers, as JAX requires).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._callspec import Static


def with_vjp(traced_call: Callable[..., Any], backward_call: Callable[[bool], Callable[..., Any]], spec: Any,
             layout: tuple[Static | None, ...], keywords: tuple[tuple[str, Any], ...]) -> Callable[..., Any]:  # fmt: skip
    """``traced_call`` (a function of the call's arrays) with a VJP from ``backward_call(shared)`` (the backward
    kernel, or its variant that writes a shared gradient once, as a function of JAX arrays: kspec.jax's
    JaxKernel of it)."""
    import jax

    from ..grad import by_input, kept_shape, outputs_read, shared_for

    reduction = spec.KIND == "reduction"
    read = outputs_read(spec)
    names = spec.backward()[0]
    params = [p.name for p in spec.in_params]
    # the parameter each array argument fills (None past the inputs: an output given as an argument)
    array_params = [params[k] if k < len(params) else None for k, item in enumerate(layout) if item is None]

    @jax.custom_vjp
    def call(*arrays: Any) -> Any:
        return traced_call(*arrays)

    def forward(*arrays: Any) -> tuple[Any, Any]:
        outputs = traced_call(*arrays)
        outs = outputs if isinstance(outputs, tuple) else (outputs,)
        # an output the backward never reads is no residual (XLA would keep it alive until the backward)
        return outputs, (arrays, tuple(o if r else None for o, r in zip(outs, read)))

    def back(saved: Any, cotangents: Any) -> tuple[Any, ...]:
        arrays, kept = saved
        cts = cotangents if isinstance(cotangents, tuple) else (cotangents,)
        outs = tuple(c if o is None else o for o, c in zip(kept, cts))  # its cotangent stands in: shape and dtype
        given = iter(arrays)
        inputs = [item.value if item is not None else next(given) for item in layout][: len(params)]
        options = dict(keywords)
        if reduction:  # the output and its gradient broadcast back over the inputs, the reduced axes kept
            kept = kept_shape([tuple(np.shape(a)) for a in inputs], options.pop("axis", None))
            outs, cts = tuple(o.reshape(kept) for o in outs), tuple(c.reshape(kept) for c in cts)
            options.pop("keepdims", None)
        shared = shared_for(spec, inputs)  # the shapes are static: chosen while tracing
        by_name = by_input(names, backward_call(bool(shared))(*inputs, *outs, *cts, **options), shared)
        return tuple(_shaped(by_name.get(name) if name is not None else None, a) for name, a in zip(array_params, arrays))

    call.defvjp(forward, back)
    return call


def _shaped(grad: Any, array: Any) -> Any:
    """``grad`` summed to ``array``'s shape and dtype; zeros (float0 for an integer array) where there is none."""
    import jax
    import jax.numpy as jnp

    if grad is None:
        if jnp.issubdtype(array.dtype, jnp.inexact):
            return jnp.zeros(array.shape, array.dtype)
        return np.zeros(array.shape, dtype=jax.dtypes.float0)
    lead = grad.ndim - array.ndim
    axes = tuple(range(lead)) + tuple(lead + d for d, n in enumerate(array.shape) if n == 1 and grad.shape[lead + d] != 1)
    if axes:
        grad = grad.sum(axis=axes).reshape(array.shape)
    return grad.astype(array.dtype)
