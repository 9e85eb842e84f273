"""Kernels written for kspec.jit, shared by the CPU translation tests and the GPU tests.

Each covers constructs or builtins; the tests translate them for several signatures, compile the C++
with NVRTC (CPU) and run them against NumPy (GPU). Kept in a module of their own: kspec.jit reads
function sources with inspect.getsource, and these must stay at known lines for the error tests.
"""

from __future__ import annotations

import math

import numpy

from kspec import jit

SCALE = 3  # a module-level constant, captured at compile time
HALF_BLOCK = 128


@jit.rawkernel()
def elementwise_copy(x, y, size):  # the seed's example, verbatim
    tid = jit.blockIdx.x * jit.blockDim.x + jit.threadIdx.x
    ntid = jit.gridDim.x * jit.blockDim.x
    for i in range(tid, size, ntid):
        y[i] = x[i]


@jit.rawkernel()
def saxpy(a, x, y, out, n):
    for i in range(jit.grid(1), n, jit.gridsize(1)):
        out[i] = a * x[i] + y[i]


@jit.rawkernel()
def arithmetic(a, b, out):
    # out[k] = one binary operation of a[i] and b[i] each, C++ semantics for // and % of integers
    i = jit.grid(1)
    if i < a.size:
        x = a[i]
        y = b[i]
        out[i, 0] = x + y
        out[i, 1] = x - y
        out[i, 2] = x * y
        out[i, 3] = x / y
        out[i, 4] = x // y
        out[i, 5] = x % y
        out[i, 6] = -x
        out[i, 7] = x if x > y else y
        out[i, 8] = (x < y) + (x <= y) * 2 + (x == y) * 4 + (x != y) * 8 + (x >= y) * 16
        out[i, 9] = x * SCALE + 1


@jit.rawkernel()
def integer_ops(a, b, out):
    i = jit.grid(1)
    if i < a.size:
        x = a[i]
        y = b[i]
        out[i, 0] = x & y
        out[i, 1] = x | y
        out[i, 2] = x ^ y
        out[i, 3] = x << 2
        out[i, 4] = x >> 1
        out[i, 5] = ~x
        out[i, 6] = x ** 3
        out[i, 7] = abs(x)
        out[i, 8] = min(x, y, 5)
        out[i, 9] = max(x, y)


@jit.rawkernel()
def control_flow(x, out, n):
    i = jit.grid(1)
    if i >= n:
        return  # early exit
    v = x[i]
    total = 0
    if v < 0:
        kind = -1
    elif v == 0:
        kind = 0
    else:
        kind = 1
    k = 0
    while True:
        k += 1
        if k % 2 == 0:
            continue
        if k > 9:
            break
        total += k
    for j in range(10, 0, -2):
        total += j
    for j in range(3):
        total += j * (1 if kind > 0 else 2)
    for j in range(0, 8, 2, unroll=True):
        total += j
    for j in jit.range(i, i + 4, unroll=2):  # noqa: B007 (the loop is what is under test)
        total += 1
    for j in range(0, 4, unroll=False):
        total += not (j == 2 and kind == 0) or j > 3
    out[i] = total * 10 + kind


@jit.rawkernel()
def runtime_step(out, start, stop, step):
    count = 0
    for i in range(start, stop, step):  # noqa: B007 (the loop is what is under test)
        count += 1
    out[0] = count


@jit.rawkernel()
def shapes(x, out):
    # 2-d strided indexing, .shape / .strides / .size / .ndim, tuple unpacking, len
    rows, cols = x.shape
    i, j = jit.grid(2)
    if i < rows and j < cols:
        out[i, j] = x[i, j] * 2 + x.ndim
    if i == 0 and j == 0:
        s0, s1 = x.strides
        out[0, 0] = x.size + len(x) * 0 + s0 * 0 + s1 * 0 + rows * 0


@jit.rawkernel()
def zero_d(x, out):
    out[()] = x[()] + 1


@jit.rawkernel()
def math_functions(x, out):
    i = jit.grid(1)
    if i < x.size:
        v = x[i]
        out[i, 0] = math.sqrt(v)
        out[i, 1] = numpy.exp(v)
        out[i, 2] = math.log(v) + numpy.log2(v)
        out[i, 3] = numpy.sin(v) * math.cos(v)
        out[i, 4] = math.floor(v) + numpy.ceil(v)
        out[i, 5] = numpy.power(v, 2) + v ** 0.5
        out[i, 6] = numpy.arctan2(v, 1.0) + math.hypot(v, v)
        out[i, 7] = abs(-v) + numpy.absolute(v) + math.pi
        out[i, 8] = numpy.isnan(v) + numpy.isinf(v * numpy.inf) + math.isfinite(v)
        out[i, 9] = numpy.tanh(v) + numpy.maximum(v, 0.5) + numpy.minimum(v, 0.5) + numpy.square(v)


@jit.rawkernel()
def casts(x, out):
    i = jit.grid(1)
    if i < x.size:
        v = x[i]
        out[i, 0] = numpy.float32(v) * numpy.float32(0.5)
        out[i, 1] = int(v)
        out[i, 2] = float(v) / 4
        out[i, 3] = bool(v) + numpy.int8(3)
        out[i, 4] = numpy.int32(v) // 2
        out[i, 5] = numpy.uint8(200) + numpy.uint8(100)
        out[i, 6] = numpy.float64(numpy.nan) != numpy.float64(numpy.nan)
        out[i, 7] = numpy.float16(v) + numpy.float16(1)


