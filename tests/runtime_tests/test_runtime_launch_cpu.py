"""Launch plans and argument packing, on a machine without a GPU.

A fake driver (the real ``cuda.bindings.driver`` enums and types, with the calls replaced) stands in for
libcuda: it decodes each launch's ``kernelParams`` array exactly as the driver would, from the parameter
sizes the fake kernel declares, so the bytes kspec packs are checked for real. Kernels are compiled by the
real NVRTC for sm_90.
"""

from __future__ import annotations

import struct
import threading

import numpy as np
import pytest

import kspec
from kspec.runtime import _driver
from kspec.runtime._devicearray import DeviceArray

cu_real = pytest.importorskip("cuda.bindings.driver")
R = cu_real.CUresult

from helpers import fake_device  # noqa: E402  (after the skip: it imports the bindings)
from helpers.fake_driver import fake_array  # noqa: E402

fake = fake_device.fake  # the fixture: the fake driver installed


SOURCE = r"""
extern "C" __global__ void k1(const float* x, float* y, long long n, double d) {}
"""


class CaiArray:
    def __init__(self, ptr: int, stream=None) -> None:
        self.__cuda_array_interface__ = {
            "shape": (4,), "typestr": "<f4", "data": (ptr, False), "version": 3, "strides": None, "stream": stream,
        }


def u64(b: bytes) -> int:
    return struct.unpack("<Q", b)[0]


def test_pointers_and_scalars_are_packed_as_cupy_does(fake):
    k = kspec.RawKernel(SOURCE, "k1")
    x, y = fake_array(0xA000), fake_array(0xB000)
    k((2,), (32,), (x, y, 12345, 2.5))
    (launch,) = fake.launches
    assert launch["grid"] == (2, 1, 1) and launch["block"] == (32, 1, 1)
    assert [u64(v) for v in launch["values"][:2]] == [0xA000, 0xB000]
    assert struct.unpack("<q", launch["values"][2])[0] == 12345
    assert struct.unpack("<d", launch["values"][3])[0] == 2.5
    assert launch["stream"] == 0  # kspec arrays, no stream given: the legacy default stream


def test_second_call_reuses_the_packer_with_new_values(fake):
    k = kspec.RawKernel(SOURCE, "k1")
    k(1, 1, (fake_array(0x10), fake_array(0x20), 1, 1.0))
    packers = dict(k._launcher.packers())
    k((3, 2), (4, 4, 2), (fake_array(0x30), fake_array(0x40), -7, -0.5))
    assert dict(k._launcher.packers()) == packers  # same signature, same packer
    launch = fake.launches[-1]
    assert launch["grid"] == (3, 2, 1) and launch["block"] == (4, 4, 2)
    assert [u64(v) for v in launch["values"][:2]] == [0x30, 0x40]
    assert struct.unpack("<q", launch["values"][2])[0] == -7
    assert len(fake.loaded) == 1  # loaded once, for the one device


def test_numpy_scalars_keep_their_dtype_and_none_is_null(fake):
    k = kspec.RawKernel(r'extern "C" __global__ void narrow(int a, float b, float* c) {}', "narrow")
    k(1, 1, (np.int32(-3), np.float32(1.5), None))
    values = fake.launches[-1]["values"]
    assert struct.unpack("<i", values[0])[0] == -3
    assert struct.unpack("<f", values[1])[0] == 1.5
    assert u64(values[2]) == 0


def test_python_int_fills_a_narrower_int_parameter(fake):
    # CuPy's own examples pass a Python int for `int n`: the low 4 bytes of the int64 are the value.
    k = kspec.RawKernel(r'extern "C" __global__ void narrow(int a, float b, float* c) {}', "narrow")
    k(1, 1, (100, np.float32(0), None))
    assert struct.unpack("<i", fake.launches[-1]["values"][0])[0] == 100


def test_numpy_integer_fills_a_narrower_int_parameter(fake):
    # cupyx.scipy.signal's unit_impulse passes numpy.ravel_multi_index's int64 to `const int iidx`, as CuPy allows
    k = kspec.RawKernel(r'extern "C" __global__ void narrow2(int a, short b, float* c) {}', "narrow2")
    fake.kernels["narrow2"] = (4, 2, 8)
    k(1, 1, (np.int64(-7), np.uint32(9), None))
    values = fake.launches[-1]["values"]
    assert struct.unpack("<i", values[0])[0] == -7 and struct.unpack("<h", values[1])[0] == 9
    with pytest.raises(TypeError, match=r"args\[0\] is a int16, 2 byte"):  # narrower than the parameter: refused
        k(1, 1, (np.int16(1), np.int16(1), None))


