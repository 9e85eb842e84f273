"""kspec's CPU device, execution model: raw CUDA C++ and kspec.jit output compiled by kspec.compiler's host
path, loaded by kspec's host driver (tests/helpers/host_build.py) and run as a grid on the host: blocks on OS workers, threads in
turn or as fibers meeting at __syncthreads and warp operations, atomics, faults; and the source scan
(kspec/compiler/host/_scan.py). CPU only; skipped without a host C++ compiler."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

from helpers import host_build as H
import kspec
from helpers import jit_kernels as K
from kspec import jit
from kspec.compiler.host import scan_host_source

pytestmark = H.requires_host_cxx


# -- kernels without synchronisation: each thread runs to completion in turn --------------------------------

PLAIN = r"""
#include <cassert>

extern "C" __global__ void grid_copy(const float* x, float* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = x[i];
}

// one row per thread: its threadIdx, blockIdx, blockDim, gridDim (x, y, z each)
extern "C" __global__ void coordinates(unsigned* out) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  unsigned* row = out + 12 * (block * blockDim.x * blockDim.y * blockDim.z + thread);
  const unsigned values[12] = {threadIdx.x, threadIdx.y, threadIdx.z, blockIdx.x, blockIdx.y, blockIdx.z,
                               blockDim.x, blockDim.y, blockDim.z, gridDim.x, gridDim.y, gridDim.z};
  for (int k = 0; k < 12; ++k) row[k] = values[k];
}

struct counters { int i; unsigned u; unsigned long long ull; long long ll; float f; double d; int mx; int mn; unsigned inc; };

extern "C" __global__ void atomics(counters* c, int* exch_seen) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(&c->i, 1);
  atomicAdd(&c->u, 2);
  atomicAdd(&c->ull, 3ULL);
  atomicAdd(&c->ll, -1LL);
  atomicAdd(&c->f, 1.0f);
  atomicAdd(&c->d, 0.5);
  atomicMax(&c->mx, t);
  atomicMin(&c->mn, -t);
  atomicInc(&c->inc, 9u);
  const int previous = atomicExch(exch_seen, t);
  (void)previous;
  int expected = atomicCAS(exch_seen + 1, 0, 0);
  while (atomicCAS(exch_seen + 1, expected, expected + 1) != expected) expected = atomicCAS(exch_seen + 1, 0, 0) ;
}

__device__ int checked_read(const int* x, long long i, long long n) {
  if (i < 0 || i >= n) kspec_host::fault_index(i, n);
  return x[i];
}

extern "C" __global__ void read_past_end(const int* x, int* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = checked_read(x, i, n);
}

extern "C" __global__ void failing_assert(int* y, int bad) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  assert(i != bad);
  y[i] = i;
}

extern "C" __global__ void traps(int at) {
  if (int(threadIdx.x) == at) __trap();
}

extern "C" __global__ void throws_exception() { throw 42; }

extern "C" __global__ void fault_in_first_block(unsigned long long* blocks_run) {
  atomicAdd(blocks_run, 1ULL);
  if (blockIdx.x == 0) __trap();
}

