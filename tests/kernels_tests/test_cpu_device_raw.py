"""Raw and jit kernels where kspec's CPU device does better than, or differently from, a GPU, through the public
API (kspec.RawKernel / RawModule / kspec.jit under kspec.use_device("cpu"), NumPy arrays):

- an index out of bounds is an exception naming the kernel, the block, the thread and the index
  (kspec.KernelIndexError, an IndexError), not silent corruption; a failed device-side assert is a
  kspec.KernelFaultError, and the process (and the next launch) carries on;
- what it cannot run (textures, inline PTX, grid-wide cooperative sync) is refused by name before anything
  runs (kspec.HostUnsupportedError, a NotImplementedError);
- block synchronisation, shared memory (static and dynamic), warp shuffles and votes, atomics from many
  blocks and 2-D/3-D grids give NumPy's results, as CUDA C++ and as kspec.jit kernels;
- module globals (RawModule.get_global) are host memory a kernel writes and the host reads back.

CPU device only; skipped without a host C++ compiler."""

from __future__ import annotations

import re
import time

import numpy
import numpy as np
import pytest

from helpers import jit_kernels
import kspec
from helpers.device_arrays import host_compiler_missing
from kspec import jit

RNG = np.random.default_rng(29)


@pytest.fixture(autouse=True)
def cpu_device():
    reason = host_compiler_missing()
    if reason is not None:
        pytest.skip(reason)
    with kspec.use_device("cpu"):
        yield


def assert_mentions(message: str, *patterns: str) -> None:
    for pattern in patterns:
        assert re.search(pattern, message), f"{pattern!r} not in the message: {message}"


def block_of(x: int, y: int = 0, z: int = 0, word: str = "block") -> str:
    """A coordinate triple after ``word``, however it is punctuated: "block (1, 0, 0)", "blockIdx=(1,0,0)"."""
    return rf"{word}\w*\W+{x}\W+{y}\W+{z}\b"


# -- out of bounds: an exception naming where ------------------------------------------------------------


@jit.rawkernel()
def read_far_past_the_end(x, y):
    i = jit.grid(1)
    if i == 37:
        y[0] = x[i + 100]  # x has 64 elements: index 137, by block 1, thread 5 (blocks of 32)
    elif i < y.size:
        y[i] = x[i]


def test_jit_index_out_of_bounds_names_kernel_block_thread_and_index():
    x, y = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    with pytest.raises(kspec.KernelIndexError) as caught:
        read_far_past_the_end[2, 32](x, y)
    assert isinstance(caught.value, IndexError) and isinstance(caught.value, kspec.KspecError)
    assert_mentions(str(caught.value), "read_far_past_the_end", block_of(1), block_of(5, word="thread"), r"\b137\b",
                    r"\b64\b")
    # the process carries on: the same kernel, in bounds, runs
    read_far_past_the_end[1, 32](x, y)
    np.testing.assert_array_equal(y[1:32], x[1:32])


def test_elementwise_raw_parameter_out_of_bounds():
    shifted = kspec.ElementwiseKernel("raw T x", "T y", "y = (i == 7) ? x[i + 20] : x[i]", "shifted_read")
    x = np.arange(10, dtype=np.float64)
    with pytest.raises(kspec.KernelIndexError) as caught:
        shifted(x, np.zeros(10))
    assert isinstance(caught.value, IndexError)
    assert_mentions(str(caught.value), "shifted_read", r"\b27\b", r"\b10\b")
    ok = kspec.ElementwiseKernel("raw T x", "T y", "y = x[9 - i]", "reversed_read")
    np.testing.assert_array_equal(ok(x, np.zeros(10)), x[::-1])


def test_elementwise_bounds_fault_names_the_element():
    shifted = kspec.ElementwiseKernel("raw T x", "T y", "y = (i == 7) ? x[i + 20] : x[i]", "shifted_read")
    with pytest.raises(kspec.KernelIndexError) as caught:
        shifted(np.arange(10, dtype=np.float64), np.zeros(10))
    assert_mentions(str(caught.value), r"(\bi|element)\W+7\b")