def test_complex_and_small_types(fake):
    k = kspec.RawKernel(r'extern "C" __global__ void cplx(float* a, double b, bool c, short d) {}', "cplx")
    fake.kernels["cplx"] = (8, 16, 1, 2)
    k(1, 1, (np.complex64(1 + 2j), 3 - 4j, True, np.float16(0.5)))
    values = fake.launches[-1]["values"]
    assert struct.unpack("<ff", values[0]) == (1.0, 2.0)
    assert struct.unpack("<dd", values[1]) == (3.0, -4.0)
    assert values[2] == b"\x01"
    assert struct.unpack("<e", values[3])[0] == 0.5


def test_cai_and_dlpack_objects_are_pointers(fake):
    from kspec.runtime import _dlpack

    class DL:
        def __init__(self, ptr):
            self.ptr = ptr

        def __dlpack_device__(self):
            return (_dlpack.KDL_CUDA, 0)

        def __dlpack__(self, stream=None):
            return _dlpack.make_capsule(ptr=self.ptr, shape=(4,), strides=(4,), dtype=np.dtype("f4"),
                                        device_id=0, owner=self, versioned=False)

    k = kspec.RawKernel(SOURCE, "k1")
    k(1, 1, (CaiArray(0xC000), DL(0xD000), 0, 0.0))
    assert [u64(v) for v in fake.launches[-1]["values"][:2]] == [0xC000, 0xD000]
    assert _dlpack.exported_count() == 0  # the unconsumed capsule released what it held


def test_explicit_streams_of_every_spelling(fake):
    class TorchLike:
        cuda_stream = 0x55

    class CupyLike:
        ptr = 0x66

    class Protocol:
        def __cuda_stream__(self):
            return (0, 0x77)

    k = kspec.RawKernel(SOURCE, "k1")
    args = (fake_array(1), fake_array(2), 0, 0.0)
    for stream, handle in [(0x44, 0x44), (TorchLike(), 0x55), (CupyLike(), 0x66), (Protocol(), 0x77)]:
        k(1, 1, args, stream=stream)
        assert fake.launches[-1]["stream"] == handle
    with pytest.raises(TypeError, match="stream"):
        k(1, 1, args, stream="default")


def test_wrong_argument_types_name_position_and_type(fake):
    k = kspec.RawKernel(SOURCE, "k1")
    with pytest.raises(TypeError, match=r"args\[2\] is of unsupported type builtins.str"):
        k(1, 1, (fake_array(1), fake_array(2), "3", 0.0))
    with pytest.raises(TypeError, match=r"args\[0\] is a numpy.ndarray in host memory.*kspec.asarray"):
        k(1, 1, (np.zeros(4, np.float32), fake_array(2), 3, 0.0))
    with pytest.raises(TypeError, match="args must be a tuple"):
        k(1, 1, 5)
    # A bare device array is the first argument, as it is for CuPy (whose launch iterates `args`): here the
    # kernel takes four.
    with pytest.raises(TypeError, match=r"takes 4 argument\(s\), got 1"):
        k(1, 1, fake_array(1))
    assert fake.launches == []


def test_argument_count_and_size_checked_against_the_kernel(fake):
    k = kspec.RawKernel(SOURCE, "k1")
    with pytest.raises(TypeError, match="takes 4 argument"):
        k(1, 1, (fake_array(1), fake_array(2), 3))
    k2 = kspec.RawKernel(r'extern "C" __global__ void narrow(int a, float b, float* c) {}', "narrow")
    with pytest.raises(TypeError, match=r"args\[1\] is a Python float.*numpy.float32"):
        k2(1, 1, (1, 2.0, None))
    with pytest.raises(TypeError, match=r"args\[2\] is a float32, 4 byte"):
        k2(1, 1, (1, np.float32(2), np.float32(1)))
    assert fake.launches == []


def test_int_out_of_int64_range_is_an_overflow_error(fake):
    k = kspec.RawKernel(SOURCE, "k1")
    with pytest.raises(OverflowError, match=r"args\[2\]"):
        k(1, 1, (fake_array(1), fake_array(2), 2**70, 0.0))


def test_bad_grid_and_block(fake):
    k = kspec.RawKernel(SOURCE, "k1")
    args = (fake_array(1), fake_array(2), 0, 0.0)
    with pytest.raises(ValueError, match="grid"):
        k((-1,), (1,), args)
    with pytest.raises(ValueError, match="grid"):
        k((1, -2), (1,), args)
    with pytest.raises(ValueError, match="block"):
        k((1,), (-1,), args)
    with pytest.raises(TypeError, match="grid"):
        k("1", 1, args)
    with pytest.raises(TypeError, match="block"):
        k(1, (1, 2, 3, 4), args)


def test_an_extent_of_zero_is_launched_as_one(fake):
    # CuPy launches max(1, extent): the driver's refusal of 0 is answered with that launch (the fast path pays nothing)
    k = kspec.RawKernel(SOURCE, "k1")
    args = (fake_array(1), fake_array(2), 0, 0.0)
    for grid, block in (((0,), (1,)), (0, 32), ((2, 0), (1,)), ((1,), (0, 1, 1))):
        before = sum(1 for c in fake.calls if c[0] == "launch")
        k(grid, block, args)
        assert sum(1 for c in fake.calls if c[0] == "launch") == before + 1