// a host loop kernel (kspec's host templates): no grid; a fault names the element it was working on
kspec_host::loop_kernel loop_past_end(const int* x, int n) {
  for (long long i = 0; i <= n; ++i) {
    kspec_host::current_element() = i;
    if (i >= n) kspec_host::fault_index(i, n);
  }
  return {};
}
"""


@pytest.fixture(scope="module")
def plain() -> H.HostModule:
    kernels = [*scan_host_source(PLAIN, "plain").kernels, "loop_past_end"]
    return H.build(PLAIN, "plain", expressions=kernels)


def test_plain_module_runs_threads_in_turn(plain: H.HostModule) -> None:
    assert scan_host_source(PLAIN, "plain").uses_sync is False
    assert plain.entries() == ["grid_copy", "coordinates", "atomics", "read_past_end", "failing_assert", "traps",
                               "throws_exception", "fault_in_first_block", "loop_past_end"]


def test_grid_stride_copy_and_its_time(plain: H.HostModule) -> None:
    n = 10**6
    x = np.random.default_rng(0).random(n, dtype=np.float32)
    y = np.zeros_like(x)
    assert plain.launch("grid_copy", (128,), (1024,), [x, y, np.int32(n)]) == (0, "")
    np.testing.assert_array_equal(y, x)
    best = float("inf")
    for _ in range(3):
        y[:] = 0
        start = time.perf_counter()
        plain.launch("grid_copy", (128,), (1024,), [x, y, np.int32(n)], threads=2)
        best = min(best, time.perf_counter() - start)
    np.testing.assert_array_equal(y, x)
    print(f"\ngrid-stride copy of 10^6 float32, grid 128 x block 1024, 2 workers: {best * 1e3:.2f} ms")


@pytest.mark.parametrize(("grid", "block"), [((3,), (5,)), ((2, 3), (4, 2)), ((2, 2, 3), (3, 2, 2)), ((1, 1, 2), (1, 1, 64))])
def test_coordinates_of_2d_and_3d_grids(plain: H.HostModule, grid: tuple[int, ...], block: tuple[int, ...]) -> None:
    g = (list(grid) + [1, 1])[:3]
    b = (list(block) + [1, 1])[:3]
    total = int(np.prod(g) * np.prod(b))
    out = np.full((total, 12), 99, np.uint32)
    assert plain.launch("coordinates", grid, block, [out], threads=3) == (0, "")
    expected = [
        [tx, ty, tz, bx, by, bz, *b, *g]
        for bz in range(g[2]) for by in range(g[1]) for bx in range(g[0])
        for tz in range(b[2]) for ty in range(b[1]) for tx in range(b[0])
    ]
    np.testing.assert_array_equal(out, np.array(expected, np.uint32))


def test_atomics_from_many_threads_on_two_workers(plain: H.HostModule) -> None:
    dtype = np.dtype([("i", np.int32), ("u", np.uint32), ("ull", np.uint64), ("ll", np.int64), ("f", np.float32),
                      ("d", np.float64), ("mx", np.int32), ("mn", np.int32), ("inc", np.uint32)], align=True)
    c = np.zeros(1, dtype)
    seen = np.zeros(2, np.int32)
    blocks, threads = 64, 256
    n = blocks * threads
    assert plain.launch("atomics", (blocks,), (threads,), [c, seen], threads=2) == (0, "")
    assert c["i"][0] == n and c["u"][0] == 2 * n and c["ull"][0] == 3 * n and c["ll"][0] == -n
    assert c["f"][0] == n and c["d"][0] == n / 2  # exact: small integers and halves
    assert c["mx"][0] == n - 1 and c["mn"][0] == -(n - 1)
    assert c["inc"][0] == n % 10
    assert 0 <= seen[0] < n and seen[1] == n


def test_out_of_bounds_index_is_fault_1_naming_kernel_block_thread(plain: H.HostModule) -> None:
    x = np.arange(10, dtype=np.int32)
    y = np.zeros(16, np.int32)
    code, message = plain.launch("read_past_end", (4,), (4,), [x, y, np.int32(10)], threads=1)
    assert code == 1
    assert message == "kernel 'read_past_end': index 10 is out of bounds for size 10 (block (2, 0, 0), thread (2, 0, 0))"
    # reported once, even with several workers that may each fault
    code, message = plain.launch("read_past_end", (4,), (4,), [x, y, np.int32(0)], threads=2)
    assert code == 1 and message.count("out of bounds") == 1


def test_fault_in_a_loop_kernel_names_the_element(plain: H.HostModule) -> None:
    x = np.zeros(3, np.int32)
    assert plain.launch("loop_past_end", (1,), (1,), [x, np.int32(3)]) == (
        1, "kernel 'loop_past_end': index 3 is out of bounds for size 3 (element 3)")


def test_failing_assert_and_trap_are_fault_2(plain: H.HostModule) -> None:
    y = np.zeros(8, np.int32)
    code, message = plain.launch("failing_assert", (2,), (4,), [y, np.int32(5)])
    assert code == 2
    assert re.fullmatch(r"kernel 'failing_assert': assertion 'i != bad' failed \(.*plain\.cpp:\d+, in failing_assert\) "
                        r"\(block \(1, 0, 0\), thread \(1, 0, 0\)\)", message), message
    assert plain.launch("failing_assert", (2,), (4,), [y, np.int32(-1)]) == (0, "")
    np.testing.assert_array_equal(y, np.arange(8))
    assert plain.launch("traps", (1,), (8,), [np.int32(3)]) == (
        2, "kernel 'traps': __trap() was called (block (0, 0, 0), thread (3, 0, 0))")


def test_a_fault_stops_the_other_workers(plain: H.HostModule) -> None:
    blocks_run = np.zeros(1, np.uint64)
    blocks = 200_000
    code, message = plain.launch("fault_in_first_block", (blocks,), (1,), [blocks_run], threads=2)
    assert code == 2 and message.startswith("kernel 'fault_in_first_block': __trap() was called (block (0, 0, 0)")
    assert 1 <= blocks_run[0] < blocks


def test_other_cxx_exception_is_fault_4(plain: H.HostModule) -> None:
    code, message = plain.launch("throws_exception", (1,), (1,), [])
    assert code == 4 and message == "kernel 'throws_exception': unknown C++ exception"


def test_empty_grid_runs_nothing(plain: H.HostModule) -> None:
    y = np.zeros(4, np.float32)
    assert plain.launch("grid_copy", (0,), (4,), [y, y, np.int32(4)]) == (0, "")


# -- kernels with block and warp synchronisation: threads run as fibers ------------------------------------

SYNC = r"""
#include <cooperative_groups.h>
#include <cooperative_groups/memcpy_async.h>
#include <cooperative_groups/reduce.h>
#include <cuda/barrier>
namespace cg = cooperative_groups;