# -- a device-side assert or trap: a fault, and the process survives --------------------------------------


@pytest.mark.parametrize("check", ["assert(x[i] >= 0);", "if (x[i] < 0) __trap();"], ids=["assert", "trap"])
def test_device_side_fault_is_an_exception_and_the_next_launch_works(check):
    kernel = kspec.RawKernel(
        r"""
extern "C" __global__ void doubled_nonnegative(const int* x, int* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        CHECK
        y[i] = 2 * x[i];
    }
}
""".replace("CHECK", check),
        "doubled_nonnegative",
    )
    n = 1000
    x = np.arange(n, dtype=np.int32)
    x[613] = -1
    y = np.zeros(n, np.int32)
    with pytest.raises(kspec.KernelFaultError) as caught:
        kernel((4,), (256,), (x, y, np.int32(n)))
    assert not isinstance(caught.value, IndexError)
    assert_mentions(str(caught.value), "doubled_nonnegative")
    x[613] = 613
    kernel((4,), (256,), (x, y, np.int32(n)))
    np.testing.assert_array_equal(y, 2 * x)


# -- refused before anything runs ------------------------------------------------------------------------

TEXTURE = r"""
extern "C" __global__ void fetched(cudaTextureObject_t tex, float* y) {
    y[threadIdx.x] = tex1Dfetch<float>(tex, threadIdx.x);
}
"""

INLINE_PTX = r"""
extern "C" __global__ void lane_by_ptx(float* y) {
    unsigned int lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    y[threadIdx.x] = lane;
}
"""

GRID_SYNC = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void two_phase_sum(float* y) {
    cg::grid_group grid = cg::this_grid();
    y[grid.thread_rank()] = 1.0f;
    grid.sync();
    if (grid.thread_rank() == 0) y[0] = 2.0f;
}
"""


@pytest.mark.parametrize(
    ("source", "name", "construct", "args"),
    [
        (TEXTURE, "fetched", r"cudaTextureObject_t|tex1Dfetch", lambda y: (np.uint64(0), y)),
        (INLINE_PTX, "lane_by_ptx", r"asm", lambda y: (y,)),
        (GRID_SYNC, "two_phase_sum", r"this_grid|grid_group", lambda y: (y,)),
    ],
    ids=["texture", "inline-ptx", "grid-sync"],
)
def test_what_the_cpu_device_cannot_run_is_refused_by_name(source, name, construct, args):
    kernel = kspec.RawKernel(source, name, enable_cooperative_groups=name == "two_phase_sum")
    y = np.full(32, -7.0, np.float32)
    with pytest.raises(kspec.HostUnsupportedError) as caught:
        kernel((1,), (32,), args(y))
    assert isinstance(caught.value, NotImplementedError)
    assert_mentions(str(caught.value), rf"'{name}'", construct, r"line \d+", "GPU")
    np.testing.assert_array_equal(y, -7.0)  # nothing ran


def test_a_cooperative_launch_without_grid_sync_runs():
    """``enable_cooperative_groups=True`` launches through cuLaunchCooperativeKernel (CUDA's signature: no
    ``extra``); a kernel that uses no grid-wide sync runs on the CPU device as on a GPU."""
    source = r"""
    #include <cooperative_groups.h>
    extern "C" __global__ void block_ranks(float* y, int n) {
        cooperative_groups::thread_block block = cooperative_groups::this_thread_block();
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = (float)block.thread_rank();
    }
    """
    y = np.full(64, -1.0, np.float32)
    kspec.RawKernel(source, "block_ranks", enable_cooperative_groups=True)((2,), (32,), (y, np.int32(64)))
    np.testing.assert_array_equal(y, np.tile(np.arange(32, dtype=np.float32), 2))


def test_jit_grid_sync_is_refused_by_name():
    x, out = np.ones(256, np.float32), np.zeros(256, np.float32)
    with pytest.raises(kspec.HostUnsupportedError) as caught:
        jit_kernels.grid_sync[2, 128](x, out, 256)
    assert_mentions(str(caught.value), "grid_sync", r"this_grid|grid_group|grid\.sync|sync")
    np.testing.assert_array_equal(out, 0)


# -- block and warp cooperation, atomics, shared memory, grids: CUDA C++ ---------------------------------

COOPERATION = r"""
extern "C" __global__ void block_sums(const double* x, double* out, int n) {
    __shared__ double partial[256];
    int t = threadIdx.x;
    int i = blockIdx.x * blockDim.x + t;
    partial[t] = i < n ? x[i] : 0.0;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) partial[t] += partial[t + s];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = partial[0];
}