@jit.rawkernel()
def thread_ids(out):
    # every index builtin of the thread, in one row per thread
    x, y, z = jit.grid(3)
    nx, ny, nz = jit.gridsize(3)
    t = x + nx * (y + ny * z)
    out[t, 0] = jit.threadIdx.x + jit.threadIdx.y * 10 + jit.threadIdx.z * 100
    out[t, 1] = jit.blockIdx.x + jit.blockIdx.y * 10 + jit.blockIdx.z * 100
    out[t, 2] = jit.blockDim.x + jit.blockDim.y * 10 + jit.blockDim.z * 100
    out[t, 3] = jit.gridDim.x + jit.gridDim.y * 10 + jit.gridDim.z * 100
    out[t, 4] = jit.laneid()
    out[t, 5] = jit.warpsize
    out[t, 6] = jit.grid(1) * 0 + jit.gridsize(1) * 0 + t


@jit.rawkernel()
def block_reduce(x, out):
    # static shared memory; `smem[tid] += smem[tid + s]` with tid uint32 and s int64 (CuPy rejects it)
    smem = jit.shared_memory(numpy.float32, 256)
    tid = jit.threadIdx.x
    i = jit.blockIdx.x * jit.blockDim.x + tid
    smem[tid] = x[i] if i < x.size else numpy.float32(0)
    jit.syncthreads()
    s = HALF_BLOCK
    while s > 0:
        if tid < s:
            smem[tid] += smem[tid + s]
        jit.syncthreads()
        s //= 2
    if tid == 0:
        out[jit.blockIdx.x] = smem[0]


@jit.rawkernel()
def dynamic_shared(x, out):
    # dynamic shared memory (size=None): the launch's shared_mem bytes; reversed within each block
    buf = jit.shared_memory(numpy.float64, None, alignment=16)
    tid = jit.threadIdx.x
    n = jit.blockDim.x
    base = jit.blockIdx.x * n
    buf[tid] = x[base + tid]
    jit.syncthreads()
    out[base + tid] = buf[n - 1 - tid]


@jit.rawkernel()
def warp_shuffles(x, out):
    i = jit.grid(1)
    v = x[i]
    out[i, 0] = jit.shfl_sync(0xFFFFFFFF, v, 0)
    out[i, 1] = jit.shfl_up_sync(0xFFFFFFFF, v, 1)
    out[i, 2] = jit.shfl_down_sync(0xFFFFFFFF, v, 1)
    out[i, 3] = jit.shfl_xor_sync(0xFFFFFFFF, v, 1)
    out[i, 4] = jit.shfl_sync(0xFFFFFFFF, v, 1, width=8)
    jit.syncwarp()
    jit.syncwarp(mask=0xFFFFFFFF)


@jit.rawkernel()
def grid_sync(x, out, n):
    # cooperative: phase 1 writes x*2 everywhere, grid.sync(), phase 2 reads a neighbour's phase-1 value
    g = jit.cg.this_grid()
    b = jit.cg.this_thread_block()
    start = g.thread_rank()
    stride = g.size()
    for i in range(start, n, stride):
        out[i] = x[i] * 2
    g.sync()
    b.sync()
    for i in range(start, n, stride):
        x[i] = out[(i + 1) % n] + b.thread_rank() * 0 + b.size() * 0 + b.num_threads() * 0


@jit.rawkernel()
def async_copy(x, out):
    block = jit.cg.this_thread_block()
    smem = jit.shared_memory(numpy.float32, 128)
    base = jit.blockIdx.x * 128
    jit.cg.memcpy_async(block, smem, 0, x, base, 128 * 4)
    jit.cg.wait(block)
    jit.cg.wait_prior(block, 0)
    out[base + block.thread_rank()] = smem[127 - block.thread_rank()] + 1


@jit.rawkernel(device=True)
def square_plus(a, b):
    return a * a + b


@jit.rawkernel(device=True)
def clamp_index(i, n):
    if i >= n:
        return n - 1
    return i


@jit.rawkernel(device=True)
def read_clamped(x, i):
    return x[clamp_index(i, x.size)]


@jit.rawkernel(device=True)
def store(out, i, v):
    out[i] = v


@jit.rawkernel()
def uses_device_functions(x, out):
    i = jit.grid(1)
    if i < out.size:
        store(out, i, square_plus(read_clamped(x, i + 1), numpy.float32(1)) + square_plus(2, 3))


@jit.rawkernel()
def atomics(counters, values):
    # integers: add/sub/min/max/and/or/xor/exch/cas under contention (every thread hits the same slots)
    i = jit.grid(1)
    v = values[i]
    jit.atomic_add(counters, 0, v)
    jit.atomic_sub(counters, 1, v)
    jit.atomic_min(counters, 2, v)
    jit.atomic_max(counters, 3, v)
    jit.atomic_and(counters, 4, v)
    jit.atomic_or(counters, 5, v)
    jit.atomic_xor(counters, 6, v)
    jit.atomic_exch(counters, 7, v)
    jit.atomic_cas(counters, 8, 0, v)


@jit.rawkernel()
def atomic_float_add(total, values):
    i = jit.grid(1)
    if i < values.size:
        jit.atomic_add(total, 0, values[i])
        jit.atomic_sub(total, 1, values[i])


@jit.rawkernel()
def atomic_counters(out, wrap):
    old = jit.atomic_inc(out, 0, wrap)
    jit.atomic_dec(out, 1, wrap)
    jit.atomic_add(out, (2,), old * 0 + 1)


@jit.rawkernel()
def complex_ops(z, out):
    i = jit.grid(1)
    if i < z.size:
        w = z[i] * z[i] + 1
        out[i, 0] = w.real
        out[i, 1] = w.imag
        out[i, 2] = abs(z[i])
