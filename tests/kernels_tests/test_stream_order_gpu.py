"""ElementwiseKernel, ReductionKernel and kspec.fuse calls order the producer of a ``__cuda_array_interface__``
or DLPack input before their launch (issue 27), on a GPU.

A producer queues a slow fill of a large array on a stream of its own (non-blocking, so nothing orders it
implicitly); kspec then reads the array on another stream. Unordered, the read sees the zeros the array
started with; ordered, every element is the filled value. The CPU side (which stream waits on which, in
which order) is tests/kernels_tests/test_stream_order_cpu.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import kspec
from helpers.protocol_arrays import CaiOnly, DLOnly

pytestmark = pytest.mark.gpu

N = 1 << 26
SOURCE = r"""
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}
extern "C" __global__ void fill(float* x, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = (float)(i % 1000) + 1.0f;
}
"""
CYCLES = 200_000_000  # ~0.1 s before the fill starts: a reader not ordered after it sees the zeros
WANT = (np.arange(N, dtype=np.int64) % 1000 + 1).astype(np.float32)


class CupyCai:
    """A CuPy array seen only through ``__cuda_array_interface__`` v3, its ``stream`` the side stream."""

    def __init__(self, base, stream: int) -> None:
        self.base = base
        self.__cuda_array_interface__ = {**base.__cuda_array_interface__, "version": 3, "stream": stream}


class CaiWithAttributes(CaiOnly):
    """As Numba's device arrays: CAI plus the ``dtype`` / ``ndim`` kspec.fuse reads for its signature."""

    def __init__(self, base, stream: int) -> None:
        super().__init__(base, stream)
        self.dtype, self.ndim = base.dtype, base.ndim


def _slowly_filled(producer: kspec.Stream) -> kspec.DeviceArray:
    """An array of zeros that the producer stream fills after a long spin."""
    x = kspec.zeros(N, np.float32, stream=producer)
    kspec.RawKernel(SOURCE, "spin")((1,), (1,), (np.int64(CYCLES),), stream=producer)
    kspec.RawKernel(SOURCE, "fill")(((N + 255) // 256,), (256,), (x, np.int64(N)), stream=producer)
    return x


def _plus_one() -> kspec.ElementwiseKernel:
    return kspec.ElementwiseKernel("float32 x", "float32 y", "y = x + 1.0f", "order_plus_one")


@pytest.fixture
def streams():
    return kspec.Stream(non_blocking=True), kspec.Stream(non_blocking=True)


def test_elementwise_orders_a_cai_producer_on_every_call(streams):
    producer, consumer = streams
    k = _plus_one()
    for _ in range(3):  # repeated calls too: a CAI input is ordered per call, never from a remembered call
        x = _slowly_filled(producer)
        y = k(CaiOnly(x, stream=producer.handle), stream=consumer)
        np.testing.assert_array_equal(y.get(stream=consumer), WANT + 1)


def test_elementwise_orders_a_cai_producer_before_the_default_and_entered_streams(streams):
    producer, consumer = streams
    k = _plus_one()
    x = _slowly_filled(producer)
    y = k(CaiOnly(x, stream=producer.handle))  # no stream=: the legacy default stream
    np.testing.assert_array_equal(y.get(), WANT + 1)
    x = _slowly_filled(producer)
    with consumer:
        y = k(CaiOnly(x, stream=producer.handle))
    np.testing.assert_array_equal(y.get(stream=consumer), WANT + 1)


def test_elementwise_asks_a_dlpack_producer_for_the_launch_stream(streams):
    producer, consumer = streams
    x = DLOnly(_slowly_filled(producer))
    y = _plus_one()(x, stream=consumer)
    np.testing.assert_array_equal(y.get(stream=consumer), WANT + 1)
    assert x.streams == [consumer.handle]


@pytest.mark.parametrize("wrap", ["cai", "dlpack"])
def test_reduction_orders_its_producer(streams, wrap):
    producer, consumer = streams
    k = kspec.ReductionKernel("float32 x", "float32 y", "x", "max(a, b)", "y = a", "0", f"order_max_{wrap}")
    for _ in range(2):
        x = _slowly_filled(producer)
        arg = CaiOnly(x, stream=producer.handle) if wrap == "cai" else DLOnly(x)
        y = k(arg, stream=consumer)
        assert float(y.get(stream=consumer)) == 1000.0


def test_fused_function_orders_a_cai_producer(streams):
    producer, consumer = streams

    @kspec.fuse()
    def scaled(a, b):
        return a * 2 + b

    x = _slowly_filled(producer)
    b = kspec.zeros(N, np.float32, stream=consumer)
    with consumer:
        y = scaled(CaiWithAttributes(x, stream=producer.handle), b)
    np.testing.assert_array_equal(y.get(stream=consumer), WANT * 2)


def test_cupy_producer_stream_through_cai():
    cupy = pytest.importorskip("cupy")
    side = cupy.cuda.Stream(non_blocking=True)
    consumer = kspec.Stream(non_blocking=True)
    spin = cupy.RawKernel(SOURCE, "spin")
    with side:
        x = cupy.zeros(N, dtype=cupy.float32)
        spin((1,), (1,), (np.int64(CYCLES),))
        x[...] = (cupy.arange(N, dtype=cupy.int64) % 1000 + 1).astype(cupy.float32)  # on `side`, after the spin
    y = _plus_one()(CupyCai(x, side.ptr), stream=consumer)
    np.testing.assert_array_equal(y.get(stream=consumer), WANT + 1)
    side.synchronize()
