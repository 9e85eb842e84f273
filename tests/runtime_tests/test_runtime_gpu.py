"""The runtime on a GPU: devices, streams, kspec's DeviceArray and its exchange with CuPy and PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import kspec
from kspec.runtime import allocate_like, allocator_like, array_info, get_pool, library_of

pytestmark = pytest.mark.gpu

rng = np.random.default_rng(11)


def test_device_properties():
    dev = kspec.get_device()
    assert dev is kspec.Device(dev.id)
    major, minor = dev.compute_capability
    assert dev.arch == f"sm_{major}{minor}" and major >= 7
    assert dev.multiprocessor_count > 0 and dev.name
    with kspec.Device(0) as d:
        assert kspec.get_device() is d


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.uint16, np.complex64, np.bool_])
def test_round_trip(dtype):
    host = (rng.standard_normal((3, 5, 7)) * 10).astype(dtype)
    a = kspec.asarray(host)
    assert a.shape == host.shape and a.dtype == host.dtype and a.strides == host.strides
    np.testing.assert_array_equal(a.get(), host)


def test_empty_zeros_set_reshape_copy():
    z = kspec.zeros((4, 6), np.float32)
    np.testing.assert_array_equal(z.get(), np.zeros((4, 6), np.float32))
    host = rng.standard_normal((4, 6)).astype(np.float32)
    e = kspec.empty((4, 6), np.float32)
    e.set(host)
    np.testing.assert_array_equal(e.get(), host)
    np.testing.assert_array_equal(e.reshape(-1, 3).get(), host.reshape(-1, 3))
    c = e.copy()
    assert c.ptr != e.ptr
    np.testing.assert_array_equal(c.get(), host)
    assert kspec.empty(0).get().shape == (0,)
    with pytest.raises(TypeError, match=r"\.get\(\)"):
        np.asarray(e)
    t = e.T  # a strided view: read back through its strides, exported with them
    assert t.ptr == e.ptr and t.shape == (6, 4) and t.__cuda_array_interface__["strides"] == (4, 24)
    np.testing.assert_array_equal(t.get(), host.T)


def test_memory_is_pooled_and_returned():
    pool = get_pool(0)
    before = pool.used_bytes
    a = kspec.empty(1 << 20, np.uint8)
    assert pool.used_bytes >= before + (1 << 20)
    del a
    kspec.get_device().synchronize()
    assert pool.used_bytes == before
    assert pool.reserved_bytes >= 1 << 20  # kept for the next allocation


def test_cupy_takes_a_device_array_without_a_copy():
    cupy = pytest.importorskip("cupy")
    host = rng.standard_normal(100).astype(np.float32)
    a = kspec.asarray(host)
    c = cupy.asarray(a)
    assert c.data.ptr == a.ptr
    np.testing.assert_array_equal(cupy.asnumpy(c), host)
    c *= 2
    np.testing.assert_array_equal(a.get(), 2 * host)


def test_torch_takes_a_device_array_through_dlpack_without_a_copy():
    torch = pytest.importorskip("torch")
    from kspec.runtime import _dlpack

    host = rng.standard_normal((10, 3)).astype(np.float32)
    a = kspec.asarray(host)
    t = torch.from_dlpack(a)
    assert t.data_ptr() == a.ptr and tuple(t.shape) == (10, 3) and t.device.type == "cuda"
    np.testing.assert_array_equal(t.cpu().numpy(), host)
    held = _dlpack.exported_count()
    assert held >= 1
    del t
    import gc

    gc.collect()
    assert _dlpack.exported_count() == held - 1  # torch called the deleter


def test_asarray_wraps_other_libraries_without_a_copy():
    cupy = pytest.importorskip("cupy")
    torch = pytest.importorskip("torch")
    c = cupy.arange(12, dtype=cupy.float64).reshape(3, 4)[:, ::2]  # a strided view
    a = kspec.asarray(c)
    assert a.ptr == c.data.ptr and a.strides == c.strides
    np.testing.assert_array_equal(a.get(), cupy.asnumpy(c))
    t = torch.arange(6, dtype=torch.int32, device="cuda")
    b = kspec.asarray(t)
    assert b.ptr == t.data_ptr() and b.dtype == np.int32
    with pytest.raises(ValueError, match="does not convert"):
        kspec.asarray(t, dtype=np.float32)


def test_array_info_and_library_of():
    cupy = pytest.importorskip("cupy")
    torch = pytest.importorskip("torch")
    c = cupy.zeros((2, 3), cupy.float32)
    t = torch.zeros((2, 3), dtype=torch.float64, device="cuda").t()
    k = kspec.zeros((2, 3), np.int16)
    assert library_of(c) == "cupy" and library_of(t) == "torch" and library_of(k) is None
    ci, ti, ki = array_info(c), array_info(t), array_info(k)
    assert (ci.ptr, ci.shape, ci.strides, ci.dtype) == (c.data.ptr, (2, 3), (12, 4), np.float32)
    assert (ti.ptr, ti.shape, ti.strides, ti.dtype) == (t.data_ptr(), (3, 2), (8, 24), np.float64)
    assert (ki.ptr, ki.shape, ki.dtype, ki.device_id) == (k.ptr, (2, 3), np.int16, 0)
    # DLPack-only producers (a CuPy array seen only through __dlpack__)
    class DLOnly:
        def __init__(self, x):
            self.x = x

        def __dlpack__(self, **kw):
            return self.x.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.x.__dlpack_device__()

    di = array_info(DLOnly(c))
    assert (di.ptr, di.shape, di.dtype) == (c.data.ptr, (2, 3), np.float32)


def test_allocate_like_returns_the_inputs_library():
    cupy = pytest.importorskip("cupy")
    torch = pytest.importorskip("torch")
    c = allocate_like("cupy", (2, 3), np.float32, 0)
    t = allocate_like("torch", (4,), np.complex64, 0)
    k = allocate_like(None, 5, np.int64, 0)
    assert isinstance(c, cupy.ndarray) and c.shape == (2, 3) and c.dtype == np.float32
    assert isinstance(t, torch.Tensor) and t.shape == (4,) and t.dtype == torch.complex64 and t.is_cuda
    assert isinstance(k, kspec.DeviceArray) and k.shape == (5,) and k.dtype == np.int64
    s = cupy.cuda.Stream(non_blocking=True)
    assert isinstance(allocate_like("cupy", 3, np.float32, s.ptr), cupy.ndarray)
    # allocator_like: the same arrays from a function made once (kspec.grad allocates per backward call)
    for library, kind in (("cupy", cupy.ndarray), ("torch", torch.Tensor), (None, kspec.DeviceArray)):
        made = allocator_like(library, np.float32, 0)((3, 2))
        assert isinstance(made, kind) and tuple(made.shape) == (3, 2) and str(made.dtype).endswith("float32")


def test_stream_object():
    s = kspec.Stream(non_blocking=True)
    assert s.handle != 0 and s.__cuda_stream__() == (0, s.handle) and s.ptr == s.cuda_stream == s.handle
    a = kspec.zeros(1000, np.float32, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(a.get(stream=s), np.zeros(1000, np.float32))
    other = kspec.Stream()
    other.wait_for(s)
    s.close()  # `a` was allocated on it: it stays usable and is freed in the default stream's order
    assert s.closed
    np.testing.assert_array_equal(a.get(), np.zeros(1000, np.float32))
    del a
    kspec.get_device().synchronize()
