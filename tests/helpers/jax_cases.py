"""Fused functions that tests/jax_tests/test_jax.py (JAX on the CPU) and tests/jax_tests/test_jax_gpu.py both call through kspec.jax."""

from __future__ import annotations

import kspec


@kspec.fuse
def fused_mul_add(a, b):
    return a * b + 1


@kspec.fuse
def fused_rowdot(a, b):
    return (a * b).sum(axis=-1)
