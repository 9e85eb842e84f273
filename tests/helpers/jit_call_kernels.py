"""Kernels for the device-function and cooperative-group tests (test_jit_calls.py on the CPU,
test_jit_calls_gpu.py on the GPU): calls between device functions, device functions of one name from several
scopes, recursion, device functions made by factories at compile time, and every cooperative-group call."""

from __future__ import annotations

import numpy

from kspec import jit

# -- calls between device functions ----------------------------------------------------------------------


@jit.rawkernel(device=True)
def cube(v):
    return v * square(v)  # `square` is defined below: device functions may call in any order


@jit.rawkernel(device=True)
def square(v):
    return v * v


@jit.rawkernel(device=True)
def cube_plus_square(v):
    return cube(v) + square(v)


@jit.rawkernel()
def nested_calls(x, out):
    i = jit.grid(1)
    if i < x.size:
        out[i] = cube_plus_square(x[i])


# -- one Python name, several scopes -----------------------------------------------------------------------


def adder(k):
    @jit.rawkernel(device=True)
    def g(v):
        return v + k

    return g


def scaler(k):
    @jit.rawkernel(device=True)
    def g(v):
        return v * k

    return g


@jit.rawkernel()
def same_names(x, out):
    # four device functions called g: three made by one factory with other closure values, one by another
    i = jit.grid(1)
    if i < x.size:
        out[i] = adder(1)(x[i]) + adder(100)(x[i]) + scaler(3)(adder(1000)(x[i]))


# -- recursion ---------------------------------------------------------------------------------------------


@jit.rawkernel(device=True)
def triangle(n):
    if n <= 0:
        return numpy.int64(0)  # the base case first: it fixes the return type before the recursive call
    return n + triangle(n - 1)


@jit.rawkernel(device=True)
def countdown(out, i):
    # no value returned: the return type (void) is known before the body, the recursive call may come first
    if i >= 0:
        out[i] = i * 10
        countdown(out, i - 1)


@jit.rawkernel(device=True)
def is_even(n):
    if n == 0:
        return True
    return is_odd(n - 1)


@jit.rawkernel(device=True)
def is_odd(n):
    if n == 0:
        return False
    return is_even(n - 1)


@jit.rawkernel()
def recursion(n, sums, parity, ladder):
    i = jit.grid(1)
    if i < n.size:
        sums[i] = triangle(n[i])
        parity[i] = is_even(n[i])
    if i == 0:
        countdown(ladder, ladder.size - 1)


@jit.rawkernel(device=True)
def endless(v):
    return v + endless(v)  # nothing fixes the return type before the call


@jit.rawkernel()
def unknown_return_type(x):
    x[0] = endless(x[0])


# -- recursion through a factory, ended by a compile-time condition ------------------------------------------


def pairwise_sum(stride, width):
    @jit.rawkernel(device=True)
    def step(buf):
        if stride < width:  # a compile-time condition: the last level has an empty body
            t = jit.threadIdx.x
            if t % (2 * stride) == 0:
                buf[t] += buf[t + stride]
            jit.syncthreads()
            pairwise_sum(stride * 2, width)(buf)

    return step


@jit.rawkernel()
def tree_sum(x, out):
    # one block of 128 threads: log2(128) device functions, each halving the active threads
    t = jit.threadIdx.x
    buf = jit.shared_memory(numpy.float64, 128)
    buf[t] = x[t]
    jit.syncthreads()
    pairwise_sum(1, 128)(buf)
    if t == 0:
        out[0] = buf[0]


@jit.rawkernel(device=True)
def bump_first(x):
    x[0] += 1
    return 1


@jit.rawkernel()
def index_from_call(x):
    x[bump_first(x)] += 5  # the call in the index runs once


# -- cooperative groups -------------------------------------------------------------------------------------


@jit.rawkernel()
def block_facts(out):
    # one row per thread: what the thread block says about itself
    g = jit.cg.this_thread_block()
    row = (jit.blockIdx.x + jit.blockIdx.y * jit.gridDim.x) * g.size() + g.thread_rank()
    gi = g.group_index()
    ti = g.thread_index()
    gd = g.group_dim()
    dt = g.dim_threads()
    out[row, 0] = g.thread_rank()
    out[row, 1] = g.size()
    out[row, 2] = g.num_threads()
    out[row, 3], out[row, 4], out[row, 5] = gi.x, gi.y, gi.z
    out[row, 6], out[row, 7], out[row, 8] = ti.x, ti.y, ti.z
    out[row, 9], out[row, 10], out[row, 11] = gd.x, gd.y, gd.z
    out[row, 12], out[row, 13], out[row, 14] = dt.x, dt.y, dt.z
    g.sync()
    jit.cg.sync(g)


@jit.rawkernel()
def grid_facts(out, ring):
    # cooperative: one row per thread of the grid, then a grid-wide exchange across two syncs
    g = jit.cg.this_grid()
    r = g.thread_rank()
    bi = g.block_index()
    db = g.dim_blocks()
    gd = g.group_dim()
    dt = g.dim_threads()
    ti = g.thread_index()
    out[r, 0] = r
    out[r, 1] = g.size()
    out[r, 2] = g.num_threads()
    out[r, 3] = g.num_blocks()
    out[r, 4] = g.block_rank()
    out[r, 5] = g.is_valid()
    out[r, 6], out[r, 7], out[r, 8] = bi.x, bi.y, bi.z
    out[r, 9], out[r, 10], out[r, 11] = db.x, db.y, db.z
    out[r, 12], out[r, 13], out[r, 14] = gd.x, gd.y, gd.z
    out[r, 15], out[r, 16], out[r, 17] = dt.x, dt.y, dt.z
    out[r, 18], out[r, 19], out[r, 20] = ti.x, ti.y, ti.z
    ring[r] = r
    g.sync()
    value = ring[(r + 1) % g.size()]  # written by another block before the sync
    jit.cg.sync(g)
    ring[r] = value


@jit.rawkernel(device=True)
def rank_in(g):
    return g.thread_rank()  # a group passed to a device function


@jit.rawkernel()
def staged_copy(x, y, aligned):
    # two batches of async copies into shared memory, waited for one after the other
    smem = jit.shared_memory(numpy.int32, 256, alignment=16)
    g = jit.cg.this_thread_block()
    t = rank_in(g)
    base = jit.blockIdx.x * 256
    if aligned:
        jit.cg.memcpy_async(g, smem, 0, x, base, 4 * 128, aligned_size=16)
        jit.cg.memcpy_async(g, smem, 128, x, base + 128, 4 * 128, aligned_size=16)
    else:
        jit.cg.memcpy_async(g, smem, 0, x, base, 4 * 128)
        jit.cg.memcpy_async(g, smem, 128, x, base + 128, 4 * 128)
    jit.cg.wait_prior(g, 1)  # the first batch is in
    y[base + t] = smem[t] * 2
    jit.cg.wait(g)  # both are in
    y[base + 128 + t] = smem[128 + t] * 2
