"""Issue [L]'s sweep: elementwise kernels with operands in different orders, broadcasts along any axis, and
reductions over any set of axes, kspec against CuPy and PyTorch in the same run, as fractions of a copy of the same
bytes.

    python3 benchmarks/kernels/layout_sweep.py [--classes permute,narrow,broadcast,reduce,middle,pieces,fused]
                                       [--dtypes float32,float16,float64] [--cases 12] [--reps 20] [--seed N] [--no-torch]
    python3 benchmarks/kernels/layout_sweep.py --list      # the cases only (no GPU needed)

Classes (3-d and 4-d shapes with dims from 8 to 2048 and 2^24-2^27 elements, drawn afresh each run unless ``--seed``
is given (the seed is printed, to repeat a run); ``--cases`` per class, dtype and rank):

* ``permute``: ``z = (x - y)^2`` where ``x`` is a permutation of ``y``'s layout (``x = base.transpose(p)``, every
  non-identity permutation ``p`` drawn in turn); bytes: x, y, z;
* ``narrow``: the same where the output's innermost axis is short (2, 3, 4, 6 or 8: NCHW -> NHWC of a few
  channels) and ``x`` is stored with another axis innermost (the permutations that move the last axis);
* ``broadcast``: the same with ``y`` of extent 1 along one axis (each axis in turn); bytes: x, the small y, z;
* ``reduce``: the L2 norm over a non-empty proper subset of the axes (each subset in turn); bytes: x and the
  output;
* ``middle`` (4-d only): the same norm over the axes models reduce — per-channel statistics of NCHW, over (0, 2,
  3) and over 1, and of NHWC, over (0, 1, 2) — in turn;
* ``pieces``: the same norm where the innermost axis is short (2, 3, 4, 6 or 8) and reduced with outer axes, kept
  axes between them — pairs, triples or small vectors per element, reduced per element of a kept axis: over (0, 2)
  of 3-d shapes, over (0, 1, 3), (0, 3) and (1, 3) of 4-d ones in turn;
* ``fused``: ``kspec.fuse`` of ``(x - y)**2`` on the permuted operands (against ``cupy.fuse``).

PyTorch (where it is installed; ``--no-torch`` leaves it out) runs on the same arrays (DLPack, no copy) on CuPy's
stream, writing into a given output: ``torch.linalg.vector_norm`` over the same axes for the reductions,
``torch.sub(x, y, out=z)`` for the permuted, narrow and broadcast rows (the same bytes as ``(x - y)^2``), nothing for
``fused``. Each timing is the median replay of a CUDA graph of calls alternating two inputs
(benchmarks/kernels/layouts.py's ``replay_ms``), over the copy of the same input timed the same way just before (the
ceiling, measured in the same run). The summary gives, per class and dtype, each library's worst and median
fraction of the copy, and every row where kspec is more than 3% slower than CuPy or PyTorch.
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


MIDDLE_AXES = ((0, 2, 3), (1,), (0, 1, 2))  # NCHW per channel, NCHW per pixel of a batch, NHWC per channel
PIECE_DIMS = (2, 3, 4, 6, 8)  # the pieces and narrow classes' innermost extents
PIECE_AXES = {3: ((0, 2),), 4: ((0, 1, 3), (0, 3), (1, 3))}
REDUCTIONS = ("reduce", "middle", "pieces")
NOISE = 0.03  # a row counts as slower past this


class Case(NamedTuple):
    kind: str  # permute, narrow, broadcast, reduce, middle, pieces, fused
    dtype: str
    shape: tuple[int, ...]  # the output's (elementwise) or the input's (reduce) shape
    detail: tuple[int, ...]  # the permutation, the broadcast axis, or the reduced axes

    def label(self) -> str:
        what = {"permute": "perm", "narrow": "perm", "fused": "perm", "broadcast": "axis", "reduce": "axes", "middle": "axes",
                "pieces": "axes"}[self.kind]
        return f"{self.kind:9s} {self.dtype:8s} {str(self.shape):26s} {what} {self.detail}"


def shapes(rng: random.Random, rank: int, count: int, last: tuple[int, ...] = DIMS) -> list[tuple[int, ...]]:
    """``count`` shapes of ``rank`` dims from DIMS (the innermost from ``last``) of SIZES elements."""
    fitting = [s + (n,) for s in itertools.product(DIMS, repeat=rank - 1) for n in last
               if SIZES[0] <= math.prod(s) * n <= SIZES[1]]
    return rng.sample(fitting, min(count, len(fitting)))


def cases(kinds: list[str], dtypes: list[str], count: int, seed: int) -> Iterator[Case]:
    rng = random.Random(seed)
    for kind, dtype, rank in itertools.product(kinds, dtypes, (3, 4)):
        choices: list[tuple[int, ...]]
        if kind == "middle":
            if rank != 4:
                continue
            choices = list(MIDDLE_AXES)
        elif kind == "pieces":
            choices = list(PIECE_AXES[rank])
        elif kind in ("permute", "fused"):
            choices = [p for p in itertools.permutations(range(rank)) if p != tuple(range(rank))]
        elif kind == "narrow":  # x stored with another axis innermost than the output's short last one
            choices = [p for p in itertools.permutations(range(rank)) if p[-1] != rank - 1]
        elif kind == "broadcast":
            choices = [(a,) for a in range(rank)]
        else:  # every non-empty proper subset of the axes
            choices = [c for k in range(1, rank) for c in itertools.combinations(range(rank), k)]
        for k, shape in enumerate(shapes(rng, rank, count, PIECE_DIMS if kind in ("pieces", "narrow") else DIMS)):
            yield Case(kind, dtype, shape, choices[k % len(choices)])


class Result(NamedTuple):
    case: Case
    kspec: float  # fraction of the copy
    cupy: float
    error: float  # kspec's largest relative difference from CuPy's result
    torch: float | None = None  # PyTorch's fraction of the copy (None: not run)


def run_case(cp: Any, case: Case, kernels: dict[str, Any], reps: int, torch: Any = None) -> Result:
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

    if case.kind in REDUCTIONS:
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
        if case.kind in ("permute", "narrow", "fused"):  # x's memory in another order: a transposed view of a C array
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
        (lambda f: lambda p: f(p[0])) if case.kind in REDUCTIONS else (lambda f: f))  # fmt: skip
    got, want = unpack(ours)(pairs[0]), unpack(theirs)(pairs[0])
    scale = float(cp.abs(want.astype(cp.float64)).max()) or 1.0
    error = float(cp.abs(got.astype(cp.float64) - want.astype(cp.float64)).max()) / scale
    if error != error:  # say whose result holds the NaN
        print(f"  NaN: kspec {int(cp.isnan(got).sum())}, CuPy {int(cp.isnan(want).sum())}, non-finite inputs "
              f"{[int((~cp.isfinite(a)).sum()) for a in pairs[0]]}", flush=True)
    fraction = [nbytes / replay_ms(cp, unpack(f), args, reps) / copy_bw for f in (ours, theirs)]
    torch_fraction = None
    if torch is not None and case.kind != "fused":
        call = torch_contender(cp, torch, case, pairs, want)
        try:
            torch_ms = replay_ms(cp, call, args, reps)
        except Exception as exc:  # noqa: BLE001  (a PyTorch op that will not be captured: timed call by call)
            from layouts import CALLS, time_ms

            print(f"  PyTorch's call was not captured ({type(exc).__name__}: {exc}); timed by events", flush=True)
            torch_ms = time_ms(cp, lambda: [call(args[i % 2]) for i in range(CALLS)], 2, reps) / CALLS
        torch_fraction = nbytes / torch_ms / copy_bw
    return Result(case, fraction[0], fraction[1], error, torch_fraction)


def torch_contender(cp: Any, torch: Any, case: Case, pairs: list[tuple[Any, ...]], want: Any) -> Callable[[Any], None]:
    """PyTorch's call for ``case`` on the CuPy arrays of ``pairs`` (shared through DLPack), run on CuPy's current
    stream (so CuPy's stream capture records it) into an output made once (no allocation inside a capture); its
    result is compared with CuPy's ``want`` first (a difference is printed)."""
    views = {id(a): torch.from_dlpack(a) for pair in pairs for a in pair}
    if case.kind in REDUCTIONS:
        out = torch.empty(want.shape, dtype=views[id(pairs[0][0])].dtype, device=views[id(pairs[0][0])].device)

        def op(pair: tuple[Any, ...]) -> None:
            torch.linalg.vector_norm(views[id(pair[0])], ord=2, dim=case.detail, out=out)

        check = want
    else:
        out = torch.empty(case.shape, dtype=views[id(pairs[0][0])].dtype, device=views[id(pairs[0][0])].device)

        def op(pair: tuple[Any, ...]) -> None:
            torch.sub(views[id(pair[0])], views[id(pair[1])], out=out)

        check = pairs[0][0] - pairs[0][1]

    def call(pair: tuple[Any, ...]) -> None:
        ptr = cp.cuda.get_current_stream().ptr
        if ptr == 0:  # CuPy's null stream is the legacy default stream, PyTorch's default too
            op(pair)
            return
        with torch.cuda.stream(torch.cuda.ExternalStream(ptr)):
            op(pair)

    op(pairs[0])  # on PyTorch's own stream, outside any capture
    torch.cuda.synchronize()
    got = cp.from_dlpack(out)
    scale = float(cp.abs(check.astype(cp.float64)).max()) or 1.0
    error = float(cp.abs(got.astype(cp.float64) - check.astype(cp.float64)).max()) / scale
    if not error <= 1e-2:  # said, not fatal: CuPy's kernel sums float16 in float16, PyTorch in float32
        print(f"  PyTorch's result differs from CuPy's by {error:.2e} (relative)", flush=True)
    return call


def squared_difference(x: Any, y: Any) -> Any:
    return (x - y) * (x - y)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", default="permute,narrow,broadcast,reduce,middle,pieces,fused")
    parser.add_argument("--dtypes", default="float32,float16,float64")
    parser.add_argument("--cases", type=int, default=12, help="cases per class, dtype and rank")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--seed", type=int, default=None, help="default: a fresh one, printed")
    parser.add_argument("--no-torch", action="store_true", help="leave PyTorch's column out")
    parser.add_argument("--list", action="store_true", help="print the cases and exit (no GPU needed)")
    opts = parser.parse_args()
    seed = opts.seed if opts.seed is not None else random.SystemRandom().randrange(2**31)
    print(f"seed {seed} (--seed {seed} repeats these cases)")
    chosen = list(cases(opts.classes.split(","), opts.dtypes.split(","), opts.cases, seed))
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
    torch = None
    if not opts.no_torch:
        try:
            import torch
        except ImportError:
            print("PyTorch is not installed: no PyTorch column")
    props = cp.cuda.runtime.getDeviceProperties(0)
    names = "kspec, CuPy" + (", PyTorch" if torch is not None else "")
    print(f"{props['name'].decode()}: fractions of a copy of the same bytes (graph replays); {names}")
    results = []
    for case in chosen:
        result = run_case(cp, case, kernels, opts.reps, torch)
        results.append(result)
        theirs = f" {result.torch:6.3f}" if result.torch is not None else ""
        print(f"{case.label()}  {result.kspec:6.3f} {result.cupy:6.3f}{theirs}  err {result.error:.1e}", flush=True)
    print()
    for kind, dtype in itertools.product(opts.classes.split(","), opts.dtypes.split(",")):
        rows = [r for r in results if r.case.kind == kind and r.case.dtype == dtype]
        if rows:
            print(f"{kind:9s} {dtype:8s} {len(rows):3d} cases: " + "; ".join(
                f"{name} worst {min(values):.3f} median {statistics.median(values):.3f}"
                for name, values in (("kspec", [r.kspec for r in rows]), ("CuPy", [r.cupy for r in rows]),
                                     ("PyTorch", [r.torch for r in rows if r.torch is not None])) if values))
    for name, other in (("CuPy", lambda r: r.cupy), ("PyTorch", lambda r: r.torch)):
        slower = [r for r in results if other(r) is not None and r.kspec < other(r) * (1 - NOISE)]
        print(f"\nrows where kspec is slower than {name} (past {NOISE:.0%}): {len(slower)}")
        for r in slower:
            print(f"  {r.case.label()}  {r.kspec:.3f} < {other(r):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
