"""Arrays of other libraries read through cuda.core's StridedMemoryView (kspec/runtime/_generic.py), on a GPU:
wrappers that expose only DLPack or only ``__cuda_array_interface__``, a producer's stream ordered before
kspec's, what a view keeps alive, and pointers the driver cannot place.

Elsewhere: JAX and Numba inputs in tests/kernels_tests/test_cupy_dropin_gpu.py, a DLPack-only CuPy array in
tests/runtime_tests/test_runtime_gpu.py, CAI views bound to textures in tests/runtime_tests/test_texture_gpu.py.
"""

from __future__ import annotations

import gc
import sys
import threading

import numpy as np
import pytest

import kspec
from helpers.protocol_arrays import CaiOnly, DLOnly
from kspec.runtime import _dlpack, array_info

pytestmark = pytest.mark.gpu

N = 1 << 16
SOURCE = r"""
extern "C" __global__ void slow_fill(float* x, int n, long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = i + 1.0f;
}
extern "C" __global__ void twice(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""
CYCLES = 200_000_000  # ~0.1 s: a reader not ordered after the fill sees the zeros
WANT = np.arange(1, N + 1, dtype=np.float32)
GRID, BLOCK = ((N + 255) // 256,), (256,)


def _slowly_filled(stream: kspec.Stream) -> kspec.DeviceArray:
    """An array of zeros that a slow kernel queued on ``stream`` fills with 1..N."""
    x = kspec.zeros(N, np.float32, stream=stream)
    kspec.RawKernel(SOURCE, "slow_fill")(GRID, BLOCK, (x, np.int32(N), np.int64(CYCLES)), stream=stream)
    return x


def test_cai_producer_stream_is_ordered_before_the_consumer_stream():
    producer, consumer = kspec.Stream(non_blocking=True), kspec.Stream(non_blocking=True)
    x = _slowly_filled(producer)
    a = kspec.asarray(CaiOnly(x, stream=producer.handle), stream=consumer)  # cuda.core orders it with an event
    np.testing.assert_array_equal(a.get(stream=consumer), WANT)


def test_raw_kernel_orders_a_cai_producer_stream_before_its_launch():
    producer, consumer = kspec.Stream(non_blocking=True), kspec.Stream(non_blocking=True)
    x = _slowly_filled(producer)
    y = kspec.zeros(N, np.float32, stream=consumer)
    kspec.RawKernel(SOURCE, "twice")(GRID, BLOCK, (CaiOnly(x, stream=producer.handle), y, np.int32(N)), stream=consumer)
    np.testing.assert_array_equal(y.get(stream=consumer), 2 * WANT)


def test_dlpack_export_is_asked_for_the_consumer_stream():
    producer, consumer = kspec.Stream(non_blocking=True), kspec.Stream(non_blocking=True)
    x = DLOnly(_slowly_filled(producer))  # kspec's own __dlpack__ orders its stream before the one asked for
    a = kspec.asarray(x, stream=consumer)
    np.testing.assert_array_equal(a.get(stream=consumer), WANT)
    y = kspec.zeros(N, np.float32, stream=consumer)
    kspec.RawKernel(SOURCE, "twice")(GRID, BLOCK, (x, y, np.int32(N)), stream=consumer)
    np.testing.assert_array_equal(y.get(stream=consumer), 2 * WANT)
    assert x.streams == [consumer.handle, consumer.handle]


@pytest.mark.parametrize("wrap", [CaiOnly, DLOnly])
def test_elementwise_and_reduction_kernels_take_protocol_only_arrays(wrap):
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = wrap(kspec.asarray(host))
    y = kspec.ElementwiseKernel("T x", "T y", "y = x * 2", f"twice_{wrap.__name__}")(x)
    total = kspec.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", f"sum_{wrap.__name__}")(x, axis=1)
    # neither JAX nor Numba: kspec's arrays, but where CuPy is imported a CuPy-style kernel answers a
    # __cuda_array_interface__ object as CuPy does, with cupy.ndarrays (CuPy takes no DLPack-only object)
    as_cupy = wrap is CaiOnly and "cupy" in sys.modules
    for out in (y, total):
        assert type(out).__module__.startswith("cupy") if as_cupy else isinstance(out, kspec.DeviceArray)
    np.testing.assert_array_equal(y.get(), 2 * host)
    np.testing.assert_array_equal(total.get(), host.sum(axis=1))


def test_a_cai_only_object_gives_cupy_arrays_where_cupy_is_imported():
    cupy = pytest.importorskip("cupy")
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    stream = cupy.cuda.Stream()
    with stream:  # CuPy's current stream, as CuPy's own test of the protocol enters it
        x = CaiOnly(kspec.asarray(host), stream=stream.ptr)
        y = kspec.ElementwiseKernel("T x", "T y", "y = x * 2", "twice_as_cupy")(x)
        total = kspec.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "sum_as_cupy")(x, axis=1)
    assert isinstance(y, cupy.ndarray) and isinstance(total, cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(y), 2 * host)
    np.testing.assert_array_equal(cupy.asnumpy(total), host.sum(axis=1))


def test_the_view_keeps_a_dlpack_producer_alive():
    host = np.arange(100, dtype=np.float32)
    before = _dlpack.exported_count()
    base = kspec.asarray(host)
    a = kspec.asarray(DLOnly(base))
    assert a.ptr == base.ptr and _dlpack.exported_count() == before + 1
    del base
    gc.collect()
    np.testing.assert_array_equal(a.get(), host)  # a -> cuda.core's view -> the capsule -> base's memory
    del a
    gc.collect()
    assert _dlpack.exported_count() == before  # the view called the capsule's deleter


def test_bfloat16_through_dlpack():
    torch = pytest.importorskip("torch")
    pytest.importorskip("ml_dtypes")
    t = torch.arange(8, dtype=torch.bfloat16, device="cuda")
    info = array_info(DLOnly(t))
    assert info.dtype.name == "bfloat16" and info.ptr == t.data_ptr() and info.strides == (2,)


def test_pointers_the_driver_cannot_place():
    class Bogus:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (16, False), "version": 3}

    with pytest.raises(kspec.KspecValueError, match="^0x10 is not a CUDA device pointer"):
        array_info(Bogus())

    class Empty:  # NULL: cuda.core asks the current context, which a new thread has not got yet
        __cuda_array_interface__ = {"shape": (0,), "typestr": "<f4", "data": (0, False), "version": 3}

    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(array_info(Empty())))
    thread.start()
    thread.join()
    assert [(i.ptr, i.shape, i.device_id) for i in result] == [(0, (0,), 0)]
