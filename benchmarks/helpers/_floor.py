"""The C floor of a call's host cost (issue [Q]): the same launches with the same parameters from C, in this process.

A call's launches come from ``kernel.plan_launch`` (its LaunchPlan: each step's function, grid, block and
parameter buffer, pointers 0), the pointers written in for the call's arrays. A loop in C, built by kspec's
host-compiler path (``kspec.compiler.compile_host_library``, cached like any binary), calls the driver's
``cuLaunchKernel`` for each step with the buffer (``CU_LAUNCH_PARAM_BUFFER_POINTER``), ``calls`` times; Python
calls it once per loop, so ctypes costs nothing per launch. What a call costs above this is the library's:
argument checks, the signature lookup, allocation, the Python frames.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

FLOOR_SOURCE = r"""
#include <cstddef>
typedef int (*launch_fn)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                         void**, void**);
// Every step of one call, ``calls`` times, on ``stream``; the first driver error ends it (returned).
extern "C" __attribute__((visibility("default")))
int kspec_floor_loop(void* launch, int steps, void** functions, const unsigned* grids, const unsigned* blocks,
                     const unsigned* shared, void** buffers, const size_t* sizes, void* stream, long calls) {
    launch_fn cu_launch = (launch_fn)launch;
    for (long c = 0; c < calls; ++c) {
        for (int s = 0; s < steps; ++s) {
            size_t size = sizes[s];
            void* extra[] = {(void*)1, buffers[s], (void*)2, &size, (void*)0};  // BUFFER_POINTER, BUFFER_SIZE, END
            int r = cu_launch(functions[s], grids[s], 1, 1, blocks[s], 1, 1, shared[s], stream, nullptr, extra);
            if (r != 0) return r;
        }
    }
    return 0;
}
"""

_LIB: list[Any] = []


def _library() -> Any:
    if not _LIB:
        import tempfile

        from kspec.compiler import compile_host_library

        program = compile_host_library(FLOOR_SOURCE, "bench_floor")
        path = tempfile.NamedTemporaryFile(suffix=".so", delete=False)
        path.write(program.binary)
        path.close()
        lib = ctypes.CDLL(path.name)
        lib.kspec_floor_loop.restype = ctypes.c_int
        cuda = ctypes.CDLL("libcuda.so.1")
        _LIB.extend([lib, ctypes.cast(cuda.cuLaunchKernel, ctypes.c_void_p).value])
    return _LIB


def spec_of(array: Any) -> Any:
    """A CuPy array's kspec ArraySpec (shape, dtype, device, strides)."""
    import kspec

    return kspec.ArraySpec(array.shape, array.dtype.name, device_id=array.device.id, strides=array.strides)


def _loop(functions: Sequence[int], grids: Sequence[int], blocks: Sequence[int], shared: Sequence[int],
          buffers: list[Any], stream: int) -> Callable[[int], None]:
    """``run(calls)``: the steps (function, grid, block, shared bytes, parameter buffer) from C, ``calls`` times."""
    n = len(functions)
    lib, launch = _library()
    c_functions = (ctypes.c_void_p * n)(*functions)
    c_grids = (ctypes.c_uint * n)(*grids)
    c_blocks = (ctypes.c_uint * n)(*blocks)
    c_shared = (ctypes.c_uint * n)(*shared)
    pointers = (ctypes.c_void_p * n)(*(ctypes.addressof(b) for b in buffers))
    sizes = (ctypes.c_size_t * n)(*(ctypes.sizeof(b) for b in buffers))

    def run(calls: int) -> None:
        r = lib.kspec_floor_loop(ctypes.c_void_p(launch), n, c_functions, c_grids, c_blocks, c_shared, pointers, sizes,
                                 ctypes.c_void_p(stream), ctypes.c_long(calls))  # fmt: skip
        if r != 0:
            raise RuntimeError(f"cuLaunchKernel from C returned {r}")

    run.keep = buffers  # type: ignore[attr-defined]
    return run


def raw_floor_call(kernel: Any, grid_block: tuple[int, int], args: Sequence[Any], stream: int = 0) -> Callable[[int], None]:
    """``run(calls)``: a kspec RawKernel's launch of ``args`` (CuPy arrays; NumPy scalars of the parameters'
    types) from C: one 8-byte slot per argument, as its launcher packs them."""
    params = b"".join(struct.pack("<Q", a.data.ptr) if hasattr(a, "data") and hasattr(a.data, "ptr")
                      else np.asarray(a).tobytes().ljust(8, b"\0") for a in args)  # fmt: skip
    kernel(grid_block[:1], grid_block[1:], tuple(args))  # loads the function
    function = int(kernel._launcher.function(0))
    buffer = ctypes.create_string_buffer(params, len(params))
    run = _loop([function], [grid_block[0]], [grid_block[1]], [0], [buffer], stream)
    run.keep = (buffer, args)  # type: ignore[attr-defined]
    return run


def floor_call(kernel: Any, inputs: Sequence[Any], outputs: Sequence[Any], stream: int = 0,
               **kwargs: Any) -> Callable[[int], None]:  # fmt: skip
    """``run(calls)``: the launches of ``kernel(*inputs, *outputs, **kwargs)`` (CuPy arrays and numbers) from C,
    ``calls`` times on ``stream``. Outputs must be given (an allocating call launches the same)."""
    import cupy as cp

    specs = [spec_of(a) if hasattr(a, "__cuda_array_interface__") else a for a in inputs]
    outs = [spec_of(a) for a in outputs]
    plan = kernel.plan_launch(*specs, *outs, **kwargs) if kernel.KIND == "elementwise" else \
        kernel.plan_launch(*specs, out=outs[0], **kwargs)
    arrays = [a for a in inputs if hasattr(a, "__cuda_array_interface__")]
    workspace = cp.empty(max(plan.workspace, 1), dtype=cp.uint8)
    buffers = []
    for step in plan.steps:
        params = bytearray(step.params)
        for offset, role, index in step.pointers:
            if role == "input":
                ptr = arrays[index].data.ptr
            elif role == "output":
                ptr = outputs[index].data.ptr
            else:  # the workspace, ``index`` bytes in
                ptr = workspace.data.ptr + index
            struct.pack_into("<Q", params, offset, ptr)
        buffers.append(ctypes.create_string_buffer(bytes(params), len(params)))
    steps = plan.steps
    run = _loop([s.function for s in steps], [s.grid for s in steps], [s.block for s in steps],
                [s.shared for s in steps], buffers, stream)  # fmt: skip
    run.keep = (buffers, workspace, arrays, outputs)  # type: ignore[attr-defined]
    return run