extern "C" __global__ void warp_sums(const int* x, int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = x[i];
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    if ((threadIdx.x & 31) == 0) out[i / 32] = v;
}

extern "C" __global__ void warp_votes(const int* x, unsigned int* mask, int* count) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int votes = __ballot_sync(0xffffffffu, x[i] > 0);
    if ((threadIdx.x & 31) == 0) { mask[i / 32] = votes; count[i / 32] = __popc(votes); }
}

extern "C" __global__ void histogram(const int* x, unsigned long long* bins, unsigned long long* total, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        atomicAdd(&bins[x[i]], 1ULL);
        atomicAdd(total, 1ULL);
    }
}

extern "C" __global__ void reversed_blocks(const float* x, float* y) {
    extern __shared__ float tile[];
    int t = threadIdx.x;
    int base = blockIdx.x * blockDim.x;
    tile[t] = x[base + t];
    __syncthreads();
    y[base + t] = tile[blockDim.x - 1 - t];
}

extern "C" __global__ void transpose(const float* a, float* b, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) b[c * rows + r] = a[r * cols + c];
}

extern "C" __global__ void coordinates(long long* out, int nx, int ny, int nz) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x < nx && y < ny && z < nz) out[(z * ny + y) * nx + x] = x + 100LL * y + 10000LL * z;
}
"""


@pytest.fixture(scope="module")
def cooperation():
    return kspec.RawModule(code=COOPERATION)


def test_raw_block_reduction_with_syncthreads(cooperation):
    n = 256 * 50 - 17
    x = RNG.standard_normal(n)
    out = np.zeros(50)
    cooperation.get_function("block_sums")((50,), (256,), (x, out, np.int32(n)))
    np.testing.assert_allclose(out, np.pad(x, (0, 17)).reshape(50, 256).sum(axis=1), rtol=1e-12, atol=1e-12)


def test_raw_warp_shuffle_sums(cooperation):
    x = RNG.integers(-1000, 1000, 8 * 128).astype(np.int32)
    out = np.zeros(32, np.int32)
    cooperation.get_function("warp_sums")((8,), (128,), (x, out))
    np.testing.assert_array_equal(out, x.reshape(32, 32).sum(axis=1))


def test_raw_ballot(cooperation):
    x = RNG.integers(-5, 5, 4 * 64).astype(np.int32)
    mask, count = np.zeros(8, np.uint32), np.zeros(8, np.int32)
    cooperation.get_function("warp_votes")((4,), (64,), (x, mask, count))
    votes = (x.reshape(8, 32) > 0).astype(np.uint64)
    np.testing.assert_array_equal(mask, (votes << np.arange(32, dtype=np.uint64)).sum(axis=1).astype(np.uint32))
    np.testing.assert_array_equal(count, votes.sum(axis=1))


def test_raw_atomics_from_many_blocks_count_exactly(cooperation):
    n = 1 << 20
    x = RNG.integers(0, 64, n).astype(np.int32)
    bins, total = np.zeros(64, np.uint64), np.zeros(1, np.uint64)
    cooperation.get_function("histogram")((96,), (256,), (x, bins, total, np.int32(n)))
    np.testing.assert_array_equal(bins, np.bincount(x, minlength=64))
    assert total[0] == n


def test_raw_dynamic_shared_memory(cooperation):
    x = RNG.standard_normal(16 * 128).astype(np.float32)
    y = np.zeros_like(x)
    cooperation.get_function("reversed_blocks")((16,), (128,), (x, y), shared_mem=128 * 4)
    np.testing.assert_array_equal(y, x.reshape(16, 128)[:, ::-1].ravel())


def test_raw_2d_and_3d_grids(cooperation):
    a = RNG.standard_normal((37, 53)).astype(np.float32)
    b = np.zeros((53, 37), np.float32)
    cooperation.get_function("transpose")((4, 3), (16, 16), (a, b, np.int32(37), np.int32(53)))
    np.testing.assert_array_equal(b, a.T)
    out = np.full((5, 7, 9), -1, np.int64)
    cooperation.get_function("coordinates")((2, 2, 3), (8, 4, 2), (out, np.int32(9), np.int32(7), np.int32(5)))
    z, y, x = np.indices(out.shape)
    np.testing.assert_array_equal(out, x + 100 * y + 10000 * z)


# -- the same, as kspec.jit kernels ----------------------------------------------------------------------


@jit.rawkernel()
def jit_block_sums(x, out):
    partial = jit.shared_memory(numpy.float64, 128)
    t = jit.threadIdx.x
    i = jit.blockIdx.x * jit.blockDim.x + t
    partial[t] = x[i] if i < x.size else numpy.float64(0)
    jit.syncthreads()
    s = 64
    while s > 0:
        if t < s:
            partial[t] += partial[t + s]
        jit.syncthreads()
        s //= 2
    if t == 0:
        out[jit.blockIdx.x] = partial[0]


@jit.rawkernel()
def jit_warp_sums(x, out):
    i = jit.grid(1)
    v = x[i]
    offset = 16
    while offset > 0:
        v += jit.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if jit.laneid() == 0:
        out[i // 32] = v


@jit.rawkernel()
def jit_histogram(x, bins, total):
    for i in range(jit.grid(1), x.size, jit.gridsize(1)):
        jit.atomic_add(bins, x[i], numpy.uint64(1))
        jit.atomic_add(total, 0, numpy.uint64(1))


@jit.rawkernel()
def jit_reversed_blocks(x, y):
    tile = jit.shared_memory(numpy.float32, None)
    t = jit.threadIdx.x
    base = jit.blockIdx.x * jit.blockDim.x
    tile[t] = x[base + t]
    jit.syncthreads()
    y[base + t] = tile[jit.blockDim.x - 1 - t]


@jit.rawkernel()
def jit_transpose(a, b):
    c, r = jit.grid(2)
    rows, cols = a.shape
    if r < rows and c < cols:
        b[c, r] = a[r, c]


@jit.rawkernel()
def jit_coordinates(out):
    x, y, z = jit.grid(3)
    nz, ny, nx = out.shape
    if x < nx and y < ny and z < nz:
        out[z, y, x] = x + 100 * y + 10000 * z


def test_jit_block_reduction_with_syncthreads():
    n = 128 * 40 - 5
    x = RNG.standard_normal(n)
    out = np.zeros(40)
    jit_block_sums[40, 128](x, out)
    np.testing.assert_allclose(out, np.pad(x, (0, 5)).reshape(40, 128).sum(axis=1), rtol=1e-12, atol=1e-12)


def test_jit_warp_shuffle_sums():
    x = RNG.integers(-1000, 1000, 4 * 256).astype(np.int32)
    out = np.zeros(32, np.int32)
    jit_warp_sums[4, 256](x, out)
    np.testing.assert_array_equal(out, x.reshape(32, 32).sum(axis=1))


def test_jit_atomics_from_many_blocks_count_exactly():
    n = 1 << 20
    x = RNG.integers(0, 64, n).astype(np.int32)
    bins, total = np.zeros(64, np.uint64), np.zeros(1, np.uint64)
    jit_histogram[96, 256](x, bins, total)
    np.testing.assert_array_equal(bins, np.bincount(x, minlength=64))
    assert total[0] == n


def test_jit_dynamic_shared_memory():
    x = RNG.standard_normal(16 * 128).astype(np.float32)
    y = np.zeros_like(x)
    jit_reversed_blocks[16, 128, None, 128 * 4](x, y)
    np.testing.assert_array_equal(y, x.reshape(16, 128)[:, ::-1].ravel())


def test_jit_2d_and_3d_grids():
    a = RNG.standard_normal((37, 53)).astype(np.float32)
    b = np.zeros((53, 37), np.float32)
    jit_transpose[(4, 3), (16, 16)](a, b)
    np.testing.assert_array_equal(b, a.T)
    out = np.full((5, 7, 9), -1, np.int64)
    jit_coordinates[(2, 2, 3), (8, 4, 2)](out)
    z, y, x = np.indices(out.shape)
    np.testing.assert_array_equal(out, x + 100 * y + 10000 * z)


# -- module globals and kernel lookup --------------------------------------------------------------------

GLOBALS = r"""
__device__ float table[4];
__device__ unsigned long long hits;
extern "C" __global__ void fill(float base) {
    if (threadIdx.x < 4) table[threadIdx.x] = base + threadIdx.x;
    atomicAdd(&hits, 1ULL);
}
extern "C" __global__ void read_back(float* out) {
    out[threadIdx.x] = 2 * table[threadIdx.x];
}
"""


def test_get_global_is_written_by_a_kernel_and_read_by_the_host():
    module = kspec.RawModule(code=GLOBALS)
    table = module.get_global("table")
    assert table.size == 16
    hits = module.get_global("hits").as_array(np.uint64)
    hits.set(np.zeros(1, np.uint64))
    module.get_function("fill")((3,), (8,), (np.float32(1.5),))
    np.testing.assert_array_equal(table.as_array(np.float32).get(), [1.5, 2.5, 3.5, 4.5])
    assert hits.get()[0] == 24
    table.as_array(np.float32).set(np.array([10, 20, 30, 40], np.float32))  # and the other way
    out = np.zeros(4, np.float32)
    module.get_function("read_back")((1,), (4,), (out,))
    np.testing.assert_array_equal(out, [20, 40, 60, 80])
    with pytest.raises(ValueError, match="nothere"):
        module.get_global("nothere")


def test_unknown_kernel_name_lists_the_module_kernels():
    kernel = kspec.RawModule(code=GLOBALS).get_function("fil")
    with pytest.raises(ValueError, match=r"'fil' is not in .*fill, read_back"):
        kernel((1,), (1,), (np.float32(0),))


# -- the seed's jit example, timed -----------------------------------------------------------------------


def test_seed_grid_stride_copy_warm_time():
    size = np.uint32(10**6)
    x = RNG.standard_normal(int(size)).astype(np.float32)
    y = np.empty(int(size), np.float32)
    jit_kernels.elementwise_copy[128, 1024](x, y, size)  # compiles
    assert (x == y).all()
    y[:] = 0
    start = time.perf_counter()
    jit_kernels.elementwise_copy((128,), (1024,), (x, y, size))
    warm = time.perf_counter() - start
    assert (x == y).all()
    print(f"\nseed jit grid-stride copy, 10**6 float32, grid 128 x block 1024, CPU device, warm: {warm * 1e3:.2f} ms")


def test_an_extent_of_zero_is_launched_as_one_as_cupy_does():
    kernel = kspec.RawKernel(
        r'''extern "C" __global__ void first_or_flag(const float* x, int n, int* out) {
            if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = n == 0 ? -1 : (int)x[0];
        }''',
        "first_or_flag",
    )
    for grid, block in (((0,), (64,)), (0, 64), ((0, 1, 1), (64, 1, 1)), ((1,), (0,))):
        out = np.zeros(1, np.int32)
        kernel(grid, block, (np.zeros(0, np.float32), np.int32(0), out))
        assert out[0] == -1, (grid, block)
    with pytest.raises(ValueError, match="grid"):
        kernel((-1,), (1,), (np.zeros(0, np.float32), np.int32(0), out))