template <int Block>
__device__ void tree_reduce(float* s, unsigned t) {
  for (unsigned k = Block / 2; k > 0; k >>= 1) {
    if (t < k) s[t] += s[t + k];
    __syncthreads();
  }
}

extern "C" __global__ void block_sum(const float* x, float* out, int n) {
  __shared__ float s[256];
  const unsigned t = threadIdx.x;
  const int i = blockIdx.x * blockDim.x + t;
  s[t] = i < n ? x[i] : 0.0f;
  __syncthreads();
  tree_reduce<256>(s, t);
  if (t == 0) out[blockIdx.x] = s[0];
}

extern "C" __global__ void warp_sum(const double* x, double* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  double v = x[i];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  if (threadIdx.x % 32 == 0) out[i / 32] = v;
}

// per thread: ballot of odd lanes, any(lane == 5), all(lane < 32), all(lane < 16), shfl from lane 3,
// shfl_up 1, shfl_xor 1 with width 8, activemask, __reduce_add_sync, __syncthreads_count
extern "C" __global__ void votes(unsigned* out) {
  const unsigned lane = threadIdx.x % 32;
  unsigned* row = out + 10 * threadIdx.x;
  row[0] = __ballot_sync(0xffffffffu, lane & 1);
  row[1] = __any_sync(0xffffffffu, lane == 5);
  row[2] = __all_sync(0xffffffffu, lane < 32);
  row[3] = __all_sync(0xffffffffu, lane < 16);
  row[4] = __shfl_sync(0xffffffffu, lane * 10, 3);
  row[5] = __shfl_up_sync(0xffffffffu, lane * 10, 1);
  row[6] = __shfl_xor_sync(0xffffffffu, lane * 10, 1, 8);
  row[7] = __activemask();
  row[8] = __reduce_add_sync(0xffffffffu, lane);
  row[9] = __syncthreads_count(threadIdx.x % 3 == 0);
}

// dynamic shared memory, reversed within each block
extern "C" __global__ void reverse_blocks(const int* x, int* out) {
  extern __shared__ int buffer[];
  const unsigned t = threadIdx.x, n = blockDim.x, base = blockIdx.x * n;
  buffer[t] = x[base + t];
  __syncthreads();
  out[base + t] = buffer[n - 1 - t];
}

// threads past n return before the barrier; the barrier waits for the others only
extern "C" __global__ void early_return(const float* x, float* out, int n) {
  __shared__ float s[128];
  const int t = threadIdx.x;
  if (t >= n) return;
  s[t] = x[t];
  __syncthreads();
  out[t] = s[n - 1 - t];
  __syncthreads();
  out[t] += 1.0f;
}