def test_unknown_kernel_name_lists_the_module_kernels(fake):
    mod = kspec.RawModule(code=r'extern "C" __global__ void k1(float* a, float* b, long long n, double d) {}')
    kernel = mod.get_function("nope")  # lazy: nothing compiled yet
    assert fake.loaded == []
    with pytest.raises(ValueError, match=r"kernel 'nope' is not in module.*its kernels: .*k1"):
        kernel(1, 1, ())


def test_no_current_context_is_made_current_and_retried(fake):
    k = kspec.RawKernel(SOURCE, "k1")
    args = (fake_array(1), fake_array(2), 0, 0.0)
    k(1, 1, args)
    fake.current = 0  # e.g. a fresh thread: nothing made a context current there
    fake.fail_next = [R.CUDA_ERROR_INVALID_CONTEXT]
    k(1, 1, args)
    assert fake.current == 0x1000 and len(fake.launches) == 2


def test_driver_refusal_becomes_launch_error_with_a_hint(fake):
    k = kspec.RawKernel(SOURCE, "k1")
    fake.fail_next = [R.CUDA_ERROR_INVALID_VALUE]
    with pytest.raises(kspec.LaunchError, match=r"shared_mem=100000 exceeds.*max_dynamic_shared_size_bytes"):
        k(1, 1, (fake_array(1), fake_array(2), 0, 0.0), shared_mem=100000)


def test_cooperative_grid_larger_than_coresident_is_a_value_error(fake):
    k = kspec.RawKernel(SOURCE, "k1", enable_cooperative_groups=True)
    args = (fake_array(1), fake_array(2), 0, 0.0)
    k(264, 128, args)  # 2 blocks per SM x 132 SMs
    assert fake.launches[-1]["cooperative"]
    with pytest.raises(ValueError, match="cooperative launch.*265 blocks.*at most 264"):
        k(265, 128, args)


def test_attributes_read_set_and_survive_pickling(fake):
    import pickle

    k = kspec.RawKernel(SOURCE, "k1")
    attrs = k.attributes
    assert set(attrs) == {
        "max_threads_per_block", "shared_size_bytes", "const_size_bytes", "local_size_bytes", "num_regs",
        "ptx_version", "binary_version", "cache_mode_ca", "max_dynamic_shared_size_bytes",
        "preferred_shared_memory_carveout",
    }
    assert attrs["ptx_version"] == -1  # an attribute the (fake) driver cannot report
    assert k.num_regs == 7
    k.max_dynamic_shared_size_bytes = 100_000
    assert k.max_dynamic_shared_size_bytes == 100_000
    with pytest.raises(AttributeError):
        k.num_regs = 3  # read-only, as in CuPy
    clone = pickle.loads(pickle.dumps(k))
    assert clone.name == "k1" and clone.code == SOURCE
    fake.attrs.clear()
    clone(1, 1, (fake_array(1), fake_array(2), 0, 0.0))  # resolving applies the pickled attribute
    assert clone.max_dynamic_shared_size_bytes == 100_000


def test_threads_get_their_own_parameter_buffers(fake):
    k = kspec.RawKernel(SOURCE, "k1")
    args = (fake_array(1), fake_array(2), 0, 0.0)
    k(1, 1, args)
    tables = [k._launcher.packers()]

    def other():
        k(1, 1, args)
        tables.append(k._launcher.packers())

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert tables[0] is not tables[1]
    key = tuple(map(type, args))
    assert tables[0][key] is not tables[1][key]


def test_arrays_on_different_devices_name_parameters_and_devices(fake, monkeypatch):
    monkeypatch.setattr(_driver, "_device_count", 2)
    k = kspec.RawKernel(SOURCE, "k1")
    a0 = fake_array(0x10)
    a1 = DeviceArray._wrap(0x20, (4,), np.dtype(np.float32), 1, None)
    with pytest.raises(ValueError, match=r"args\[0\] \(DeviceArray\) on device 0, args\[1\] \(DeviceArray\) on device 1"):
        k(1, 1, (a0, a1, 0, 0.0))
    assert fake.launches == []
    k(1, 1, (a0, fake_array(0x30), 0, 0.0))  # same device: launches
    assert len(fake.launches) == 1


def test_array_info_reads_the_cuda_array_interface(fake):
    from kspec.runtime import array_info

    class Strided:
        __cuda_array_interface__ = {
            "shape": (3, 2), "typestr": "<i8", "data": (0x4000, True), "version": 3, "strides": (8, 24),
        }

    info = array_info(Strided())
    assert (info.ptr, info.shape, info.strides, info.dtype, info.readonly) == (
        0x4000, (3, 2), (8, 24), np.dtype(np.int64), True
    )
    assert not info.is_c_contiguous
    assert array_info(CaiArray(0x5000)).is_c_contiguous
