"""kspec.jit device functions and cooperative groups run on both devices (NumPy arrays on kspec's CPU device,
CuPy arrays on a GPU): results of nested, same-named, recursive and factory-made device functions, and of
the thread-block group and memcpy_async, against NumPy. GPU-only: the grid group (a cooperative launch).
The translation and NVRTC compiles of these kernels are checked without a device in test_jit_calls.py."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import jit_call_kernels as K
import kspec

RNG = np.random.default_rng(2024)


def dev(xp, a):
    return xp.asarray(np.ascontiguousarray(a))


def test_nested_device_functions(xp):
    hx = RNG.uniform(-2, 2, 300).astype(np.float32)
    out = xp.zeros(300, dtype=np.float32)
    K.nested_calls[3, 128](dev(xp, hx), out)
    np.testing.assert_allclose(xp.asnumpy(out), hx**3 + hx**2, rtol=1e-5, atol=1e-6)


def test_device_functions_of_one_name(xp):
    hx = RNG.integers(-1000, 1000, 300).astype(np.int32)
    out = xp.zeros(300, dtype=np.int32)
    K.same_names[3, 128](dev(xp, hx), out)
    np.testing.assert_array_equal(xp.asnumpy(out), (hx + 1) + (hx + 100) + 3 * (hx + 1000))


def test_recursive_device_functions(xp):
    n = np.arange(20, dtype=np.int64)
    sums, parity = xp.zeros(20, dtype=np.int64), xp.zeros(20, dtype=np.bool_)
    ladder = xp.zeros(12, dtype=np.int64)
    K.recursion[1, 32](dev(xp, n), sums, parity, ladder)
    np.testing.assert_array_equal(xp.asnumpy(sums), n * (n + 1) // 2)
    np.testing.assert_array_equal(xp.asnumpy(parity), n % 2 == 0)
    np.testing.assert_array_equal(xp.asnumpy(ladder), np.arange(12) * 10)


def test_recursion_through_a_factory(xp):
    hx = RNG.standard_normal(128)
    out = xp.zeros(1, dtype=np.float64)
    K.tree_sum[1, 128](dev(xp, hx), out)
    # the pairwise order of the kernel, in NumPy
    expected = hx.copy()
    stride = 1
    while stride < 128:
        expected[::2 * stride] += expected[stride::2 * stride]
        stride *= 2
    assert xp.asnumpy(out)[0] == expected[0]


def test_call_in_an_index_runs_once(xp):
    x = dev(xp, np.zeros(2, np.int64))
    K.index_from_call[1, 1](x)
    np.testing.assert_array_equal(xp.asnumpy(x), [1, 5])


def test_thread_block_group(xp):
    grid, block = (2, 3), (4, 2, 2)
    threads = 16
    out = dev(xp, np.full((6 * threads, 15), -1, np.int64))
    K.block_facts[grid, block](out)
    got = xp.asnumpy(out)
    rows = []
    for by in range(3):
        for bx in range(2):
            for tz in range(2):
                for ty in range(2):
                    for tx in range(4):
                        rank = tx + 4 * (ty + 2 * tz)
                        rows.append([rank, threads, threads, bx, by, 0, tx, ty, tz, 4, 2, 2, 4, 2, 2])
    np.testing.assert_array_equal(got, np.array(rows, np.int64))


@pytest.mark.gpu
def test_grid_group_is_cooperative_and_syncs():
    grid, block = (2, 2), (32, 1, 1)
    threads = 4 * 32
    out = kspec.asarray(np.zeros((threads, 21), np.uint64))
    ring = kspec.asarray(np.zeros(threads, np.uint64))
    K.grid_facts[grid, block](out, ring)
    got = out.get()
    rows = []
    for by in range(2):
        for bx in range(2):
            block_rank = bx + 2 * by
            for tx in range(32):
                rank = block_rank * 32 + tx
                rows.append([rank, threads, threads, 4, block_rank, 1, bx, by, 0, 2, 2, 1, 2, 2, 1, 64, 2, 1,
                             bx * 32 + tx, by, 0])
    np.testing.assert_array_equal(got, np.array(rows, np.uint64))
    np.testing.assert_array_equal(ring.get(), (np.arange(threads) + 1) % threads)


@pytest.mark.parametrize("aligned", [True, False])
def test_memcpy_async_in_two_batches(aligned, xp):
    hx = RNG.integers(-(2**20), 2**20, 3 * 256).astype(np.int32)
    y = xp.zeros(3 * 256, dtype=np.int32)
    K.staged_copy[3, 128](dev(xp, hx), y, aligned)
    np.testing.assert_array_equal(xp.asnumpy(y), hx * 2)
