"""RawKernel and RawModule on both devices: CuPy's documented examples with the device's own arrays (NumPy on
kspec's CPU device, CuPy and PyTorch tensors on a GPU) and kspec arrays, plus what CuPy's surface promises
(name expressions, globals, big dynamic shared memory, pickling). GPU-only: cooperative launches, attributes,
streams, PyTorch tensors, binaries (cubin, PTX, fatbin) loaded from files."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import kspec
from helpers.device_arrays import HostArrays
from kspec.spec import load_library

REPO = Path(__file__).resolve().parents[2]


class Lib:
    """One array library on the device under test, seen through the few operations the tests need: the
    device's own arrays ("device": NumPy on the CPU device, CuPy on a GPU), PyTorch tensors, kspec arrays."""

    def __init__(self, name: str, xp) -> None:
        self.name = name
        self.xp = xp
        if name == "torch":
            self.mod = pytest.importorskip("torch")
            if not self.mod.cuda.is_available():
                pytest.skip("PyTorch has no CUDA here")

    def asarray(self, host: np.ndarray):
        if self.name == "device":
            return self.xp.asarray(host)
        if self.name == "torch":
            return self.mod.as_tensor(host, device="cuda")
        return kspec.asarray(host)

    def zeros(self, shape, dtype):
        return self.asarray(np.zeros(shape, dtype))

    def get(self, a) -> np.ndarray:
        if self.name == "device":
            return self.xp.asnumpy(a)
        if self.name == "torch":
            return a.cpu().numpy()
        return a.get()

    def sync(self) -> None:
        kspec.get_device().synchronize()


GPU_LIBS = [pytest.param("cuda", name, id=f"cuda-{name}", marks=pytest.mark.gpu) for name in ("device", "torch", "kspec")]
# (device, library) pairs: PyTorch tensors only on a GPU (its interop is GPU-only)
ALL_LIBS = pytest.mark.parametrize(
    ("xp", "lib"), [pytest.param("cpu", name, id=f"cpu-{name}") for name in ("device", "kspec")] + GPU_LIBS,
    indirect=True,
)
ONLY_GPU_LIBS = pytest.mark.parametrize(("xp", "lib"), GPU_LIBS, indirect=True)


@pytest.fixture
def lib(request, xp) -> Lib:
    return Lib(request.param, xp)


def on_gpu(xp) -> bool:
    return not isinstance(xp, HostArrays)


rng = np.random.default_rng(7)


# -- the seed examples -----------------------------------------------------------------------------------

# The seed example, verbatim, from the repository's kernel library (its one copy).
ADD = load_library(Path(__file__).resolve().parents[2] / "specs")["my_add"].source


@ALL_LIBS
def test_my_add(lib):
    add_kernel = kspec.RawKernel(ADD, "my_add")
    h1 = np.arange(25, dtype=np.float32).reshape(5, 5)
    h2 = rng.standard_normal((5, 5)).astype(np.float32)
    x1, x2 = lib.asarray(h1), lib.asarray(h2)
    y = lib.asarray(np.full((5, 5), np.nan, np.float32))
    add_kernel((5,), (5,), (x1, x2, y))
    lib.sync()
    np.testing.assert_array_equal(lib.get(y), h1 + h2)


@ALL_LIBS
def test_complex_my_func_with_cupy_complex_header(lib):
    complex_kernel = kspec.RawKernel(
        r"""
#include <cupy/complex.cuh>
extern "C" __global__
void my_func(const complex<float>* x1, const complex<float>* x2,
             complex<float>* y, float a) {
    int tid = blockDim.x * blockIdx.x + threadIdx.x;
    y[tid] = x1[tid] + a * x2[tid];
}
""",
        "my_func",
    )
    h1 = np.arange(25, dtype=np.complex64).reshape(5, 5)
    h2 = (1j * np.arange(25, dtype=np.complex64)).reshape(5, 5) + rng.standard_normal((5, 5)).astype(np.float32)
    x1, x2, y = lib.asarray(h1), lib.asarray(h2), lib.zeros((5, 5), np.complex64)
    complex_kernel((5,), (5,), (x1, x2, y, np.float32(2.0)))
    lib.sync()
    np.testing.assert_allclose(lib.get(y), h1 + 2 * h2, rtol=1e-6)


