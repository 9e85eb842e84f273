"""kspec.jit kernels run on both devices (NumPy arrays on kspec's CPU device, CuPy arrays on a GPU) where
cupyx.jit's tests pin results: typed NaN/inf constants per dtype, `return None`, cached codes after real
calls, and the atomics CUDA 13 adds beyond 32/64-bit integers (16-bit CAS, float16 subtraction, complex64
addition and complex128 exchange/CAS, which a GPU has from sm_90 and the CPU device always). What needs no
device (translation, CuPy's exception types, the atomic table against NVRTC) is in test_jit_cupy_compat.py."""

from __future__ import annotations

import math

import numpy
import numpy as np
import pytest

import kspec
from helpers.device_arrays import HostArrays
from kspec import jit


def before_sm90(xp) -> bool:
    """A GPU older than sm_90 (no 128-bit atomicCAS/atomicExch, no float2 atomicAdd); the CPU device has them."""
    return not isinstance(xp, HostArrays) and kspec.get_device().compute_capability < (9, 0)


def _constants_kernel(dtype):
    @jit.rawkernel()
    def constants(x):
        tid = jit.threadIdx.x + jit.blockDim.x * jit.blockIdx.x
        if tid < x.size // 4:
            x[4 * tid] = numpy.dtype(dtype).type(numpy.inf)
            x[4 * tid + 1] = numpy.dtype(dtype).type(-math.inf)
            x[4 * tid + 2] = numpy.dtype(dtype).type(float("nan"))
            x[4 * tid + 3] = numpy.dtype(dtype).type(2.5)

    return constants


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex64", "complex128"])
def test_nan_and_inf_constants(dtype, xp):
    x = xp.zeros(40, dtype=dtype)
    _constants_kernel(dtype)((5,), (6,), (x,))
    got = xp.asnumpy(x).reshape(10, 4)
    assert got.dtype == np.dtype(dtype)
    expected = np.array([np.inf, -np.inf, np.nan, 2.5], dtype=dtype)
    np.testing.assert_array_equal(got, np.broadcast_to(expected, (10, 4)))
    if got.dtype.kind == "c":
        assert (got.imag == 0).all()


@jit.rawkernel()
def _copy_returning_none(x, y):
    tid = jit.threadIdx.x + jit.blockDim.x * jit.blockIdx.x
    if tid >= x.size:
        return
    y[tid] = x[tid]
    return None


def test_return_none_kernel_and_cached_codes(xp):
    kernel = jit.rawkernel()(_copy_returning_none.func)
    assert kernel.cached_codes == {}
    hx = np.arange(30, dtype=np.int32)
    x, y = xp.asarray(hx), xp.zeros(30, dtype=np.int32)
    kernel((5,), (8,), (x, y))  # 40 threads, 30 elements: the early return matters
    np.testing.assert_array_equal(xp.asnumpy(y), hx)
    assert len(kernel.cached_codes) == 1 and "return;" in kernel.cached_code
    fx, fy = xp.asarray(hx.astype(np.float32)), xp.zeros(30, dtype=np.float32)
    kernel((5,), (8,), (fx, fy))
    kernel((5,), (8,), (x, y))
    assert len(kernel.cached_codes) == 2 and "const float* __restrict__ _x_data" in kernel.cached_code
    np.testing.assert_array_equal(xp.asnumpy(fy), hx.astype(np.float32))


@jit.rawkernel()
def _compare_and_swap(x, y, out):
    tid = jit.blockDim.x * jit.blockIdx.x + jit.threadIdx.x
    if tid < x.size:
        jit.atomic_cas(out, tid, x[tid], y[tid])  # out[tid] = y[tid] where out[tid] == x[tid]


@pytest.mark.parametrize("dtype", ["uint16", "int16", "int64", "complex128"])
def test_atomic_cas(dtype, xp):
    if dtype == "complex128" and before_sm90(xp):
        pytest.skip("128-bit atomicCAS needs sm_90")
    hx = np.arange(1024).astype(dtype)
    hy = hx.copy()
    hy[512:] = 0
    hout = hx.copy()
    hout[:512] = 0
    out = xp.asarray(hout)
    _compare_and_swap((32,), (32,), (xp.asarray(hx), xp.asarray(hy), out))
    expected = np.where(hout == hx, hy, hout)
    assert not expected.any()  # every slot either swapped to y's 0 or kept its 0
    np.testing.assert_array_equal(xp.asnumpy(out), expected)


@jit.rawkernel()
def _subtract_all(x, out):
    tid = jit.blockDim.x * jit.blockIdx.x + jit.threadIdx.x
    if tid < x.size:
        jit.atomic_sub(out, 0, x[tid])


def test_atomic_sub_float16(xp):
    x = xp.asarray(np.full(256, 0.25, np.float16))
    out = xp.asarray(np.array([100.0], np.float16))
    _subtract_all((8,), (32,), (x, out))
    assert xp.asnumpy(out)[0] == np.float16(36.0)


@jit.rawkernel()
def _complex_atomics(values, total, slots, previous):
    tid = jit.blockDim.x * jit.blockIdx.x + jit.threadIdx.x
    if tid < values.size:
        jit.atomic_add(total, 0, values[tid])
        t = numpy.float64(tid)
        previous[tid] = jit.atomic_exch(slots, tid % 4, complex(t, -t))


def test_complex_atomics_on_sm90(xp):
    if before_sm90(xp):
        pytest.skip("complex64 atomicAdd (float2) and 128-bit atomicExch need sm_90")
    hv = (np.arange(512) + 1j * np.arange(512)[::-1]).astype(np.complex64)
    total = xp.zeros(1, dtype=np.complex64)
    slots = xp.zeros(4, dtype=np.complex128)
    previous = xp.zeros(512, dtype=np.complex128)
    _complex_atomics((4,), (128,), (xp.asarray(hv), total, slots, previous))
    np.testing.assert_allclose(xp.asnumpy(total)[0], hv.astype(np.complex128).sum(), rtol=1e-6)
    # every value written to a slot was read back exactly once (by the next exchange) or is still there
    seen = np.concatenate([xp.asnumpy(previous), xp.asnumpy(slots)])
    written = np.array([complex(t, -t) for t in range(512)])
    assert sorted(seen[seen != 0].tolist(), key=lambda z: z.real) == sorted(written[written != 0].tolist(), key=lambda z: z.real)