// 2-D block: the barrier holds every thread of the block
extern "C" __global__ void transpose_tile(const int* x, int* out) {
  __shared__ int tile[8][8];
  tile[threadIdx.y][threadIdx.x] = x[threadIdx.y * 8 + threadIdx.x] + 100 * blockIdx.x;
  __syncthreads();
  out[blockIdx.x * 64 + threadIdx.y * 8 + threadIdx.x] = tile[threadIdx.x][threadIdx.y];
}

extern "C" __global__ void groups(const int* x, int* out) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  __shared__ int staged[64];
  cg::memcpy_async(block, staged, x + blockIdx.x * 64, cuda::aligned_size_t<16>(64 * sizeof(int)));
  cg::wait(block);
  const unsigned r = block.thread_rank();
  int v = staged[63 - r];
  block.sync();
  int sum = v;
  for (unsigned offset = 16; offset > 0; offset /= 2) sum += warp.shfl_down(sum, offset);
  int* row = out + 5 * (blockIdx.x * 64 + r);
  row[0] = v;
  row[1] = warp.shfl(sum, 0);
  row[2] = cg::reduce(cg::tiled_partition<8>(block), v, cg::plus<int>());
  row[3] = warp.meta_group_rank() * 100 + warp.thread_rank();
  row[4] = warp.ballot(v % 2 == 0);
  cg::thread_group as_group = block;
  cg::sync(as_group);
}

// per thread: in a branch of even lanes, the coalesced group's size, rank and mask; then
// __syncthreads_and / _or, __match_any_sync of lane / 4, __match_all_sync of a constant
extern "C" __global__ void divergence(unsigned* out) {
  unsigned* row = out + 6 * threadIdx.x;
  const unsigned lane = threadIdx.x % 32;
  if (lane % 2 == 0) {
    cg::coalesced_group even = cg::coalesced_threads();
    row[0] = even.size();
    row[1] = even.thread_rank();
    row[2] = __activemask();
  }
  row[3] = __syncthreads_and(threadIdx.x < 1000) * 10 + __syncthreads_and(threadIdx.x < 5) * 100 +
           __syncthreads_or(threadIdx.x == 7);
  row[4] = __match_any_sync(0xffffffffu, lane / 4);
  int all_same = 0;
  row[5] = __match_all_sync(0xffffffffu, 42, &all_same) == 0xffffffffu && all_same;
}

