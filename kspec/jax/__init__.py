"""kspec kernels inside JAX: ``jax.jit``, ``jax.vmap`` and eager calls, launched by XLA on its stream.

``kspec.jax.wrap(kernel)`` turns an ElementwiseKernel, a ReductionKernel (constructor or generated module) or
a ``kspec.fuse`` function into a function of JAX arrays; ``kspec.jax.call(kernel, *args, **kwargs)`` calls one
directly. The kernel is planned when JAX traces the call (output shapes and dtypes from kspec's own planning,
the binary loaded then) and runs as an XLA FFI custom call (``jax.ffi``) from the same binary: no host round
trip, nothing planned or read per call of the jitted function. See docs/guide/jax.md.

A kernel called directly on JAX tracers (inside ``jax.jit`` / ``jax.vmap``) comes here too, through the kernels
layer's hand-off (kspec/kernels/callpath/_frameworks.py): :func:`call` for what kspec.jax runs, :func:`refusal`'s error
for what it does not (raw kernels).

Importing this package does not import JAX; the first call does.
"""

from __future__ import annotations

import weakref
from typing import Any

from ._call import JaxKernel
from ._traced import refusal  # noqa: F401 - the kernels layer's hand-off reads it by name (_frameworks.py)

__all__ = ["JaxKernel", "call", "wrap"]

_wrapped: weakref.WeakKeyDictionary[Any, JaxKernel] = weakref.WeakKeyDictionary()


def wrap(kernel: Any) -> JaxKernel:
    """``kernel`` as a function of JAX arrays (the same object for the same kernel): arrays are operands, scalars
    and the kernel's keywords (``axis=``, ``keepdims=``, ``size=``) are static. Raw kernels are not supported."""
    try:
        found = _wrapped.get(kernel)
    except TypeError:  # not weakly referenceable: a new wrapper each time
        return JaxKernel(kernel)
    if found is None:
        found = _wrapped[kernel] = JaxKernel(kernel)
    return found


def call(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    """``wrap(kernel)(*args, **kwargs)``: the kernel's result(s) as JAX arrays, eagerly or inside a trace."""
    return wrap(kernel)(*args, **kwargs)
