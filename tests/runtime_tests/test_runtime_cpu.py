"""The runtime without a GPU: lazy driver loading, the no-device error, DLPack structs, streams, dims."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import kspec
from kspec.runtime import _dlpack, _driver, dim3, stream_handle, why_no_device

REPO = Path(__file__).resolve().parents[2]


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=REPO, timeout=300
    )


def test_import_and_construction_touch_no_driver():
    result = run_python(
        """
        import pickle, sys
        import kspec
        assert "cuda.bindings.driver" not in sys.modules, "import kspec loaded the driver bindings"
        k = kspec.RawKernel('extern "C" __global__ void f(float* x) {}', "f")
        m = kspec.RawModule(code='extern "C" __global__ void g() {}', name_expressions=["g"])
        m.get_function("g")
        kspec.Device(0)
        pickle.loads(pickle.dumps(k))
        assert "cuda.bindings.driver" not in sys.modules, sorted(n for n in sys.modules if "cuda" in n)
        print("clean")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "clean"


@pytest.mark.skipif(why_no_device() is None, reason="a CUDA device is present: this checks the machine without one")
def test_launch_without_a_device_raises_no_device_error():
    kernel = kspec.RawKernel('extern "C" __global__ void f(long long n) {}', "f")
    with pytest.raises(kspec.NoDeviceError, match="no CUDA device: .*Launching needs an NVIDIA GPU") as info:
        kernel((1,), (1,), (3,))
    err = info.value  # no traceback from inside the bindings attached
    assert err.__cause__ is None and (err.__context__ is None or err.__suppress_context__)
    assert "KSPEC_DEVICE=cpu" in str(err) and "kspec.use_device('cpu')" in str(err)  # where to go without a GPU
    with pytest.raises(kspec.NoDeviceError):
        kspec.zeros(3)
    assert kspec.runtime.device_count() == 0


@pytest.mark.skipif(why_no_device() is None, reason="a CUDA device is present: this checks the machine without one")
def test_numpy_arrays_on_the_gpu_device_point_to_the_cpu_device(monkeypatch):
    """A new user's first call without a GPU: NumPy arrays given to a kernel on the default (GPU) device; the error
    says how to copy them to a GPU and how to run on NumPy arrays instead."""
    monkeypatch.delenv("KSPEC_DEVICE", raising=False)
    kernel = kspec.ElementwiseKernel("float32 x", "float32 y", "y = 2 * x", "twice_first_hour")
    with kspec.use_device("cuda"):
        with pytest.raises(TypeError, match="host memory") as info:
            kernel(np.arange(3, dtype=np.float32))
    assert "KSPEC_DEVICE=cpu" in str(info.value) and "kspec.use_device('cpu')" in str(info.value)


class _FailingDriver:
    """A stand-in for cuda.bindings.driver on a broken machine."""

    def __init__(self, mode: str) -> None:
        from cuda.bindings import driver as real

        self.CUresult = real.CUresult
        self.mode = mode

    def cuInit(self, flags):
        if self.mode == "no library":
            raise RuntimeError('"cuda" is an NVIDIA driver library and can only be found via system search')
        return (self.CUresult.CUDA_ERROR_NO_DEVICE,)

    def cuDriverGetVersion(self):
        return (self.CUresult.CUDA_SUCCESS, 13000)


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("no library", r"no CUDA device: the NVIDIA driver library libcuda.so.1 could not be loaded.*system search"),
        ("no device", r"no CUDA device: the NVIDIA driver \(CUDA 13.0\) was found but cuInit failed with "
                      r"CUDA_ERROR_NO_DEVICE"),
    ],
)
def test_no_device_messages_say_what_was_looked_for(monkeypatch, mode, expected):
    import cuda.bindings

    monkeypatch.setattr(cuda.bindings, "driver", _FailingDriver(mode))
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", cuda.bindings.driver)
    monkeypatch.setattr(_driver, "_driver", None)
    monkeypatch.setattr(_driver, "_failure", None)
    kernel = kspec.RawKernel('extern "C" __global__ void f(long long n) {}', "f")
    with pytest.raises(kspec.NoDeviceError, match=expected):
        kernel(1, 1, (3,))
    with pytest.raises(kspec.NoDeviceError, match=expected):  # the same answer the second time
        kspec.empty(4)
    assert why_no_device() is not None and why_no_device().startswith("no CUDA device: ")


