"""CuPy's calling patterns at CuPy's cost (issue 52): kernels constructed inside functions, on every call.

Code written for CuPy (cupyx.scipy throughout) builds its kernels inside the functions that use them, so a
constructor call is on every call's path, and so is the first call of each new kernel object. Rows, each
timed for kspec and for CuPy in the same run (the variants take turns; the median of ``--repeat`` loops of
``--calls`` each is reported, in microseconds per iteration):

- ``ElementwiseKernel(...)`` of a kernel constructed before (the same arguments);
- ``ReductionKernel(...)`` of a kernel constructed before;
- ``RawModule(code=...).get_function(name)`` of a module constructed before;
- ``ElementwiseKernel(...)`` then a call on 1,000 float32 elements (CuPy arrays, output allocated);
- ``RawModule(code=...).get_function(name)`` then a launch on 1,000 elements.

The loops with a call synchronise the device once per loop (the host's cost is what is measured: the GPU
runs these tiny kernels faster than the host submits them). Without CuPy, or without a GPU, the rows that
can run still run (construction is pure Python) and the CuPy column stays empty. Usage::

    python benchmarks/host/constructors.py [--calls 5000] [--repeat 15]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

N = 1000
OPERATION = "z = (x - y) * (x - y)"
EW_ARGS = ("float32 x, float32 y", "float32 z", OPERATION, "ctor_sqdiff")
RED_ARGS = ("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "ctor_l2norm")
RAW_SOURCE = r"""
extern "C" __global__ void ctor_copy(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
"""
ROWS = (
    "ElementwiseKernel(...) built before",
    "ReductionKernel(...) built before",
    "RawModule(code=...).get_function(...)",
    "ElementwiseKernel(...) + call, 1,000 elements",
    "RawModule(code=...).get_function(...) + launch, 1,000 elements",
)


# Each loop is made by a factory that binds its objects as arguments (the house style of launch_overhead.py):
# closures over main()'s names would read them when the interleaved measurement runs.


def construct_loop(ctor: Callable[..., Any], args: tuple[Any, ...]) -> Callable[[int], None]:
    def loop(calls: int) -> None:
        for _ in range(calls):
            ctor(*args)

    return loop


def module_loop(module: Callable[..., Any], source: str) -> Callable[[int], None]:
    def loop(calls: int) -> None:
        for _ in range(calls):
            module(code=source).get_function("ctor_copy")

    return loop


def construct_call_loop(ctor: Callable[..., Any], args: tuple[Any, ...], x: Any, y: Any) -> Callable[[int], None]:
    def loop(calls: int) -> None:
        for _ in range(calls):
            ctor(*args)(x, y)

    return loop


def module_launch_loop(module: Callable[..., Any], source: str, launch_args: tuple[Any, ...]) -> Callable[[int], None]:
    grid, block = ((N + 127) // 128,), (128,)

    def loop(calls: int) -> None:
        for _ in range(calls):
            module(code=source).get_function("ctor_copy")(grid, block, launch_args)

    return loop


def measure(loops: dict[str, Callable[[int], None]], syncs: dict[str, Callable[[], None]], calls: int,
            repeat: int) -> dict[str, float]:  # fmt: skip
    """Median microseconds per iteration of each loop; the loops take turns, so drift of the host lands on all
    of them alike. Every loop runs once before (compiles, loads, prepares the first call)."""
    samples: dict[str, list[float]] = {name: [] for name in loops}
    for name, loop in loops.items():
        loop(min(calls, 200))
        syncs[name]()
    for _ in range(repeat):
        for name, loop in loops.items():
            start = time.perf_counter()
            loop(calls)
            syncs[name]()
            samples[name].append((time.perf_counter() - start) / calls * 1e6)
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=15)
    opts = parser.parse_args()

    import numpy as np

    import kspec
    from kspec.runtime import why_no_gpu

    try:
        import cupy
    except ImportError:
        cupy = None
    gpu = cupy is not None and why_no_gpu() is None

    loops: dict[tuple[str, str], Callable[[int], None]] = {}
    syncs: dict[tuple[str, str], Callable[[], None]] = {}
    notes: list[str] = []

    def nothing() -> None:
        pass

    libraries: list[tuple[str, Any]] = [("kspec", kspec)]
    if cupy is not None:
        libraries.append(("CuPy", cupy))
    else:
        notes.append("CuPy is not importable: its column is empty")
    if not gpu:
        notes.append("no GPU (or no CuPy arrays): the rows with a call are skipped")
    for label, lib in libraries:
        loops[(ROWS[0], label)] = construct_loop(lib.ElementwiseKernel, EW_ARGS)
        loops[(ROWS[1], label)] = construct_loop(lib.ReductionKernel, RED_ARGS)
        loops[(ROWS[2], label)] = module_loop(lib.RawModule, RAW_SOURCE)
        if gpu:
            x = cupy.arange(N, dtype=cupy.float32)
            y = cupy.ones(N, dtype=cupy.float32)
            out = cupy.zeros(N, dtype=cupy.float32)
            loops[(ROWS[3], label)] = construct_call_loop(lib.ElementwiseKernel, EW_ARGS, x, y)
            loops[(ROWS[4], label)] = module_launch_loop(lib.RawModule, RAW_SOURCE, (x, out, np.int32(N)))
    sync = cupy.cuda.Device().synchronize if gpu else nothing
    for key in loops:
        syncs[key] = sync

    results = measure(loops, syncs, opts.calls, opts.repeat)  # type: ignore[arg-type]
    where = kspec.get_device().name if gpu else "host only (no GPU)"
    print(f"\nCuPy's calling patterns, {where}: median of {opts.repeat} x {opts.calls} iterations, us per iteration")
    header = f"{'pattern':64s} {'kspec':>8s} {'CuPy':>8s} {'kspec/CuPy':>11s}"
    print(header)
    print("-" * len(header))
    for row in ROWS:
        ours, theirs = results.get((row, "kspec")), results.get((row, "CuPy"))
        if ours is None:
            continue
        ratio = f"{ours / theirs:.2f}x" if theirs else "-"
        print(f"{row:64s} {ours:8.2f} {theirs if theirs is not None else float('nan'):8.2f} {ratio:>11s}")
    for note in notes:
        print(f"note: {note}")


if __name__ == "__main__":
    main()
