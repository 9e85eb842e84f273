"""Bare kernel calls on JAX tracers on the GPU (issue [Z]): tests/jax_tests/test_jax_bare.py's checks on JAX's CUDA backend.

Inside ``jax.jit`` / ``jax.vmap`` a kernel called directly runs as ``kspec.jax.call`` would, on XLA's stream; the
results equal kspec's own eager calls on the same JAX arrays (kspec takes them eagerly through DLPack, a path
the hand-off leaves alone). New values do not trace again; a raw kernel on tracers raises kspec's error.
Skipped without JAX's CUDA backend.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

import kspec  # noqa: E402
from helpers.jax_cases import fused_mul_add, fused_rowdot  # noqa: E402

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parents[2]

ADD2 = kspec.ElementwiseKernel("T x, T y", "T z", "z = x + 2 * y", "baregpu_add2")
SUMSQ = kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "baregpu_sumsq")
COPY = kspec.RawKernel(
    'extern "C" __global__ void baregpu_copy(const float* x, float* y, int n) {\n'
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) y[i] = x[i];\n"
    "}\n",
    "baregpu_copy",
)


@pytest.fixture(autouse=True, scope="module")
def _jax_gpu() -> None:
    try:
        jax.devices("gpu")
    except RuntimeError as exc:
        pytest.skip(f"JAX has no GPU backend here: {exc}")


def _modules():
    sys.path.insert(0, str(REPO))
    try:
        from generated import elementwise, reduction
    finally:
        sys.path.remove(str(REPO))
    return elementwise, reduction


def _host(result):
    return np.asarray(result.get() if hasattr(result, "get") else result)


def _data(shape, seed=0):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def test_bare_calls_in_jit_equal_eager_kspec():
    elementwise, reduction = _modules()
    x, y, m = _data((1000,)), _data((1000,), 1), _data((64, 300), 2)

    @jax.jit
    def f(a, b, c):
        z = ADD2(a, b)
        return (elementwise.squared_diff_generic(z, b), SUMSQ(c, axis=1), SUMSQ(c, axis=0, keepdims=True),
                reduction.l2norm(c, axis=1), fused_mul_add(z, b), fused_rowdot(c, c))  # fmt: skip

    got = f(x, y, m)
    z = ADD2(x, y)  # eager on JAX arrays: kspec's own call, through DLPack
    want = (elementwise.squared_diff_generic(z, y), SUMSQ(m, axis=1), SUMSQ(m, axis=0, keepdims=True),
            reduction.l2norm(m, axis=1), fused_mul_add(z, y), fused_rowdot(m, m))  # fmt: skip
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), _host(w), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(got[3]), np.linalg.norm(np.asarray(m), axis=1), rtol=1e-5)


def test_new_values_do_not_trace_again():
    traces = []

    @jax.jit
    def f(a, b):
        traces.append(a.shape)
        return fused_mul_add(ADD2(a, b), b), SUMSQ(a, axis=0)

    for seed in range(3):
        x, y = _data((8, 128), seed), _data((8, 128), seed + 10)
        got = f(x, y)
        xh, yh = np.asarray(x), np.asarray(y)
        np.testing.assert_allclose(np.asarray(got[0]), (xh + 2 * yh) * yh + 1, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(got[1]), (xh * xh).sum(axis=0), rtol=1e-4)
    assert len(traces) == 1 and f._cache_size() == 1


def test_vmap_of_bare_calls():
    x, y = _data((6, 3, 40)), _data((40,), 1)
    got = jax.vmap(lambda a, b: ADD2(a, b), in_axes=(0, None))(x, y)
    np.testing.assert_allclose(np.asarray(got), np.asarray(x) + 2 * np.asarray(y), rtol=1e-6)
    got = jax.jit(jax.vmap(lambda a: SUMSQ(a, axis=1)))(x)
    np.testing.assert_allclose(np.asarray(got), (np.asarray(x) ** 2).sum(axis=2), rtol=1e-5)


def test_raw_kernel_on_tracers_is_refused():
    x = _data((64,))
    with pytest.raises(kspec.KspecNotImplementedError, match="kernel 'baregpu_copy': a RawKernel cannot run inside jax.jit"):
        jax.jit(lambda a: COPY((1,), (64,), (a, a, np.int32(64))))(x)
