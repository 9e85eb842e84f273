"""Issue 17's layouts, before and after, in one process: the tiled elementwise entry and the two-pass reduction
over reduced axes that do not merge, against the paths they replace and CuPy, as fractions of the copy.

Run on the GPU machine::

    python3 benchmarks/kernels/layouts.py [--log2n 28] [--reps 40]
    python3 benchmarks/kernels/layouts.py --sweep [--reps 20]   # 4-d reductions over axes that do not merge

``--sweep`` times the L2-norm ReductionKernel over axes (1, 3), (0, 2) and (0, 3) of 4-d float32 shapes whose
axes are 16..1024 long (every shape with axes in {16, 64, 256, 1024} and 2^24..2^28 elements, and a seeded
sample of the shapes with axes in {16, 32, ..., 1024}), each against a copy of the same input measured right
before it, and prints every row and the worst and median case per axes tuple. Each of the three (copy,
kspec, CuPy; the copy as the faster of cudaMemcpyAsync and a copy kernel) is timed as the replay of a CUDA graph of ``CALLS`` calls captured on one stream, alternating
between two inputs (so that no call finds its input in the 50 MB L2), per call: the device's time, without
the idle gaps a lone call leaves while the host prepares it (16-64 MB shapes run for 15-40 us, about the host
cost of a reduction call; ``--wall`` times single calls from an idle stream instead, as before).

"Before" is the same kspec with the new plans switched off by their thresholds (``TILE_MIN_EXTENT`` and
``INNER_MIN_ROW`` set out of reach, on fresh kernels), so both rows are measured in the same run on the same
device. Method as benchmarks/kernels/bench.py: CUDA events, median of ``--reps`` calls after warm-up, bytes = inputs
read once + outputs written once, copy = 1 GiB device-to-device cudaMemcpy (read + write).
"""

from __future__ import annotations

import argparse
import functools
import math
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


SPREAD: dict[int, tuple[float, float]] = {}  # id(fn) -> (fastest, slowest) call in ms


