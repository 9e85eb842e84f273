"""The result checks the reduction strategies' tests share (slab, fold, interleaved lanes: each strategy's own
test module picks the layouts that reach it). ``xp`` is the device's array library (tests/helpers/device_arrays.py):
NumPy on kspec's CPU device, CuPy on a GPU."""

from __future__ import annotations

from typing import Any

import numpy as np

import kspec


def check_norms(xp: Any, shape: tuple[int, ...], axis: tuple[int, ...], seed: int) -> None:
    """A float64 sum of squares, a max without an identity, the same sum over a view one element into its buffer
    (not 16-byte aligned: scalar loads) and an L2 norm (post_map applied once) of float32 normals."""
    rng = np.random.default_rng(seed)
    h = rng.standard_normal(shape).astype(np.float32)
    want = np.sum(h.astype(np.float64) ** 2, axis=axis)
    ssq = kspec.ReductionKernel("T x", "float64 y", "double(x) * x", "a + b", "y = a", "0", "checked_ssq")
    np.testing.assert_allclose(xp.asnumpy(ssq(xp.asarray(h), axis=axis)), want, rtol=1e-6)
    amax = kspec.ReductionKernel("T x", "T y", "x", "max(a, b)", "y = a", None, "checked_amax")
    np.testing.assert_array_equal(xp.asnumpy(amax(xp.asarray(-np.abs(h)), axis=axis)), (-np.abs(h)).max(axis=axis))
    flat = xp.asarray(np.concatenate([[0.0], h.ravel()]).astype(np.float32))
    np.testing.assert_allclose(xp.asnumpy(ssq(flat[1:].reshape(shape), axis=axis)), want, rtol=1e-6)
    l2 = kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "checked_l2")
    np.testing.assert_allclose(xp.asnumpy(l2(xp.asarray(h), axis=axis)), np.sqrt(want), rtol=1e-4)


def check_dot(xp: Any, dtype: str, shape: tuple[int, ...], axis: tuple[int, ...], seed: int) -> None:
    """Two inputs of one layout and type ``dtype``, their products summed in float64."""
    rng = np.random.default_rng(seed)
    h = (rng.standard_normal(shape) * 4).astype(dtype)
    w = (rng.standard_normal(shape) * 4).astype(dtype)
    dot = kspec.ReductionKernel("T x, T w", "float64 y", "double(x) * double(w)", "a + b", "y = a", "0", "checked_dot")
    want = np.sum(h.astype(np.float64) * w.astype(np.float64), axis=axis)
    np.testing.assert_allclose(xp.asnumpy(dot(xp.asarray(h), xp.asarray(w), axis=axis)), want, rtol=1e-9, atol=1e-9)


def check_strided_output(xp: Any, shape: tuple[int, ...], axis: tuple[int, ...], seed: int) -> None:
    """A float64 sum of squares written through a given output that is every other element of a buffer: the
    elements between stay untouched."""
    rng = np.random.default_rng(seed)
    h = rng.standard_normal(shape).astype(np.float32)
    want = np.sum(h.astype(np.float64) ** 2, axis=axis)
    ssq = kspec.ReductionKernel("T x", "float64 y", "double(x) * x", "a + b", "y = a", "0", "checked_ssq")
    out = xp.zeros(want.shape[:-1] + (2 * want.shape[-1],), np.float64)
    ssq(xp.asarray(h), out[..., ::2], axis=axis)
    got = xp.asnumpy(out)
    np.testing.assert_allclose(got[..., ::2], want, rtol=1e-6)
    assert not got[..., 1::2].any()


def check_keepdims(xp: Any, shape: tuple[int, ...], axis: tuple[int, ...], seed: int) -> None:
    """A float64 sum of squares with keepdims=True: the reduced axes stay, as ones."""
    h = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    ssq = kspec.ReductionKernel("T x", "float64 y", "double(x) * x", "a + b", "y = a", "0", "checked_ssq")
    kept = xp.asnumpy(ssq(xp.asarray(h), axis=axis, keepdims=True))
    assert kept.shape == tuple(1 if a in axis else n for a, n in enumerate(shape))
    want = np.sum(h.astype(np.float64) ** 2, axis=axis)
    np.testing.assert_allclose(kept.reshape(want.shape), want, rtol=1e-6)