extern "C" __global__ void read_past_end_synced(const int* x, int* y, int n) {
  const int i = threadIdx.x;
  __syncthreads();
  if (i >= n) kspec_host::fault_index(i, n);
  y[i] = x[i];
}
"""


@pytest.fixture(scope="module")
def synced() -> H.HostModule:
    return H.build(SYNC, "synced")


def test_block_reduction_with_syncthreads(synced: H.HostModule) -> None:
    n = 256 * 37 + 11
    x = np.random.default_rng(1).integers(0, 100, n).astype(np.float32)
    out = np.zeros(38, np.float32)
    assert synced.launch("block_sum", (38,), (256,), [x, out, np.int32(n)], threads=2) == (0, "")
    np.testing.assert_array_equal(out, np.add.reduceat(x, np.arange(0, n, 256)))


def test_warp_shuffle_reduction(synced: H.HostModule) -> None:
    x = np.random.default_rng(2).random(512)
    out = np.zeros(16)
    assert synced.launch("warp_sum", (4,), (128,), [x, out]) == (0, "")
    np.testing.assert_allclose(out, x.reshape(16, 32).sum(axis=1), rtol=1e-12)


def test_votes_shuffles_and_barrier_counts(synced: H.HostModule) -> None:
    threads = 48  # a full warp and a partial one of 16 lanes
    out = np.zeros((threads, 10), np.uint32)
    assert synced.launch("votes", (1,), (threads,), [out]) == (0, "")
    for t in range(threads):
        lane, lanes = t % 32, (32 if t < 32 else 16)
        odd = sum(1 << k for k in range(1, lanes, 2))
        xor_source = lane ^ 1
        assert list(out[t]) == [
            odd, 1 if lanes > 5 else 0, 1, 1 if lanes <= 16 else 0, 30, (lane - 1) * 10 if lane else 0,
            xor_source * 10, (1 << lanes) - 1 if lanes < 32 else 0xFFFFFFFF, sum(range(lanes)),
            len(range(0, threads, 3)),
        ], t


def test_dynamic_shared_memory(synced: H.HostModule) -> None:
    x = np.arange(6 * 64, dtype=np.int32)
    out = np.zeros_like(x)
    assert synced.launch("reverse_blocks", (6,), (64,), [x, out], shared_bytes=64 * 4) == (0, "")
    np.testing.assert_array_equal(out, x.reshape(6, 64)[:, ::-1].ravel())


def test_early_return_before_syncthreads(synced: H.HostModule) -> None:
    x = np.arange(128, dtype=np.float32)
    out = np.zeros(128, np.float32)
    assert synced.launch("early_return", (1,), (128,), [x, out, np.int32(100)]) == (0, "")
    np.testing.assert_array_equal(out[:100], x[:100][::-1] + 1)
    assert not out[100:].any()


def test_2d_block_barrier(synced: H.HostModule) -> None:
    x = np.arange(64, dtype=np.int32)
    out = np.zeros(3 * 64, np.int32)
    assert synced.launch("transpose_tile", (3,), (8, 8), [x, out]) == (0, "")
    np.testing.assert_array_equal(out.reshape(3, 8, 8), np.stack([x.reshape(8, 8).T + 100 * b for b in range(3)]))


def test_cooperative_groups(synced: H.HostModule) -> None:
    x = np.arange(2 * 64, dtype=np.int32) * 3
    out = np.zeros((2 * 64, 5), np.int32)
    assert synced.launch("groups", (2,), (64,), [x, out]) == (0, "")
    for b in range(2):
        v = x[b * 64:(b + 1) * 64][::-1]
        for r in range(64):
            row = out[b * 64 + r]
            warp = v[r // 32 * 32:r // 32 * 32 + 32]
            eights = v[r // 8 * 8:r // 8 * 8 + 8]
            ballot = sum(1 << k for k in range(32) if warp[k] % 2 == 0)
            assert list(row) == [v[r], warp.sum(), eights.sum(), r // 32 * 100 + r % 32,
                                 np.array(ballot, np.uint32).view(np.int32)], (b, r)


def test_divergent_branches_votes_and_matches(synced: H.HostModule) -> None:
    out = np.zeros((64, 6), np.uint32)
    assert synced.launch("divergence", (1,), (64,), [out]) == (0, "")
    even = sum(1 << k for k in range(0, 32, 2))
    for t in range(64):
        lane = t % 32
        branch = [16, lane // 2, even] if lane % 2 == 0 else [0, 0, 0]
        assert list(out[t]) == [*branch, 11, 0xF << (lane // 4 * 4), 1], t


def test_fault_in_a_fiber_stops_the_grid(synced: H.HostModule) -> None:
    x = np.arange(64, dtype=np.int32)
    y = np.zeros(64, np.int32)
    code, message = synced.launch("read_past_end_synced", (3,), (64,), [x, y, np.int32(50)], threads=2)
    assert code == 1
    assert re.fullmatch(r"kernel 'read_past_end_synced': index 50 is out of bounds for size 50 "
                        r"\(block \([0-2], 0, 0\), thread \(50, 0, 0\)\)", message), message


# The scan reads tokens, not what the preprocessor pastes: a barrier it cannot see (and, below, a grid group).
MISSED = r"""
#define KSPEC_TEST_JOIN(a, b) a##b
extern "C" __global__ void block_sum(const float* x, float* out, int n) {
  __shared__ float s[256];
  const unsigned t = threadIdx.x;
  s[t] = (int)t < n ? x[t] : 0.0f;
  KSPEC_TEST_JOIN(__sync, threads)();
  if (t == 0) {
    float total = 0.0f;
    for (unsigned k = 0; k < blockDim.x; ++k) total += s[k];
    out[blockIdx.x] = total;
  }
}
"""


def test_sync_reached_without_fibers_is_fault_3() -> None:
    assert not scan_host_source(MISSED, "missed").uses_sync
    module = H.build(MISSED, "missed")
    x = np.zeros(256, np.float32)
    code, message = module.launch("block_sum", (1,), (256,), [x, x, np.int32(256)])
    assert code == 3
    assert message.startswith("kernel 'block_sum': __syncthreads() was reached in a block of 256 threads, but the "
                              "source scan found no block or warp synchronisation")
    # one thread per block needs no fibers
    out = np.zeros(1, np.float32)
    assert module.launch("block_sum", (1,), (1,), [np.ones(1, np.float32), out, np.int32(1)]) == (0, "")


def test_ucontext_fallback_runs_the_same_fibers() -> None:
    # the fallback for machines without the assembly context switch (forced here on x86-64 / aarch64)
    module = H.build(SYNC, "fallback", extra=("-DKSPEC_HOST_FIBER_UCONTEXT",))
    x = np.arange(512, dtype=np.float32)
    out = np.zeros(2, np.float32)
    assert module.launch("block_sum", (2,), (256,), [x, out, np.int32(512)]) == (0, "")
    np.testing.assert_array_equal(out, [x[:256].sum(), x[256:].sum()])


INTRINSICS = r"""
#include <cuda_runtime.h>
#include <cstdio>
struct pair { double a, b; };
// every thread adds 1 to both halves of a 16-byte pair through a CAS loop, and swaps itself into `last`
extern "C" __global__ void wide_atomics(pair* p, pair* last) {
  pair seen = *p;
  for (;;) {
    const pair next = {seen.a + 1, seen.b + 1};
    const pair old = atomicCAS(p, seen, next);
    if (old.a == seen.a && old.b == seen.b) break;
    seen = old;
  }
  atomicExch(last, pair{double(threadIdx.x), -double(threadIdx.x)});
}
extern "C" __global__ void intrinsics(const int* x, long long* out, unsigned short* flag, double* total) {
  const long long start = clock64();
  __nanosleep(10);
  __threadfence();
  __threadfence_block();
  out[threadIdx.x] = __ldg(x + threadIdx.x) + (clock64() >= start) * 1000 + (clock() >= 0) * 10000;
  atomicAdd_block(total, 0.25);
  atomicAdd_system(total, 0.25);
  atomicCAS(flag, (unsigned short)0, (unsigned short)7);
  if (threadIdx.x == 0) printf("");
}
"""


def test_timing_fences_loads_and_scoped_atomics() -> None:
    module = H.build(INTRINSICS, "intrinsics")
    x = np.arange(8, dtype=np.int32)
    out = np.zeros(8, np.int64)
    flag = np.zeros(1, np.uint16)
    total = np.zeros(1)
    assert module.launch("intrinsics", (1,), (8,), [x, out, flag, total]) == (0, "")
    np.testing.assert_array_equal(out, x + 11000)
    assert flag[0] == 7 and total[0] == 4.0
    p = np.zeros(2)
    last = np.zeros(2)
    assert module.launch("wide_atomics", (8,), (64,), [p, last], threads=2) == (0, "")
    assert list(p) == [512, 512] and last[0] == -last[1] and 0 <= last[0] < 64


def test_grid_group_stops_the_host_compile() -> None:
    # the scan refuses this_grid() first; if it misses one, the host headers stop the compile with a message
    source = ("#include <cooperative_groups.h>\n#define KSPEC_TEST_JOIN(a, b) a##b\n"
              "extern \"C\" __global__ void k() { cooperative_groups::KSPEC_TEST_JOIN(this_, grid)().sync(); }\n")
    with pytest.raises(kspec.CompileError, match="cannot run cooperative grid synchronisation"):
        H.build(source, "grid")


# -- kspec.jit output -----------------------------------------------------------------------------------------

@jit.rawkernel()
def _copy_unchecked(x, y):
    i = jit.grid(1)
    y[i] = x[i]


def _jit_module(kernel: jit.JitKernel, *args: object) -> H.HostModule:
    return H.build(kernel.cuda_source(*args), kernel.kernel_name())


def test_jit_thread_ids_and_laneid() -> None:
    out = np.zeros((2 * 2 * 3 * 4 * 2 * 2, 7), np.int64)
    module = _jit_module(K.thread_ids, out)
    assert module.launch("thread_ids", (2, 2, 3), (4, 2, 2), H.jit_arguments(out)) == (0, "")
    rows = {}
    for bz in range(3):
        for by in range(2):
            for bx in range(2):
                for tz in range(2):
                    for ty in range(2):
                        for tx in range(4):
                            x, y, z = bx * 4 + tx, by * 2 + ty, bz * 2 + tz
                            t = x + 8 * (y + 4 * z)
                            rows[t] = [tx + 10 * ty + 100 * tz, bx + 10 * by + 100 * bz, 4 + 20 + 200, 2 + 20 + 300,
                                       (tx + 4 * (ty + 2 * tz)) % 32, 32, t]
    np.testing.assert_array_equal(out, np.array([rows[t] for t in range(len(out))]))


def test_jit_block_reduce_and_shuffles() -> None:
    x = np.random.default_rng(3).integers(0, 50, 1000).astype(np.float32)
    out = np.zeros(4, np.float32)
    module = _jit_module(K.block_reduce, x, out)
    assert module.launch("block_reduce", (4,), (256,), H.jit_arguments(x, out)) == (0, "")
    np.testing.assert_array_equal(out, np.add.reduceat(x, [0, 256, 512, 768]))

    v = np.arange(64, dtype=np.float32) * 2
    table = np.zeros((64, 5), np.float32)
    module = _jit_module(K.warp_shuffles, v, table)
    assert module.launch("warp_shuffles", (1,), (64,), H.jit_arguments(v, table)) == (0, "")
    lane = np.arange(64) % 32
    warp = np.arange(64) // 32 * 32
    expected = np.stack([v[warp], v[warp + np.where(lane > 0, lane - 1, lane)],
                         v[warp + np.where(lane < 31, lane + 1, lane)], v[warp + (lane ^ 1)],
                         v[warp + lane // 8 * 8 + 1]], axis=1)
    np.testing.assert_array_equal(table, expected)


def test_jit_dynamic_shared_and_async_copy() -> None:
    x = np.arange(3 * 32, dtype=np.float64)
    out = np.zeros_like(x)
    module = _jit_module(K.dynamic_shared, x, out)
    assert module.launch("dynamic_shared", (3,), (32,), H.jit_arguments(x, out), shared_bytes=32 * 8) == (0, "")
    np.testing.assert_array_equal(out, x.reshape(3, 32)[:, ::-1].ravel())

    f = np.arange(2 * 128, dtype=np.float32)
    g = np.zeros_like(f)
    module = _jit_module(K.async_copy, f, g)
    assert module.launch("async_copy", (2,), (128,), H.jit_arguments(f, g)) == (0, "")
    np.testing.assert_array_equal(g, f.reshape(2, 128)[:, ::-1].ravel() + 1)


def test_jit_atomic_counters() -> None:
    out = np.zeros(3, np.uint32)
    module = _jit_module(K.atomic_counters, out, np.uint32(5))
    assert not scan_host_source(K.atomic_counters.cuda_source(out, np.uint32(5)), "atomic_counters").uses_sync
    assert module.launch("atomic_counters", (10,), (100,), H.jit_arguments(out, np.uint32(5))) == (0, "")
    assert list(out) == [1000 % 6, (-1000) % 6, 1000]


def test_jit_array_index_out_of_bounds_is_fault_1() -> None:
    x = np.arange(8, dtype=np.float32)
    y = np.zeros(8, np.float32)
    module = _jit_module(_copy_unchecked, x, y)
    code, message = module.launch("_copy_unchecked", (3,), (4,), H.jit_arguments(x, y), threads=1)
    assert (code, message) == (1, "kernel '_copy_unchecked': index 8 is out of bounds for size 8 "
                                  "(block (2, 0, 0), thread (0, 0, 0))")


def test_scan_of_the_sync_module() -> None:
    scan = scan_host_source(SYNC, "synced")
    assert scan.kernels == ("block_sum", "warp_sum", "votes", "reverse_blocks", "early_return", "transpose_tile",
                            "groups", "divergence", "read_past_end_synced")
    assert scan.uses_sync


def test_host_compile_keeps_defines_includes_and_target_options() -> None:
    from kspec.compiler import CompileOptions
    from kspec.compiler.host._compiler import host_args

    extra = ("-DA=1", "-U", "B", "-I/x", "-mno-f16c", "-m64", "-maxrregcount=32", "--use_fast_math")
    args, ignored = host_args(CompileOptions(arch="host", extra=extra))
    kept = args[args.index("-w") + 1 : args.index("-include")]
    assert kept[:5] == ["-DA=1", "-U", "B", "-I/x", "-mno-f16c"]  # after -march=native, so -mno-f16c wins
    assert ignored == ["-m64", "-maxrregcount=32", "--use_fast_math"]
