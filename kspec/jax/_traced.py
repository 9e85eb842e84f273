"""Bare kernel calls on JAX tracers: the kernels layer's hand-off lands here (kspec/kernels/callpath/_frameworks.py).

An ElementwiseKernel, a ReductionKernel or a fused function called on tracers runs as ``kspec.jax.call``; what
kspec.jax cannot express (raw kernels, kspec.jit: they declare no outputs to plan) gets :func:`refusal`'s
error, naming the kernel, the transformation and what to do, instead of a failure deep in a launch.
"""

from __future__ import annotations

from typing import Any

from .._errors import KspecNotImplementedError, about_kernel

# the tracer classes of JAX's transformations, by name (their modules move between JAX releases)
_TRANSFORMATIONS = {
    "DynamicJaxprTracer": "jax.jit", "JaxprTracer": "jax.jit", "BatchTracer": "jax.vmap",
    "JVPTracer": "jax.grad / jax.jvp", "LinearizeTracer": "jax.grad / jax.linearize",
}


def transformation(args: tuple[Any, ...]) -> str:
    """The JAX transformation that traces the first tracer among ``args`` ('jax.jit', 'jax.vmap', ...)."""
    import jax

    for arg in args:
        if isinstance(arg, jax.core.Tracer):
            return _TRANSFORMATIONS.get(type(arg).__name__, "a JAX transformation")
    return "a JAX transformation"


def refusal(what: str, name: str, args: tuple[Any, ...]) -> Exception:
    """The error for ``what`` (e.g. 'RawKernel') named ``name`` called on JAX tracers: kspec.jax runs kernels
    that declare their outputs (elementwise, reduction, fused), not this one."""
    inside = transformation(args)
    return KspecNotImplementedError(about_kernel(
        name,
        f"a {what} cannot run inside {inside}: its arguments are JAX tracers, which have no memory to launch on, "
        "and kspec.jax runs only kernels that declare their outputs (ElementwiseKernel, ReductionKernel, spec-file "
        f"and generated kernels, kspec.fuse functions). Call it outside {inside} on concrete arrays, or write it as "
        "one of those kernels (docs/guide/jax.md)",
    ))
