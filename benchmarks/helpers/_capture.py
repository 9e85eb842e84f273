"""CUDA-graph rows of benchmarks/kernels/bench.py (``--only capture``): 100 small calls (4096 float32 elements each),
eager and replayed from a graph, for an elementwise kernel (output given), a reduction (output given) and a
fused function (allocating).

Variants of each row, all on CuPy arrays and one non-blocking CuPy stream:

* ``kspec eager``: the 100 kspec calls from Python;
* ``kspec.capture``: the 100 kspec calls recorded by ``kspec.capture``, replayed by ``graph.launch()``;
* ``CuPy capture of kspec``: the same calls recorded by CuPy's ``Stream.begin_capture`` / ``end_capture``;
* ``CuPy eager`` and ``CuPy capture``: CuPy's own ``ElementwiseKernel`` / ``ReductionKernel`` / ``cupy.fuse``.

Two numbers per variant, medians of ``REPS`` runs after ``WARMUP``: host microseconds per kernel (the wall
time of the Python loop, or of the one ``launch()`` call, over 100) and wall microseconds per kernel (CUDA
events recorded on the stream around it, over 100). A variant that fails (a library missing, an API that
differs) becomes a row with its error, never a stopped run.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

CALLS = 100
N = 4096
REPS = 20
WARMUP = 3
KINDS = ("elementwise", "reduction", "fuse")
VARIANTS = ("kspec eager", "kspec.capture", "CuPy capture of kspec", "CuPy eager", "CuPy capture")
ROWS = tuple(f"capture: {kind}" for kind in KINDS)


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) < 200 else text[:197] + "..."


def _calls(lib: str, kind: str) -> Callable[[Any, Any, Any], Callable[[], None]]:
    """A maker of one call of ``kind`` by library ``lib`` ('kspec' or 'cupy') on (x, y, out)."""
    if lib == "kspec":
        import kspec as mod
    else:
        import cupy as mod  # type: ignore[no-redef]
    if kind == "elementwise":
        k = mod.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = x * 2 + y", "bench_capture_axpy")
        return lambda x, y, out: lambda: k(x, y, out)
    if kind == "reduction":
        r = mod.ReductionKernel("float32 x", "float32 y", "x", "a + b", "y = a", "0", "bench_capture_sum")
        return lambda x, y, out: lambda: r(x, out=out)

    def fma_one(a: Any, b: Any) -> Any:  # a def, not a lambda: cupy.fuse names its kernel after the function
        return a * b + 1

    f = mod.fuse(fma_one)
    return lambda x, y, out: lambda: f(x, y)


def _loop(call: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        for _ in range(CALLS):
            call()

    return run


def _time(run: Callable[[], None], stream: Any) -> tuple[float, float]:
    """(host us, wall us) per kernel: medians over REPS runs of ``run`` (CALLS kernels each)."""
    import cupy as cp

    host, wall = [], []
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    with stream:  # eager calls launch on CuPy's current stream: this one, as the graphs do
        for _ in range(WARMUP):
            run()
        stream.synchronize()
        for _ in range(REPS):
            stream.synchronize()
            start.record(stream)
            t0 = time.perf_counter()
            run()
            t1 = time.perf_counter()
            stop.record(stream)
            stop.synchronize()
            host.append((t1 - t0) / CALLS * 1e6)
            wall.append(cp.cuda.get_elapsed_time(start, stop) * 1e3 / CALLS)
    return statistics.median(host), statistics.median(wall)


def _variant(name: str, kind: str, stream: Any, x: Any, y: Any, out: Any) -> tuple[Callable[[], None], list[Any]]:
    """The function one timed run calls, and what must stay alive meanwhile (graphs)."""
    lib = "cupy" if name.startswith("CuPy") and "of kspec" not in name else "kspec"
    call = _calls(lib, kind)(x, y, out)
    with stream:
        call()  # warm: compiled and loaded before any capture
        stream.synchronize()
        if name.endswith("eager"):
            return _loop(call), []
        if name == "kspec.capture":
            import kspec

            with kspec.capture(stream) as graph:
                _loop(call)()
            return graph.launch, [graph]
        stream.begin_capture()
        try:
            _loop(call)()
        finally:
            cupy_graph = stream.end_capture()
    return (lambda: cupy_graph.launch(stream)), [cupy_graph]


def run_capture(selects: Callable[[str], bool]) -> dict[str, Any]:
    """The capture rows ``selects`` keeps: {"rows": [{kind, variant, host_us, wall_us, error}], ...}."""
    kinds = [kind for kind, row in zip(KINDS, ROWS) if selects(row)]
    out_rows: list[dict[str, Any]] = []
    if not kinds:
        return {"rows": out_rows, "calls": CALLS, "elements": N}
    try:
        import cupy as cp

        stream = cp.cuda.Stream(non_blocking=True)
        x = cp.arange(N, dtype=np.float32) / N
        y = cp.ones(N, dtype=np.float32)
    except Exception as exc:
        return {"rows": [{"kind": k, "variant": v, "host_us": None, "wall_us": None, "error": _short(exc)}
                         for k in kinds for v in VARIANTS], "calls": CALLS, "elements": N}  # fmt: skip
    for kind in kinds:
        for name in VARIANTS:
            row: dict[str, Any] = {"kind": kind, "variant": name, "host_us": None, "wall_us": None, "error": None}
            try:
                out = cp.empty((), np.float32) if kind == "reduction" else cp.empty(N, np.float32)
                run, keep = _variant(name, kind, stream, x, y, out)
                row["host_us"], row["wall_us"] = _time(run, stream)
                del keep
            except Exception as exc:
                row["error"] = _short(exc)
            out_rows.append(row)
    return {"rows": out_rows, "calls": CALLS, "elements": N}


def print_capture(result: dict[str, Any]) -> None:
    if not result["rows"]:
        return
    print(f"\nCUDA graphs: {result['calls']} calls of {result['elements']} float32 elements, "
          "microseconds per kernel (median; host = Python's time for the loop or the launch() call)")  # fmt: skip
    print(f"{'row':<12} {'variant':<24} {'host us':>9} {'wall us':>9}")
    for row in result["rows"]:
        if row["error"]:
            print(f"{row['kind']:<12} {row['variant']:<24} ERROR: {row['error']}")
        else:
            print(f"{row['kind']:<12} {row['variant']:<24} {row['host_us']:>9.2f} {row['wall_us']:>9.2f}")
