"""What the gradient tests share: finite differences of a vector-Jacobian product, and the fused functions the
kspec.vjp, PyTorch and JAX tests differentiate."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import kspec


def numeric_vjp(f: Callable[..., Any], args: Sequence[Any], g: Any, eps: float = 1e-6) -> list[np.ndarray]:
    """Central differences of ``sum(f(*args) * g)`` with respect to each argument (host arrays of float64; ``f``
    returns a host array)."""
    out = []
    for k, a in enumerate(args):
        a = np.asarray(a, dtype=np.float64)
        grad = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            plus, minus = a.copy(), a.copy()
            plus[idx] += eps
            minus[idx] -= eps
            hi = np.asarray(f(*[plus if j == k else args[j] for j in range(len(args))]), dtype=np.float64)
            lo = np.asarray(f(*[minus if j == k else args[j] for j in range(len(args))]), dtype=np.float64)
            grad[idx] = ((hi - lo) * g).sum() / (2 * eps)
        out.append(grad)
    return out


@kspec.fuse
def fused_rowsum(x):
    return (x * x).sum(axis=1)


@kspec.fuse
def fused_normalized(x, b):  # two kernels: the row sums, then the division
    e = np.exp(x * b)
    return e / e.sum(axis=1, keepdims=True)


@kspec.fuse
def fused_rowmax(x):
    return x.max(axis=1)


@kspec.fuse
def fused_rowprod(x):  # a product: auto cannot differentiate it
    return x.prod(axis=1)
