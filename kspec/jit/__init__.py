"""kspec.jit: CUDA kernels written as Python functions (cupyx.jit's API), compiled through their AST.

    >>> from kspec import jit
    >>> @jit.rawkernel()
    ... def elementwise_copy(x, y, size):
    ...     tid = jit.blockIdx.x * jit.blockDim.x + jit.threadIdx.x
    ...     ntid = jit.gridDim.x * jit.blockDim.x
    ...     for i in range(tid, size, ntid):
    ...         y[i] = x[i]
    >>> elementwise_copy((128,), (1024,), (x, y, size))     # RawKernel style
    >>> elementwise_copy[128, 1024](x, y, size)             # Numba style

The generated kernel is a raw kernel: it is compiled by kspec's compiler into the same disk cache, launched
by :class:`kspec.kernels.RawKernel`, and ``k.spec(*args)`` / ``rawkernel(signatures=[...])`` give raw specs
that ``kspec build`` precompiles (``rawkernel(binaries=dir)`` then runs without NVRTC).

Semantics that differ from Python (they are C++'s, as in CUDA C++ and cupyx.jit):

* ``//`` and ``%`` of integers truncate toward zero (``-7 // 2 == -3``, ``-7 % 2 == -1``); ``%`` of floats
  is ``fmod``; ``/`` is true division (integers give float64); ``**`` of integers is exact integer power
  (a negative exponent gives 0), of floats ``pow``. Integers wrap on overflow; ``and``/``or`` give bools;
  chained comparisons evaluate the middle operand twice.
* Negative indices do not wrap around; there is no bounds checking; slices are not supported.
* Python literals are weak: ``x * 2.0`` is float32 for a float32 ``x``; ``tid + 1`` stays uint32. A local
  initialised from a literal alone is int64 / float64 (``acc = 0.0`` accumulates in double; write
  ``acc = numpy.float32(0)`` for float).
* A local's type is fixed by its first assignment (which may be inside a branch: locals are function-wide,
  as in Python). A later assignment of another type is an error naming both types and the line, unless the
  value converts without loss (uint32 into int64) or is a literal. Augmented assignment follows C++
  (``smem[tid] += smem[tid + s]`` with ``tid`` uint32 and ``s`` int64 is accepted; cupyx.jit rejects it).
* ``math.*`` functions keep float32 arguments in float32 (Python's math returns float64); integer arguments
  compute in float64. float16 arithmetic other than ``+ - * /`` computes in float32.
* Module-level constants and closure variables are read when a signature is first compiled.
* Atomics take the dtypes CUDA 13 has for them (kspec/jit/_atomics.py; docs/guide/jit.md lists them).

Builtins: ``threadIdx``, ``blockIdx``, ``blockDim``, ``gridDim``, ``warpsize``, ``laneid()``, ``grid(n)``,
``gridsize(n)``, ``syncthreads()``, ``syncwarp(mask)``, ``shared_memory(dtype, size, alignment=None)``,
``atomic_add/sub/exch/min/max/inc/dec/cas/and/or/xor``, ``shfl_sync/shfl_up_sync/shfl_down_sync/shfl_xor_sync``,
``range(start, stop, step, unroll=)``, and ``cg`` (``this_thread_block()``, ``this_grid()``, their CUDA 13
methods, ``sync``, ``memcpy_async(..., aligned_size=)``, ``wait``, ``wait_prior``).

Device functions (``rawkernel(device=True)``) call each other in any order and may recurse (a recursive call
needs the return type fixed first, else ValueError); a plain Python function called inside a kernel with
compile-time arguments runs while translating (factories of device functions).
"""

from __future__ import annotations

from ._api import JitKernel, rawkernel
from ._builtins import (
    atomic_add,
    atomic_and,
    atomic_cas,
    atomic_dec,
    atomic_exch,
    atomic_inc,
    atomic_max,
    atomic_min,
    atomic_or,
    atomic_sub,
    atomic_xor,
    blockDim,
    blockIdx,
    cg,
    grid,
    gridDim,
    gridsize,
    laneid,
    range,
    shared_memory,
    shfl_down_sync,
    shfl_sync,
    shfl_up_sync,
    shfl_xor_sync,
    syncthreads,
    syncwarp,
    threadIdx,
    warpsize,
)
from ._errors import JitError, JitNameError, JitRecursionError, JitSourceError, JitTypeError, JitUnsupportedError, JitValueError

__all__ = [
    "JitError",
    "JitKernel",
    "JitNameError",
    "JitRecursionError",
    "JitSourceError",
    "JitTypeError",
    "JitUnsupportedError",
    "JitValueError",
    "atomic_add",
    "atomic_and",
    "atomic_cas",
    "atomic_dec",
    "atomic_exch",
    "atomic_inc",
    "atomic_max",
    "atomic_min",
    "atomic_or",
    "atomic_sub",
    "atomic_xor",
    "blockDim",
    "blockIdx",
    "cg",
    "grid",
    "gridDim",
    "gridsize",
    "laneid",
    "range",
    "rawkernel",
    "shared_memory",
    "shfl_down_sync",
    "shfl_sync",
    "shfl_up_sync",
    "shfl_xor_sync",
    "syncthreads",
    "syncwarp",
    "threadIdx",
    "warpsize",
]