@ALL_LIBS
def test_vector_add_tutorial(lib):
    vector_add = kspec.RawKernel(
        r"""
extern "C" __global__
void vector_add(const double* a, const double* b, double* c, int n) {
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid < n) {
        c[tid] = a[tid] + b[tid];
    }
}
""",
        "vector_add",
    )
    n = 1_000_003
    ha, hb = rng.standard_normal(n), rng.standard_normal(n)
    a, b, c = lib.asarray(ha), lib.asarray(hb), lib.asarray(np.full(n, np.nan))
    threads = 256
    vector_add(((n + threads - 1) // threads,), (threads,), (a, b, c, n))  # n: a Python int for `int n`
    lib.sync()
    np.testing.assert_array_equal(lib.get(c), ha + hb)


SUM_MUL = r"""
extern "C"{
__global__ void test_sum(const float* x1, const float* x2, float* y, \
                         unsigned int N)
{
    unsigned int tid = blockDim.x * blockIdx.x + threadIdx.x;
    if (tid < N)
    {
        y[tid] = x1[tid] + x2[tid];
    }
}
__global__ void test_multiply(const float* x1, const float* x2, float* y, \
                              unsigned int N)
{
    unsigned int tid = blockDim.x * blockIdx.x + threadIdx.x;
    if (tid < N)
    {
        y[tid] = x1[tid] * x2[tid];
    }
}
}"""


@ALL_LIBS
def test_module_sum_and_multiply(lib):
    module = kspec.RawModule(code=SUM_MUL)
    ker_sum = module.get_function("test_sum")
    ker_times = module.get_function("test_multiply")
    N = 10
    h1 = np.arange(N**2, dtype=np.float32).reshape(N, N)
    h2 = rng.standard_normal((N, N)).astype(np.float32)
    x1, x2, y = lib.asarray(h1), lib.asarray(h2), lib.zeros((N, N), np.float32)
    ker_sum((N,), (N,), (x1, x2, y, N**2))
    lib.sync()
    np.testing.assert_allclose(lib.get(y), h1 + h2)
    ker_times((N,), (N,), (x1, x2, y, N**2))
    lib.sync()
    np.testing.assert_allclose(lib.get(y), h1 * h2)


FX3 = r"""
template<typename T>
__global__ void fx3(T* arr, int N) {
    unsigned int tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid < N) {
        arr[tid] = arr[tid] * 3;
    }
}
"""


@ALL_LIBS
def test_template_name_expressions(lib):
    name_exp = ["fx3<float>", "fx3<double>"]
    mod = kspec.RawModule(code=FX3, options=("-std=c++11",), name_expressions=name_exp)
    N = 10
    for expression, dtype in zip(name_exp, (np.float32, np.float64)):
        kernel = mod.get_function(expression)
        host = rng.standard_normal(N).astype(dtype)
        expected = host * 3  # before the launch: on the CPU device kspec.asarray(host) is host's own memory
        a = lib.asarray(host)
        kernel((1,), (N,), (a, N))
        lib.sync()
        np.testing.assert_allclose(lib.get(a), expected, rtol=1e-6)


def test_template_not_listed_is_explained(xp):
    mod = kspec.RawModule(code=FX3, name_expressions=["fx3<float>"])
    kernel = mod.get_function("fx3<int>")
    with pytest.raises(ValueError, match="name_expressions"):
        kernel((1,), (1,), (kspec.zeros(1, np.int32), 1))


def test_unknown_name_lists_the_module_kernels(xp):
    kernel = kspec.RawModule(code=SUM_MUL).get_function("test_add")
    with pytest.raises(ValueError, match=r"'test_add' is not in .*test_multiply, test_sum"):
        kernel((1,), (1,), ())


@pytest.mark.gpu
def test_attributes():
    add_kernel = kspec.RawKernel(ADD, "my_add")
    attrs = add_kernel.attributes
    assert set(attrs) == {
        "max_threads_per_block", "shared_size_bytes", "const_size_bytes", "local_size_bytes", "num_regs",
        "ptx_version", "binary_version", "cache_mode_ca", "max_dynamic_shared_size_bytes",
        "preferred_shared_memory_carveout",
    }
    major, minor = kspec.get_device().compute_capability
    assert attrs["binary_version"] == 10 * major + minor
    assert attrs["max_threads_per_block"] >= 256 and attrs["num_regs"] > 0
    assert attrs["max_dynamic_shared_size_bytes"] == 48 * 1024
    assert add_kernel.num_regs == attrs["num_regs"]
    add_kernel.max_dynamic_shared_size_bytes = 50000
    assert add_kernel.max_dynamic_shared_size_bytes == 50000
    add_kernel.preferred_shared_memory_carveout = 50
    assert add_kernel.preferred_shared_memory_carveout == 50


BIG_SHARED = r"""
extern "C" __global__ void reverse_block(const float* x, float* y, int n) {
    extern __shared__ float tile[];
    int i = threadIdx.x;
    for (int j = i; j < n; j += blockDim.x) tile[j] = x[j];
    __syncthreads();
    for (int j = i; j < n; j += blockDim.x) y[j] = tile[n - 1 - j];
}
"""


@pytest.mark.parametrize(
    "xp",
    [pytest.param("cpu", id="cpu"),
     pytest.param("cuda", id="cuda", marks=pytest.mark.gpu)],
    indirect=True,
)
def test_more_than_48k_dynamic_shared_memory_needs_the_attribute(xp):
    kernel = kspec.RawKernel(BIG_SHARED, "reverse_block")
    n = 25_000  # 100 000 bytes of shared memory
    x, y = xp.asarray(rng.standard_normal(n).astype(np.float32)), xp.zeros(n, np.float32)
    with pytest.raises(kspec.LaunchError, match="max_dynamic_shared_size_bytes"):
        kernel((1,), (256,), (x, y, n), shared_mem=n * 4)


@ALL_LIBS
def test_more_than_48k_dynamic_shared_memory(lib):
    kernel = kspec.RawKernel(BIG_SHARED, "reverse_block")
    n = 25_000  # 100 000 bytes of shared memory
    host = rng.standard_normal(n).astype(np.float32)
    x, y = lib.asarray(host), lib.zeros(n, np.float32)
    kernel.max_dynamic_shared_size_bytes = n * 4
    kernel((1,), (256,), (x, y, n), shared_mem=n * 4)
    lib.sync()
    np.testing.assert_array_equal(lib.get(y), host[::-1])


GLOBALS = r"""
__constant__ float coef[4];
__device__ int calls;
extern "C" __global__ void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { y[i] = x[i] * coef[i % 4]; atomicAdd(&calls, 1); }
}
"""


@ALL_LIBS
def test_constant_and_device_memory_through_get_global(lib):
    mod = kspec.RawModule(code=GLOBALS)
    coef = mod.get_global("coef")
    assert coef.size == 16
    weights = np.array([1.5, -2.0, 0.25, 4.0], np.float32)
    coef.as_array(np.float32).set(weights)
    calls = mod.get_global("calls").as_array(np.int32)
    calls.set(np.zeros(1, np.int32))
    n = 1000
    host = rng.standard_normal(n).astype(np.float32)
    x, y = lib.asarray(host), lib.zeros(n, np.float32)
    mod.get_function("scale")((4,), (256,), (x, y, n))
    lib.sync()
    np.testing.assert_allclose(lib.get(y), host * np.tile(weights, n // 4), rtol=1e-6)
    assert calls.get()[0] == n
    with pytest.raises(ValueError, match="nothere"):
        mod.get_global("nothere")


@pytest.mark.gpu
def test_global_as_a_cupy_array():
    cupy = pytest.importorskip("cupy")
    mod = kspec.RawModule(code=GLOBALS)
    view = cupy.asarray(mod.get_global("coef").as_array(np.float32))
    view[...] = cupy.asarray([1, 2, 3, 4], dtype=cupy.float32)
    x = cupy.ones(8, dtype=cupy.float32)
    y = cupy.zeros(8, dtype=cupy.float32)
    mod.get_function("scale")((1,), (8,), (x, y, 8))
    np.testing.assert_array_equal(cupy.asnumpy(y), [1, 2, 3, 4, 1, 2, 3, 4])


GRID_SYNC = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void two_phase(int* partial, long long* total) {
    cg::grid_group grid = cg::this_grid();
    if (threadIdx.x == 0) partial[blockIdx.x] = blockIdx.x + 1;
    grid.sync();
    if (grid.thread_rank() == 0) {
        long long s = 0;
        for (unsigned int b = 0; b < gridDim.x; ++b) s += partial[b];
        *total = s;
    }
}
"""


@ONLY_GPU_LIBS
def test_cooperative_grid_sync(lib):
    kernel = kspec.RawKernel(GRID_SYNC, "two_phase", enable_cooperative_groups=True)
    sms = kspec.get_device().multiprocessor_count
    blocks = 2 * sms
    partial = lib.zeros(blocks, np.int32)
    total = lib.zeros(1, np.int64)
    kernel((blocks,), (128,), (partial, total))
    lib.sync()
    assert lib.get(total)[0] == blocks * (blocks + 1) // 2
    with pytest.raises(ValueError, match="cooperative launch"):
        kernel((10_000_000,), (1024,), (partial, total))


@ALL_LIBS
def test_translate_cucomplex(lib):
    kernel = kspec.RawKernel(
        r"""
#include <cuComplex.h>
extern "C" __global__ void cmul(const cuFloatComplex* a, const cuFloatComplex* b, cuFloatComplex* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = cuCaddf(cuCmulf(a[i], b[i]), make_cuFloatComplex(1.0f, 0.0f));
}
""",
        "cmul",
        translate_cucomplex=True,
    )
    n = 100
    ha = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
    hb = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
    a, b, c = lib.asarray(ha), lib.asarray(hb), lib.zeros(n, np.complex64)
    kernel((1,), (128,), (a, b, c, n))
    lib.sync()
    np.testing.assert_allclose(lib.get(c), ha * hb + 1, rtol=1e-5)


def test_cpp_linkage_kernel_by_plain_name(xp):
    kernel = kspec.RawKernel("__global__ void twice(float* x) { x[threadIdx.x] *= 2; }", "twice")
    x = kspec.asarray(np.arange(4, dtype=np.float32))
    kernel(1, 4, (x,))
    np.testing.assert_array_equal(x.get(), [0, 2, 4, 6])


def test_argument_count_checked_by_the_driver_layout(xp):
    kernel = kspec.RawKernel(ADD, "my_add")
    x = kspec.zeros(4, np.float32)
    with pytest.raises(TypeError, match="takes 3 argument"):
        kernel(1, 4, (x, x))


@pytest.mark.gpu
def test_host_tensor_is_a_type_error():
    torch = pytest.importorskip("torch")
    kernel = kspec.RawKernel(ADD, "my_add")
    x = kspec.zeros(4, np.float32)
    with pytest.raises(TypeError, match=r"args\[1\] is a PyTorch tensor on cpu"):
        kernel(1, 4, (x, torch.zeros(4), x))


# -- streams ---------------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_streams_of_every_library():
    cupy = pytest.importorskip("cupy")
    torch = pytest.importorskip("torch")
    kernel = kspec.RawKernel(ADD, "my_add")
    host = rng.standard_normal(256).astype(np.float32)
    x = kspec.asarray(host)
    for stream in (kspec.Stream(), cupy.cuda.Stream(non_blocking=True), torch.cuda.Stream(), 0):
        y = kspec.zeros(256, np.float32)
        kernel(1, 256, (x, x, y), stream=stream)
        kspec.Stream.from_handle(kspec.runtime.stream_handle(stream)).synchronize()
        np.testing.assert_array_equal(y.get(), 2 * host)


@pytest.mark.gpu
def test_default_stream_is_the_libraries_current_one():
    cupy = pytest.importorskip("cupy")
    torch = pytest.importorskip("torch")
    from kspec.runtime import default_stream_getter

    with cupy.cuda.Stream(non_blocking=True) as s:
        assert default_stream_getter("cupy")(0) == s.ptr
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        assert default_stream_getter("torch")(0) == s.cuda_stream
    assert default_stream_getter(None)(0) == 0

    # and the launch uses it: a kernel queued on CuPy's current stream is done once that stream is
    kernel = kspec.RawKernel(ADD, "my_add")
    host = rng.standard_normal(1 << 20).astype(np.float32)
    with cupy.cuda.Stream(non_blocking=True) as s:
        x = cupy.asarray(host)
        y = cupy.zeros_like(x)
        kernel(((1 << 20) // 256,), (256,), (x, x, y))
        s.synchronize()
        np.testing.assert_array_equal(y.get(stream=s), 2 * host)


# -- binaries from files ---------------------------------------------------------------------------------


@ONLY_GPU_LIBS
def test_cubin_compiled_here_loaded_from_path(lib, tmp_path):
    from kspec.compiler import CompileOptions, compile_source

    program = compile_source(ADD, name="my_add", options=CompileOptions(arch=kspec.get_device().arch))
    assert program.format == "cubin"
    path = tmp_path / "add.cubin"
    path.write_bytes(program.binary)
    kernel = kspec.RawModule(path=str(path)).get_function("my_add")
    h = rng.standard_normal(32).astype(np.float32)
    x, y = lib.asarray(h), lib.zeros(32, np.float32)
    kernel(1, 32, (x, x, y))
    lib.sync()
    np.testing.assert_array_equal(lib.get(y), 2 * h)


@pytest.mark.gpu
def test_ptx_loaded_from_path(tmp_path):
    from kspec.compiler import CompileOptions, compile_source

    major, minor = kspec.get_device().compute_capability
    program = compile_source(ADD, name="my_add", options=CompileOptions(arch=f"compute_{major}{minor}"))
    assert program.format == "ptx"
    path = tmp_path / "add.ptx"
    path.write_bytes(program.binary.rstrip(b"\0"))  # as a .ptx file on disk: text without the NUL
    kernel = kspec.RawModule(path=path).get_function("my_add")
    x, y = kspec.asarray(np.arange(8, dtype=np.float32)), kspec.zeros(8, np.float32)
    kernel(1, 8, (x, x, y))
    np.testing.assert_array_equal(y.get(), 2 * np.arange(8))


@pytest.mark.gpu
def test_fatbin_loaded_from_path(tmp_path):
    from cuda.bindings import nvfatbin

    from kspec.compiler import CompileOptions, compile_source

    try:
        nvfatbin.version()
    except Exception as exc:  # the tool that makes the fatbin is missing, not kspec's part
        pytest.skip(f"libnvfatbin is not available to build a fatbin: {exc}")
    major, minor = kspec.get_device().compute_capability
    cubin = compile_source(ADD, name="my_add", options=CompileOptions(arch=f"sm_{major}{minor}")).binary
    handle = nvfatbin.create([], 0)
    try:
        for arch in (f"{major}{minor}", f"sm_{major}{minor}"):
            try:
                nvfatbin.add_cubin(handle, cubin, len(cubin), arch, "my_add")
                break
            except Exception:
                continue
        else:
            pytest.skip("nvfatbin refused the cubin's architecture spelling")
        image = bytearray(nvfatbin.size(handle))
        nvfatbin.get(handle, image)
    finally:
        nvfatbin.destroy(handle)
    path = tmp_path / "add.fatbin"
    path.write_bytes(bytes(image))
    kernel = kspec.RawModule(path=path).get_function("my_add")
    x, y = kspec.asarray(np.arange(8, dtype=np.float32)), kspec.zeros(8, np.float32)
    kernel(1, 8, (x, x, y))
    np.testing.assert_array_equal(y.get(), 2 * np.arange(8))


def test_threads_launching_one_kernel_keep_their_own_arguments(xp):
    import threading

    kernel = kspec.RawKernel(ADD, "my_add")
    n = 1 << 16
    results: dict[int, bool] = {}

    def work(t: int) -> None:
        stream = kspec.Stream(non_blocking=True)
        x = kspec.asarray(np.full(n, t, np.float32), stream=stream)
        ys = [kspec.zeros(n, np.float32, stream=stream) for _ in range(50)]
        for y in ys:
            kernel((n // 256,), (256,), (x, x, y), stream=stream)
        stream.synchronize()
        results[t] = all((y.get(stream=stream) == 2 * t).all() for y in ys)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(1, 5)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results == {1: True, 2: True, 3: True, 4: True}


def test_compile_loads_on_the_current_device(xp):
    kernel = kspec.RawKernel(ADD, "my_add")
    kernel.compile()
    assert kernel._launcher._functions  # resolved on the device by compile(), before any call
    with pytest.raises(ValueError, match="'nope' is not in"):
        kspec.RawKernel(ADD.replace("my_add", "nope_"), "nope_").module.get_function("nope").compile()


# -- pickling --------------------------------------------------------------------------------------------


def test_pickled_kernels_run_in_another_process(xp, tmp_path):
    kernel = kspec.RawKernel(BIG_SHARED, "reverse_block")
    kernel.max_dynamic_shared_size_bytes = 80_000
    module_kernel = kspec.RawModule(code=FX3, name_expressions=["fx3<float>"]).get_function("fx3<float>")
    blob = tmp_path / "kernels.pkl"
    blob.write_bytes(pickle.dumps((kernel, module_kernel)))
    script = textwrap.dedent(
        f"""
        import pickle, numpy as np, kspec
        kernel, fx3 = pickle.loads(open({str(blob)!r}, "rb").read())
        n = 20_000
        x = kspec.asarray(np.arange(n, dtype=np.float32))
        y = kspec.zeros(n, np.float32)
        kernel((1,), (256,), (x, y, n), shared_mem=n * 4)  # 80 000 bytes: needs the pickled attribute
        assert (y.get() == np.arange(n, dtype=np.float32)[::-1]).all()
        a = kspec.asarray(np.arange(10, dtype=np.float32))
        fx3((1,), (10,), (a, 10))
        assert (a.get() == 3 * np.arange(10)).all()
        print("ok", kernel.max_dynamic_shared_size_bytes)
        """
    )
    env = dict(os.environ, KSPEC_DEVICE="cuda" if on_gpu(xp) else "cpu")  # the other process on this device
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ok", "80000"]
