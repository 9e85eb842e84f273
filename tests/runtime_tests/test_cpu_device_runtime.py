"""The CPU device's switch, arrays, driver, compiler path and prebuilt host modules (no GPU needed).

Kernel results on the CPU device are tested by the kernel tests themselves (fixture ``xp``); this file tests
what lies under them: ``kspec.use_device`` / ``KSPEC_DEVICE``, ``Device(-1)``, kspec arrays in host memory, the
host driver's refusals, the cache key of host builds, ``kspec build --arch host`` and loading its output.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kspec
from helpers.child_env import child_env
from helpers.device_arrays import host_compiler_missing

ROOT = Path(__file__).resolve().parents[2]
needs_compiler = pytest.mark.skipif(host_compiler_missing() is not None, reason=str(host_compiler_missing()))


def test_use_device_switches_and_restores():
    before = kspec.device_kind()
    with kspec.use_device("cpu") as choice:
        assert repr(choice) == "kspec.use_device('cpu')"
        assert kspec.device_kind() == "cpu"
        assert kspec.get_device().id == -1 and kspec.get_device().arch == "host"
        with kspec.use_device("cuda"):
            assert kspec.device_kind() == "cuda"
        assert kspec.device_kind() == "cpu"
    assert kspec.device_kind() == before


@pytest.mark.parametrize("bad", ["tpu", "cpu0"])
def test_use_device_names_the_parameter(bad):
    with pytest.raises(ValueError, match="device: expected 'cpu' or 'cuda'"):
        kspec.use_device(bad)
    with pytest.raises(TypeError, match="device: expected 'cpu' or 'cuda'"):
        kspec.use_device(0)  # type: ignore[arg-type]


def test_environment_variable_selects_the_cpu_device_and_bad_values_say_so():
    code = "import kspec; print(kspec.device_kind(), kspec.get_device().name.split(' (')[0])"
    env = child_env(KSPEC_DEVICE="cpu")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["cpu", "CPU"]
    env["KSPEC_DEVICE"] = "quantum"
    bad = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert bad.returncode != 0 and "KSPEC_DEVICE: expected 'cpu' or 'cuda'" in bad.stderr


def test_host_arrays_are_kspec_arrays_in_host_memory():
    with kspec.use_device("cpu"):
        host = np.arange(12, dtype=np.float32).reshape(3, 4)
        a = kspec.asarray(host)
        assert a.device.id == -1 if hasattr(a, "device") else True
        assert np.array_equal(a.get(), host)
        view = np.asarray(a)  # zero-copy through __array_interface__
        view[0, 0] = 42
        assert a.get()[0, 0] == 42
        assert np.array_equal(kspec.zeros((2, 3), np.int64).get(), np.zeros((2, 3), np.int64))
        copied = a.copy()
        assert np.array_equal(copied.get(), a.get())
        assert a.__dlpack_device__() == (1, 0)  # kDLCPU
        assert np.from_dlpack(a).tolist() == a.get().tolist()  # the capsule says kDLCPU too (it said kDLCUDA, -1)
        with pytest.raises(AttributeError, match="CPU device"):
            a.__cuda_array_interface__  # noqa: B018  (the property is the test)


def test_transposed_views_share_memory_and_feed_kernels(needs_host_compiler):
    # DeviceArray.transpose / .T: views with permuted shape and strides (NumPy's rules), no copy; a kernel
    # reads them through their strides
    with kspec.use_device("cpu"):
        host = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        a = kspec.asarray(host)
        for axes in [(), (None,), ((1, 0, 2),), (2, 0, 1), (-1, 0, 1)]:
            view = a.transpose(*axes)
            assert view.base is a and view.ptr == a.ptr
            np.testing.assert_array_equal(view.get(), host.transpose(*axes))
        assert a.T.shape == (4, 3, 2) and not a.T.is_c_contiguous and a.T.T.is_c_contiguous
        twice = kspec.ElementwiseKernel("T x", "T y", "y = x * 2", "cpu_twice_of_a_view")
        np.testing.assert_array_equal(twice(a.T).get(), host.T * 2)
        for bad in [(0, 0, 1), (0, 1), (0, 1, 3)]:
            with pytest.raises(ValueError, match="axes: expected a permutation of the 3 axes"):
                a.transpose(*bad)
        with pytest.raises(TypeError, match="axes: expected ints"):
            a.transpose("x")


def test_zero_dimensional_host_data_stays_zero_dimensional():
    """kspec.asarray / set of a 0-d array or a scalar keep shape () (NumPy's ascontiguousarray makes it (1,),
    which a full reduction's given output then failed with "output y has shape (1,)")."""
    with kspec.use_device("cpu"):
        for obj in (np.zeros((), np.float64), np.float32(2.5), 7):
            a = kspec.asarray(obj)
            assert a.shape == () and a.get().shape == ()
        a = kspec.zeros((), np.float64)
        a.set(np.float64(4.0))
        assert a.get() == 4.0 and a.get().shape == ()


def test_a_read_only_output_is_refused_and_left_unwritten():
    """A NumPy array marked read-only is refused as an output (kspec wrote into it before), and read as an input."""
    kernel = kspec.ElementwiseKernel("T x, T y", "T z", "z = x + y", "read_only_out")
    with kspec.use_device("cpu"):
        x = np.arange(4.0)
        x.flags.writeable = False
        out = np.zeros(4)
        out.flags.writeable = False
        with pytest.raises(kspec.KspecTypeError, match="output z is read-only"):
            kernel(x, x, out)
        assert not out.any()
        np.testing.assert_array_equal(kernel(x, x), 2 * x)


def test_numpy_arrays_are_refused_off_the_cpu_device():
    k = kspec.ElementwiseKernel("float32 x", "float32 y", "y = x", "copy_refused")
    with pytest.raises(TypeError, match="host memory"):
        with kspec.use_device("cuda"):
            k(np.ones(3, np.float32))


def test_the_host_driver_refuses_gpu_machine_code_and_textures():
    from kspec.runtime.host import HostDriver

    driver = HostDriver()
    cubin = b"\x7fELF" + bytes(14) + (190).to_bytes(2, "little") + bytes(40)
    with pytest.raises(kspec.HostUnsupportedError, match="cannot load a CUBIN"):
        driver.cuModuleLoadData(cubin)
    with pytest.raises(kspec.HostUnsupportedError, match="cuTexObjectCreate"):
        driver.cuTexObjectCreate(None, None, None)


def test_host_builds_have_their_own_cache_key(monkeypatch):
    from kspec.compiler import CompileOptions, cache_key

    source = 'extern "C" __global__ void k(float* x) { x[0] = 1; }'
    monkeypatch.setenv("KSPEC_HOST_CXX", sys.executable)  # any executable: the key names it, nothing runs
    from kspec.compiler.host import _compiler as _host

    _host.host_compiler.cache_clear()
    try:
        with_python = cache_key(source, options=CompileOptions(arch="host"))
        monkeypatch.setenv("KSPEC_HOST_CXX", "sh")
        _host.host_compiler.cache_clear()
        with_sh = cache_key(source, options=CompileOptions(arch="host"))
    finally:
        _host.host_compiler.cache_clear()
    assert with_python != with_sh  # the compiler is part of the key


def test_a_missing_host_compiler_is_a_clear_error(monkeypatch):
    from kspec.compiler.host import _compiler as _host

    monkeypatch.setenv("KSPEC_HOST_CXX", "/nonexistent/c++")
    _host.host_compiler.cache_clear()
    try:
        with pytest.raises(kspec.HostCompilerNotFoundError, match="KSPEC_HOST_CXX"):
            _host.host_compiler()
    finally:
        _host.host_compiler.cache_clear()


@needs_compiler
def test_build_for_host_and_load_without_compiling(tmp_path):
    out = tmp_path / "kernels"
    env = child_env(KSPEC_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-m", "kspec", "build", str(ROOT / "specs" / "elementwise.toml"), "-o", str(out),
                           "--arch", "host"], env=env, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "host" in (out / "manifest.json").read_text()
    # A fresh process with no compiler at all serves the prebuilt host modules.
    code = (
        "import numpy as np, kspec\n"
        f"lib = kspec.load({str(ROOT / 'specs' / 'elementwise.toml')!r}, binaries={str(out)!r})\n"
        "x = np.arange(8, dtype=np.float32)\n"
        "print(lib.squared_diff_generic(x, x[::-1]).tolist())\n"
    )
    env.update(KSPEC_DEVICE="cpu", KSPEC_HOST_CXX="/nonexistent/c++", KSPEC_CACHE_DIR=str(tmp_path / "empty"))
    served = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert served.returncode == 0, served.stderr
    x = np.arange(8, dtype=np.float32)
    assert eval(served.stdout) == ((x - x[::-1]) ** 2).tolist()


@needs_compiler
def test_compile_errors_carry_the_host_compilers_log():
    with kspec.use_device("cpu"):
        k = kspec.RawKernel('extern "C" __global__ void broken(float* x) { x[0] = undefined_name; }', "broken")
        with pytest.raises(kspec.CompileError, match="undefined_name"):
            k((1,), (1,), (np.zeros(1, np.float32),))


def test_dlpack_export_survives_another_librarys_capsule_argtypes():
    """jax.ffi.pycapsule sets ctypes.pythonapi.PyCapsule_New's argtypes for the whole process (a CFUNCTYPE
    destructor); kspec's DLPack export must not depend on that shared object (on the GPU, every DLPack
    export failed after a kspec.jax call: ctypes.ArgumentError)."""
    reason = host_compiler_missing()
    if reason is not None:
        pytest.skip(reason)
    script = (
        "import ctypes, numpy as np, kspec\n"
        "with kspec.use_device('cpu'):\n"
        "    a = kspec.asarray(np.arange(6, dtype=np.float32))\n"
        "    a.__dlpack__()\n"  # kspec's DLPack export is set up
        "    new = ctypes.pythonapi.PyCapsule_New\n"  # then another library declares the shared function
        "    new.restype = ctypes.py_object\n"
        "    new.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.CFUNCTYPE(None, ctypes.py_object))\n"
        "    print(repr(a.__dlpack__()).split()[:3])\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=child_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['<capsule', 'object', '\"dltensor\"']"


@pytest.mark.parametrize(("shape", "axis", "dtype"), [((8, 4096), 0, "float32"), ((3, 50, 64), 0, "float64"),
                                                      ((40, 1 << 16), 0, "float16"), ((4, 40, 1 << 14), 1, "float16")])
def test_short_and_narrow_reduced_rows_on_the_cpu_device(needs_host_compiler, shape, axis, dtype):
    """The plans of one short reduced dim (the runtime-rank cols entry, a warp per tile on the GPU) and of float16
    over one dim (the dim as (R, 1) with stride 0 outside it) give NumPy's results on the CPU device, which takes
    the same plans."""
    import kspec

    k = kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "cpu_short_rows")
    a = np.random.default_rng(3).standard_normal(shape).astype(dtype)
    with kspec.use_device("cpu"):
        got = k(a, axis=axis)
    want = np.sqrt((a.astype(np.float64) ** 2).sum(axis=axis))
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=1e-2 if dtype == "float16" else 1e-6)