def test_dim3():
    assert dim3(7, "grid") == (7, 1, 1)
    assert dim3((2, 3), "grid") == (2, 3, 1)
    assert dim3([2, 3, 4], "block") == (2, 3, 4)
    assert dim3(np.int64(5), "grid") == (5, 1, 1)
    assert dim3((0,), "block") == (1, 1, 1)  # CuPy launches an extent of 0 as 1
    with pytest.raises(ValueError, match="block"):
        dim3((-1,), "block")
    with pytest.raises(TypeError, match="grid"):
        dim3((1, 2, 3, 4), "grid")
    with pytest.raises(TypeError, match="grid"):
        dim3((1.5,), "grid")


def test_stream_handles_of_every_spelling():
    class Torchish:
        cuda_stream = 11

    class Cupyish:
        ptr = 12

    class CoreStream:
        def __cuda_stream__(self):
            return (0, 13)

    assert [stream_handle(s) for s in (10, Torchish(), Cupyish(), CoreStream())] == [10, 11, 12, 13]
    assert stream_handle(kspec.Stream.from_handle(14)) == 14
    assert kspec.Stream.legacy_default().handle == 0
    with pytest.raises(TypeError, match="stream"):
        stream_handle(True)
    with pytest.raises(TypeError, match="stream"):
        stream_handle(1.5)


def test_devices_are_singletons_and_validated_without_a_driver():
    assert kspec.Device(0) is kspec.Device(0)
    assert int(kspec.Device(3)) == 3
    with pytest.raises(ValueError, match="-1, the CPU device"):
        kspec.Device(-2)
    assert kspec.Device(-1).arch == "host"  # the CPU device's ordinal, as torch's get_device() says for host tensors
    with pytest.raises(TypeError):
        kspec.Device("0")


def test_device_array_is_not_built_directly():
    with pytest.raises(TypeError, match="kspec.empty"):
        kspec.DeviceArray()


# -- DLPack structs, checked against NumPy as the other side ---------------------------------------------


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_numpy_reads_a_capsule_kspec_made(max_version):
    host = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]  # strided
    before = _dlpack.exported_count()

    class Exporter:
        def __dlpack_device__(self):
            return (_dlpack.KDL_CPU, 0)

        def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
            return _dlpack.make_capsule(
                ptr=host.ctypes.data, shape=host.shape, strides=host.strides, dtype=host.dtype, device_id=0,
                owner=host, versioned=max_version is not None and max_version[0] >= 1,
                device_type=_dlpack.KDL_CPU,
            )

    exporter = Exporter()
    view = np.from_dlpack(exporter) if max_version else np.from_dlpack(_LegacyOnly(exporter))
    np.testing.assert_array_equal(view, host)
    assert view.ctypes.data == host.ctypes.data  # no copy
    assert _dlpack.exported_count() == before + 1
    del view
    assert _dlpack.exported_count() == before  # NumPy called the deleter


class _LegacyOnly:
    """Hides max_version so NumPy gets the unversioned 'dltensor' capsule."""

    def __init__(self, inner):
        self.inner = inner

    def __dlpack_device__(self):
        return self.inner.__dlpack_device__()

    def __dlpack__(self, stream=None, **_ignored):
        return self.inner.__dlpack__(stream=stream)


def test_unconsumed_capsule_releases_what_it_holds():
    before = _dlpack.exported_count()
    capsule = _dlpack.make_capsule(
        ptr=0x1000, shape=(4,), strides=(8,), dtype=np.dtype(np.float64), device_id=0, owner=None, versioned=False
    )
    assert _dlpack.exported_count() == before + 1
    del capsule
    assert _dlpack.exported_count() == before


@pytest.mark.parametrize("versioned", [False, True])
def test_reading_numpys_capsules(versioned):
    # other producers' capsules are read by cuda.core's StridedMemoryView (kspec/runtime/_generic.py); NumPy's
    # host capsules check the reading itself (array_info refuses host memory before it reads anything)
    from kspec.runtime import _generic

    host = np.arange(24, dtype=np.int16).reshape(2, 3, 4).transpose(2, 0, 1)
    view = _generic.dlpack_view(host if versioned else _LegacyOnly(host), -1)
    ptr, shape, strides, dtype = _generic.layout(view, dlpack=True)
    assert ptr == host.ctypes.data
    assert shape == host.shape and strides == host.strides and dtype == host.dtype
    assert view.device_id == -1  # cuda.core's spelling of host memory


def test_host_arrays_are_refused_with_a_hint():
    from kspec.runtime import array_info

    with pytest.raises(TypeError, match=r"x: a numpy.ndarray lives in host memory.*kspec.asarray"):
        array_info(np.zeros(3), param="x")
    with pytest.raises(TypeError, match="expected a device array"):
        array_info("text", param="x")