def time_ms(cp: Any, fn: Callable[[], object], warmup: int, reps: int, stream: Any = None) -> float:
    for _ in range(warmup):
        fn()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    samples = []
    for _ in range(reps):
        start.record(stream)
        fn()
        stop.record(stream)
        stop.synchronize()
        samples.append(cp.cuda.get_elapsed_time(start, stop))
    SPREAD[id(fn)] = (min(samples), max(samples))
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--log2n", type=int, default=28)
    parser.add_argument("--reps", type=int, default=40)
    parser.add_argument("--sweep", action="store_true", help="the 4-d reduction sweep (see above)")
    parser.add_argument("--wall", action="store_true", help="--sweep: time single calls from an idle stream")
    opts = parser.parse_args()
    import cupy as cp

    if opts.sweep:
        return sweep(cp, opts.reps, opts.wall)

    import kspec
    from kspec.kernels.planning import _plan, _reduction_plan

    n = 1 << opts.log2n
    side = 1 << (opts.log2n // 2)
    a4, b4 = 1 << (opts.log2n // 4 - 1), 1 << (opts.log2n // 2 - opts.log2n // 4 + 1)
    src = cp.random.standard_normal(n // 4 * 4, dtype=cp.float32)
    dst = cp.empty_like(src)
    copy_gbps = 2 * src.nbytes / time_ms(cp, lambda: cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes, 3, 0), 5, opts.reps) / 1e6
    src = dst = None  # free the copy buffers
    props = cp.cuda.runtime.getDeviceProperties(0)
    print(f"{props['name'].decode()}: copy {copy_gbps:.0f} GB/s; ratios are GB/s over copy")

    def sqd() -> Any:
        return kspec.ElementwiseKernel("T x, T y", "T z", "z = (x - y) * (x - y)", "sqd")

    def l2() -> Any:
        return kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2norm")

    csqd = cp.ElementwiseKernel("T x, T y", "T z", "z = (x - y) * (x - y)", "sqd")
    cl2 = cp.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2norm")
    x = cp.random.standard_normal((side, side), dtype=cp.float32)
    y = cp.random.standard_normal((side, side), dtype=cp.float32)
    zc = cp.empty((side, side), cp.float32)
    zf = cp.empty((side, side), cp.float32, order="F")
    x4 = cp.random.standard_normal((a4, b4, a4, b4), dtype=cp.float32)
    ew_bytes = 3 * x.nbytes
    red_bytes = x4.nbytes + a4 * a4 * 4
    cases: list[tuple[str, int, Callable[[Any], Callable[[], object]], Callable[[], object], Callable[[], object]]] = [
        ("(x.T - y)^2", ew_bytes, lambda k: lambda: k(x.T, y, zc), lambda: csqd(x.T, y, zc), lambda: (x.T - y) ** 2),
        ("(x - y)^2 -> z F-order", ew_bytes, lambda k: lambda: k(x, y, zf), lambda: csqd(x, y, zf), lambda: (x - y) ** 2),
        (f"l2norm ({a4},{b4},{a4},{b4}) axes (1,3)", red_bytes, lambda k: lambda: k(x4, axis=(1, 3)),
         lambda: cl2(x4, axis=(1, 3)), lambda: cp.sqrt((x4.astype(cp.float64) ** 2).sum(axis=(1, 3)))),
    ]
    saved = (_plan.TILE_MIN_EXTENT, _reduction_plan.INNER_MIN_ROW)
    print(f"{'case':40s} {'before':>7s} {'after':>7s} {'CuPy':>7s}  check (medians; spread of the new path)")
    for label, nbytes, call, cupy_call, ref in cases:
        make = l2 if "l2norm" in label else sqd
        _plan.TILE_MIN_EXTENT, _reduction_plan.INNER_MIN_ROW = 1 << 60, 1 << 60
        before = call(make())
        before()
        _plan.TILE_MIN_EXTENT, _reduction_plan.INNER_MIN_ROW = saved
        after = call(make())
        zc.fill(cp.nan)
        zf.fill(cp.nan)  # an element the new path does not write fails the check
        out = after()
        want = ref()
        result = out if out is not None else (zc if "x.T" in label else zf)
        err = float(cp.abs(result.astype(cp.float64) - want).max() / cp.abs(want).max())
        ratios = [nbytes / time_ms(cp, fn, 3, opts.reps) / 1e6 / copy_gbps for fn in (before, after, cupy_call)]
        fast, slow = (nbytes / t / 1e6 / copy_gbps for t in SPREAD[id(after)])
        print(f"{label:40s} {ratios[0]:7.3f} {ratios[1]:7.3f} {ratios[2]:7.3f}  rel.err {err:.1e}; "
              f"after: fastest {fast:.3f}, slowest {slow:.3f}")
    return 0


SWEEP_AXES = ((1, 3), (0, 2), (0, 3))


def sweep_shapes() -> list[tuple[int, ...]]:
    """4-d shapes with axes 16..1024 long and 2^24..2^28 elements (large enough that the copy they are
    compared with runs at the memory limit): every one with axes in {16, 64, 256, 1024}, then a seeded sample
    of those with axes in {16, 32, ..., 1024}."""
    import itertools
    import random

    def fits(shape: tuple[int, ...]) -> bool:
        return 1 << 24 <= math.prod(shape) <= 1 << 28

    coarse = [s for s in itertools.product((16, 64, 256, 1024), repeat=4) if fits(s)]
    fine = [s for s in itertools.product([1 << e for e in range(4, 11)], repeat=4) if fits(s) and s not in coarse]
    return coarse + random.Random(2026).sample(fine, 40)


CALLS = 10  # calls per captured graph in the sweep


@functools.cache
def copy_kernel(cp: Any) -> Any:
    """A copy kernel (cupy.copyto of contiguous arrays is a cudaMemcpyAsync)."""
    return cp.ElementwiseKernel("T x", "T y", "y = x", "sweep_copy")


def replay_ms(cp: Any, call: Callable[[Any], object], inputs: tuple[Any, Any], reps: int) -> float:
    """Device ms per call of ``call(x)``: the median replay of a graph of CALLS calls alternating between the
    two ``inputs``, divided by CALLS (kspec calls are captured by CuPy's stream capture like CuPy's own)."""
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        for x in inputs:  # warm: plans made, modules loaded, pool blocks cached outside the capture
            call(x)
        stream.synchronize()
        stream.begin_capture()
        try:
            for i in range(CALLS):
                call(inputs[i % 2])
        finally:
            graph = stream.end_capture()
        return time_ms(cp, lambda: graph.launch(stream), 2, reps, stream) / CALLS


def sweep_shape(cp: Any, l2: Any, cl2: Any, shape: tuple[int, ...], reps: int, wall: bool) -> list[tuple[Any, ...]]:
    """(axes, kspec / copy, CuPy / copy, copy GB/s, kspec's relative error) for each of SWEEP_AXES on ``shape``."""
    inputs = (cp.random.standard_normal(shape, dtype=cp.float32), cp.random.standard_normal(shape, dtype=cp.float32))
    x = inputs[0]
    dst = cp.empty_like(x)

    def timed(call: Callable[[Any], object]) -> float:
        return time_ms(cp, lambda: call(x), 3, reps) if wall else replay_ms(cp, call, inputs, reps)

    # the ceiling: the fastest of cudaMemcpyAsync and a copy kernel, timed as the reductions are, and a lone
    # cudaMemcpyAsync (captured, a 1 GB copy ran at 2.7-2.8 TB/s on an H200, either way; alone, at 4.2)
    def memcpy(src: Any) -> None:
        cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes, 3, cp.cuda.get_current_stream().ptr)

    fastest = min(timed(memcpy), timed(lambda src: copy_kernel(cp)(src, dst)), time_ms(cp, lambda: memcpy(x), 3, reps))
    copy = 2 * x.nbytes / fastest / 1e6
    dst = None  # freed before the reductions run
    rows = []
    for axes in SWEEP_AXES:
        nbytes = x.nbytes + 4 * math.prod(n for a, n in enumerate(shape) if a not in axes)
        got = l2(x, axis=axes)
        want = cp.sqrt((x.astype(cp.float64) ** 2).sum(axis=axes))
        err = float(cp.abs(got - want).max() / cp.abs(want).max())
        mine = nbytes / timed(lambda v, axes=axes: l2(v, axis=axes)) / 1e6 / copy
        theirs = nbytes / timed(lambda v, axes=axes: cl2(v, axis=axes)) / 1e6 / copy
        rows.append((axes, mine, theirs, copy, err))
    return rows


def sweep(cp: Any, reps: int, wall: bool = False) -> int:
    import kspec

    l2 = kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2norm")
    cl2 = cp.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2norm")
    props = cp.cuda.runtime.getDeviceProperties(0)
    how = "single calls from an idle stream" if wall else f"graph replays of {CALLS} calls, two inputs alternating"
    print(f"{props['name'].decode()}: L2 norm over 4-d float32, GB/s over a copy of the same input (read + write); {how}")
    print(f"{'shape':24s} {'axes':7s} {'kspec':>6s} {'CuPy':>6s} {'copy GB/s':>9s}  rel.err")
    ratios: dict[tuple[int, int], list[tuple[float, tuple[int, ...]]]] = {a: [] for a in SWEEP_AXES}
    for shape in sweep_shapes():
        for axes, mine, theirs, copy, err in sweep_shape(cp, l2, cl2, shape, reps, wall):
            ratios[axes].append((mine, shape))
            print(f"{str(shape):24s} {str(axes):7s} {mine:6.3f} {theirs:6.3f} {copy:9.0f}  {err:.1e}", flush=True)
    print()
    for axes, rows in ratios.items():
        rows.sort()
        worst, median = rows[0], rows[len(rows) // 2]
        print(f"axes {axes}: {len(rows)} shapes, worst {worst[0]:.3f} {worst[1]}, median {median[0]:.3f}, best {rows[-1][0]:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
