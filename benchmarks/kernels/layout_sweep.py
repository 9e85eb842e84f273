"""Issue [L]'s sweep: elementwise kernels with operands in different orders, broadcasts along any axis, and
reductions over any set of axes, kspec against CuPy in the same run, as fractions of a copy of the same bytes.

    python3 benchmarks/kernels/layout_sweep.py [--classes permute,broadcast,reduce,fused] [--dtypes float32,float16,float64]
                                       [--cases 12] [--reps 20] [--seed 2026]
    python3 benchmarks/kernels/layout_sweep.py --list      # the cases only (no GPU needed)

Classes (3-d and 4-d shapes with dims from 8 to 2048 and 2^24-2^27 elements, drawn with ``--seed``; ``--cases``
per class, dtype and rank):

* ``permute``: ``z = (x - y)^2`` where ``x`` is a permutation of ``y``'s layout (``x = base.transpose(p)``, every
  non-identity permutation ``p`` drawn in turn); bytes: x, y, z;
* ``broadcast``: the same with ``y`` of extent 1 along one axis (each axis in turn); bytes: x, the small y, z;
* ``reduce``: the L2 norm over a non-empty proper subset of the axes (each subset in turn); bytes: x and the
  output;
* ``fused``: ``kspec.fuse`` of ``(x - y)**2`` on the permuted operands (against ``cupy.fuse``).

Each timing is the median replay of a CUDA graph of calls alternating two inputs (benchmarks/kernels/layouts.py's
``replay_ms``), over the copy of the same input timed the same way just before (the ceiling, measured in the same
run). The summary gives, per class and dtype, kspec's and CuPy's worst and median fraction of the copy, and every
row where kspec is slower than CuPy.
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import statistics
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

DIMS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)
SIZES = (1 << 24, 1 << 27)  # elements: large enough that the copy runs at the memory limit


class Case(NamedTuple):
    kind: str  # permute, broadcast, reduce, fused
    dtype: str
    shape: tuple[int, ...]  # the output's (elementwise) or the input's (reduce) shape
    detail: tuple[int, ...]  # the permutation, the broadcast axis, or the reduced axes

    def label(self) -> str:
        what = {"permute": "perm", "fused": "perm", "broadcast": "axis", "reduce": "axes"}[self.kind]
        return f"{self.kind:9s} {self.dtype:8s} {str(self.shape):26s} {what} {self.detail}"


def shapes(rng: random.Random, rank: int, count: int) -> list[tuple[int, ...]]:
    fitting = [s for s in itertools.product(DIMS, repeat=rank) if SIZES[0] <= math.prod(s) <= SIZES[1]]
    return rng.sample(fitting, min(count, len(fitting)))


def cases(kinds: list[str], dtypes: list[str], count: int, seed: int) -> Iterator[Case]:
    rng = random.Random(seed)
    for kind, dtype, rank in itertools.product(kinds, dtypes, (3, 4)):
        choices: list[tuple[int, ...]]
        if kind in ("permute", "fused"):
            choices = [p for p in itertools.permutations(range(rank)) if p != tuple(range(rank))]
        elif kind == "broadcast":
            choices = [(a,) for a in range(rank)]
        else:  # every non-empty proper subset of the axes
            choices = [c for k in range(1, rank) for c in itertools.combinations(range(rank), k)]
        for k, shape in enumerate(shapes(rng, rank, count)):
            yield Case(kind, dtype, shape, choices[k % len(choices)])


class Result(NamedTuple):
    case: Case
    kspec: float  # fraction of the copy
    cupy: float
    error: float  # kspec's largest relative difference from CuPy's result


def run_case(cp: Any, case: Case, kernels: dict[str, Any], reps: int) -> Result:
    from layouts import copy_kernel, replay_ms

    dtype = cp.dtype(case.dtype)

    def array(shape: tuple[int, ...], seed: int) -> Any:
        # uniform in [-1, 1) from cuRAND (CuPy's legacy RandomState): arrays of 2^25-2^27 elements drawn with
        # cupy.random.default_rng(seed).random(...) held non-finite values in earlier runs (v24: 1,399,381 of
        # 2^27, the same count in three cases), which made the error column NaN; checked here, as drawn
        drawn = cp.random.RandomState(seed).uniform(-1.0, 1.0, shape, dtype=cp.float32).astype(dtype)
        if not bool(cp.isfinite(drawn).all()):
            raise RuntimeError(f"non-finite values drawn for an input of shape {shape} (seed {seed})")
        return drawn

    if case.kind == "reduce":
        pairs = [(array(case.shape, s),) for s in (1, 2)]
        out_elems = math.prod(n for a, n in enumerate(case.shape) if a not in case.detail)
        nbytes = math.prod(case.shape) * dtype.itemsize + out_elems * dtype.itemsize

        def ours(x: Any) -> Any:
            return kernels["l2"](x, axis=case.detail)

        def theirs(x: Any) -> Any:
            return kernels["cl2"](x, axis=case.detail)
    else:
        other = (case.shape if case.kind != "broadcast"
                 else tuple(1 if a == case.detail[0] else n for a, n in enumerate(case.shape)))  # fmt: skip
        if case.kind in ("permute", "fused"):  # x's memory in another order: a transposed view of a C array
            inverse = tuple(sorted(range(len(case.detail)), key=lambda a: case.detail[a]))
            stored = tuple(case.shape[a] for a in inverse)
            pairs = [(array(stored, s).transpose(case.detail), array(other, s + 10)) for s in (1, 2)]
        else:
            pairs = [(array(case.shape, s), array(other, s + 10)) for s in (1, 2)]
        nbytes = (2 * math.prod(case.shape) + math.prod(other)) * dtype.itemsize
        mine, peer = ("fsqd", "cfsqd") if case.kind == "fused" else ("sqd", "csqd")

        def ours(x: Any) -> Any:
            return kernels[mine](*x)

        def theirs(x: Any) -> Any:
            return kernels[peer](*x)

    first = pairs[0][0]
    src = cp.ascontiguousarray(first)
    dst = cp.empty_like(src)
    sources = (src, cp.ascontiguousarray(pairs[1][0]))

    def memcpy(v: Any) -> None:
        cp.cuda.runtime.memcpyAsync(dst.data.ptr, v.data.ptr, v.nbytes, 3, cp.cuda.get_current_stream().ptr)

    # the ceiling: the faster of cudaMemcpyAsync and CuPy's copy kernel (one element per thread: for 2-byte
    # types it runs at half the memory's speed, which made kspec's vector paths read as 3x "a copy")
    copy_ms = min(replay_ms(cp, lambda v: copy_kernel(cp)(v, dst), sources, reps), replay_ms(cp, memcpy, sources, reps))
    copy_bw = 2 * src.nbytes / copy_ms
    src = dst = None
    args = (pairs[0], pairs[1])
    unpack: Callable[[Callable[[Any], Any]], Callable[[Any], Any]] = (
        (lambda f: lambda p: f(p[0])) if case.kind == "reduce" else (lambda f: f))  # fmt: skip
    got, want = unpack(ours)(pairs[0]), unpack(theirs)(pairs[0])
    scale = float(cp.abs(want.astype(cp.float64)).max()) or 1.0
    error = float(cp.abs(got.astype(cp.float64) - want.astype(cp.float64)).max()) / scale
    if error != error:  # say whose result holds the NaN
        print(f"  NaN: kspec {int(cp.isnan(got).sum())}, CuPy {int(cp.isnan(want).sum())}, non-finite inputs "
              f"{[int((~cp.isfinite(a)).sum()) for a in pairs[0]]}", flush=True)
    fraction = [nbytes / replay_ms(cp, unpack(f), args, reps) / copy_bw for f in (ours, theirs)]
    return Result(case, fraction[0], fraction[1], error)


def squared_difference(x: Any, y: Any) -> Any:
    return (x - y) * (x - y)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", default="permute,broadcast,reduce,fused")
    parser.add_argument("--dtypes", default="float32,float16,float64")
    parser.add_argument("--cases", type=int, default=12, help="cases per class, dtype and rank")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--list", action="store_true", help="print the cases and exit (no GPU needed)")
    opts = parser.parse_args()
    chosen = list(cases(opts.classes.split(","), opts.dtypes.split(","), opts.cases, opts.seed))
    if opts.list:
        print("\n".join(c.label() for c in chosen))
        print(f"{len(chosen)} cases")
        return 0
    import cupy as cp

    import kspec

    sqd = "z = (x - y) * (x - y)"
    kernels = {
        "sqd": kspec.ElementwiseKernel("T x, T y", "T z", sqd, "sweep_sqd"),
        "csqd": cp.ElementwiseKernel("T x, T y", "T z", sqd, "sweep_sqd"),
        "l2": kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "sweep_l2"),
        "cl2": cp.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "sweep_l2"),
        "fsqd": kspec.fuse(squared_difference),
        "cfsqd": cp.fuse(squared_difference),  # a named function: CuPy names the kernel after it (<lambda> fails)
    }
    props = cp.cuda.runtime.getDeviceProperties(0)
    print(f"{props['name'].decode()}: fractions of a copy of the same bytes (graph replays); kspec, CuPy")
    results = []
    for case in chosen:
        result = run_case(cp, case, kernels, opts.reps)
        results.append(result)
        print(f"{case.label()}  {result.kspec:6.3f} {result.cupy:6.3f}  err {result.error:.1e}", flush=True)
    print()
    for kind, dtype in itertools.product(opts.classes.split(","), opts.dtypes.split(",")):
        rows = [r for r in results if r.case.kind == kind and r.case.dtype == dtype]
        if rows:
            ours, theirs = sorted(r.kspec for r in rows), sorted(r.cupy for r in rows)
            print(f"{kind:9s} {dtype:8s} {len(rows):3d} cases: kspec worst {ours[0]:.3f} median "
                  f"{statistics.median(ours):.3f}; CuPy worst {theirs[0]:.3f} median {statistics.median(theirs):.3f}")
    slower = [r for r in results if r.kspec < r.cupy]
    print(f"\nrows where kspec is slower than CuPy: {len(slower)}")
    for r in slower:
        print(f"  {r.case.label()}  {r.kspec:.3f} < {r.cupy:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
