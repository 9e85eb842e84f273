"""CuPy's own cupyx.scipy functions on realistic sizes, with CuPy's kernels kspec's (``kspec.cupy.enable()``, the
switch a program uses) against CuPy itself, in the same run.

    python3 benchmarks/clients/cupyx_scipy.py [--procs 3] [--reps 20] [--only NAME,...] [--cold] [--captured BUILD]
                                      [--cupy-cold] [--profile DIR] [--paired N [--blocks 8]]
    python3 benchmarks/clients/cupyx_scipy.py --capture SPECS_DIR     # record the kernels the functions build (kspec capture)

``--cold``: every process starts with empty caches (kspec's and CuPy's). ``--captured BUILD`` adds a third mode,
*served*: kspec's constructors, served from a ``kspec build`` of captured specs (``--capture``, then ``kspec build
SPECS_DIR -o BUILD``) with kspec's NVRTC blocked, ``KSPEC_COMPILE=never`` and an empty kspec cache, CuPy's own
cache as the machine has it (its ufuncs and routines are CuPy's): the first call of a deployed program.
``--cupy-cold`` adds one CuPy process with an empty CuPy cache (CuPy's first call on a fresh machine);
without ``--cold`` one unrecorded process of each of kspec and CuPy runs first, so that the other columns' first
calls are warm ones (caches filled). ``--profile DIR`` writes a cProfile summary of each first call to DIR.

Each mode runs in fresh processes, alternating kspec, cupy, kspec, cupy, ... (``--procs`` of each), so that
neither takes all the warm machine state. In each process every function runs once (compiling or loading its
kernels: the first-call column), then ``--reps`` timed calls over rotating inputs drawn fresh per process: device
time from CUDA events around the call, host time from the wall clock around issuing it (before the end event is
waited for). The table gives medians over all reps of all processes and kspec / CuPy ratios (below 1: kspec faster).

``--paired N`` times the warm calls instead in N more processes that each run both modes, switching between them
(``kspec.cupy.enable()`` / ``disable()``, each of which makes CuPy's routines build their kernels anew) every few
calls: ``--blocks`` blocks of ``--reps`` calls a mode and function, after two untimed calls a block. These hosts'
speed drifts between processes by more than the modes differ (one function's host time moved 1.8x between two
processes of the same mode, `v74`), so the warm columns then come from calls made side by side, and the ratio column
is the median of the processes' own ratios, with their range.
With ``--captured`` a last column gives the served first call minus CuPy's first call of the same round, the
median over rounds: on a host whose speed drifts between processes (an H100 host's first calls of one function
spread over 30-50%), the difference within a round is what the two ways of serving a first call differ by.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable

from paired_modes import error_text, paired_child, timed_calls, warm_columns


START_UP = "start-up"  # the results' entry of the process's start: seconds of `import cupy` and of enabling the switch


def cases(cp: Any) -> dict[str, tuple[Callable[[Any], Any], Callable[[int], Any]]]:
    """name -> (function of one input set, maker of input set k)."""
    import cupyx.scipy.interpolate as si
    import cupyx.scipy.ndimage as nd
    import cupyx.scipy.signal as sg

    def rnd(seed: int, *shape: int, dtype: Any = "float32") -> Any:
        return cp.random.default_rng(seed).standard_normal(shape, dtype="float64").astype(dtype)

    grid = tuple(cp.linspace(0, 1, 64) for _ in range(3))

    def rgi_input(k: int) -> Any:
        values = rnd(k, 64, 64, 64, dtype="float64")
        pts = cp.random.default_rng(100 + k).random((1_000_000, 3))
        return values, pts

    def spline_input(k: int) -> Any:
        # 2,000 points: CuPy 14's make_interp_spline takes ~55 s at 100k on an H100 (both modes: its solver)
        x = cp.linspace(0, 10, 2_000)
        return x, rnd(k, 2_000, dtype="float64")

    return {
        "ndimage.uniform_filter 2048^2 f32 size 5": (lambda a: nd.uniform_filter(a, size=5), lambda k: rnd(k, 2048, 2048)),
        "ndimage.gaussian_filter 2048^2 f32 sigma 3": (lambda a: nd.gaussian_filter(a, 3.0), lambda k: rnd(k, 2048, 2048)),
        "ndimage.zoom 1024^2 f32 x2 order 3": (lambda a: nd.zoom(a, 2, order=3), lambda k: rnd(k, 1024, 1024)),
        "ndimage.map_coordinates 1024^2, 1M points": (
            lambda a: nd.map_coordinates(a[0], a[1], order=1),
            lambda k: (rnd(k, 1024, 1024), cp.random.default_rng(50 + k).random((2, 1_000_000), dtype="float32") * 1023)),
        "ndimage.label 2048^2": (lambda a: nd.label(a), lambda k: rnd(k, 2048, 2048) > 0.5),
        "signal.convolve 1M * 1001 direct": (
            lambda a: sg.convolve(a[0], a[1], method="direct"), lambda k: (rnd(k, 1_000_000), rnd(k + 7, 1001))),
        "signal.lfilter order 4, 1M": (
            lambda a: sg.lfilter(cp.asarray([0.2, 0.3, 0.1, 0.05, 0.01]), cp.asarray([1.0, -0.5, 0.2, -0.1, 0.05]), a),
            lambda k: rnd(k, 1_000_000, dtype="float64")),
        "signal.resample_poly 1M up 3 down 2": (lambda a: sg.resample_poly(a, 3, 2), lambda k: rnd(k, 1_000_000)),
        "interpolate.RegularGridInterpolator 64^3, 1M points": (
            lambda a: si.RegularGridInterpolator(grid, a[0])(a[1]), rgi_input),
        "interpolate.make_interp_spline 2k": (lambda a: si.make_interp_spline(a[0], a[1], k=3), spline_input),
    }


def child(mode: str, reps: int, only: list[str]) -> None:
    if mode == "served":
        sys.modules["cuda.bindings.nvrtc"] = None  # type: ignore[assignment]  # kspec's NVRTC blocked
    t0 = time.perf_counter()
    import cupy as cp

    start_up = {"import cupy": time.perf_counter() - t0}
    if mode in ("kspec", "served"):
        if os.environ.get("KSPEC_CAPTURE_DIR"):
            from kspec.capturer import record_from_environment

            record_from_environment()
        t0 = time.perf_counter()
        import kspec.cupy  # the switch a program uses: CuPy's constructors, cupy.fuse and cupyx.jit are kspec's

        kspec.cupy.enable()
        start_up["kspec.cupy.enable()"] = time.perf_counter() - t0
    results: dict[str, Any] = {START_UP: start_up}
    for name, (fn, make) in cases(cp).items():
        if only and not any(o in name for o in only):
            continue
        try:
            inputs = [make(k) for k in range(3)]
            cp.cuda.Device().synchronize()
            first = _first_call(mode, name, lambda fn=fn, a=inputs[0]: (fn(a), cp.cuda.Device().synchronize()))
            for k in range(3):  # warm: every input set once
                fn(inputs[k])
            device, host = timed_calls(cp, fn, inputs, reps)
            results[name] = {"first": first, "device": device, "host": host}
        except Exception as exc:  # noqa: BLE001 (the table says which failed, and why)
            results[name] = {"error": error_text(exc)}
    print(json.dumps(results))


def _first_call(mode: str, name: str, call: Callable[[], Any]) -> float:
    """Seconds of the first call; under ``KSPEC_BENCH_PROFILE`` (a directory) also its profile, as text."""
    where = os.environ.get("KSPEC_BENCH_PROFILE")
    if not where:
        t0 = time.perf_counter()
        call()
        return time.perf_counter() - t0
    import cProfile
    import io
    import pstats

    profile = cProfile.Profile()
    t0 = time.perf_counter()
    profile.runcall(call)
    seconds = time.perf_counter() - t0
    text = io.StringIO()
    stats = pstats.Stats(profile, stream=text)
    stats.sort_stats("cumulative").print_stats(70)
    stats.sort_stats("tottime").print_stats(25)
    slug = "".join(c if c.isalnum() else "_" for c in name.split(" ")[0])
    with open(os.path.join(where, f"{mode}-{slug}-{os.getpid()}.txt"), "w") as out:
        out.write(f"{name}: first call {seconds * 1e3:.1f} ms (profiled)\n{text.getvalue()}")
    stats.dump_stats(os.path.join(where, f"{mode}-{slug}-{os.getpid()}.prof"))  # for pstats at full precision
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", type=int, default=3)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--only", default="")
    parser.add_argument("--child", choices=("kspec", "cupy", "served", "cupy-cold", "paired"))
    parser.add_argument("--cold", action="store_true", help="empty kspec and CuPy caches in every process")
    parser.add_argument("--captured", default="", help="a kspec build of captured specs: adds the served mode")
    parser.add_argument("--capture", default="", help="record the functions' kernels as spec files in this directory")
    parser.add_argument("--cupy-cold", action="store_true", help="add CuPy's first calls with an empty CuPy cache")
    parser.add_argument("--profile", default="", help="write a profile of every first call to this directory")
    parser.add_argument("--log", default="", help="append each process's raw results (JSON lines) to this file")
    parser.add_argument("--paired", type=int, default=0, help="time warm calls in this many processes of both modes")
    parser.add_argument("--blocks", type=int, default=8, help="--paired: blocks of --reps calls a function, modes alternating")
    parser.add_argument("--kspec-first", type=int, choices=(0, 1), default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    only = [o for o in args.only.split(",") if o]
    if args.child == "paired":
        paired_child(cases, args.reps, args.blocks, only, bool(args.kspec_first))
        return 0
    if args.child:
        child(args.child, args.reps, only)
        return 0
    if args.capture:
        return _capture(args.capture, args.only)
    modes = ("kspec", "cupy", "served") if args.captured else ("kspec", "cupy")
    runs: dict[str, list[dict]] = {mode: [] for mode in (*modes, "cupy-cold")}
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)

    def run(mode: str, record: bool = True) -> None:
        reps = args.reps if record and not args.paired else 1  # --paired: the warm calls are timed there
        cmd = [sys.executable, __file__, "--child", mode, "--reps", str(reps), "--only", args.only]
        env = _child_env(mode, args.cold, args.captured)
        if args.profile and record:
            env["KSPEC_BENCH_PROFILE"] = args.profile
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            print(f"{mode} process failed:\n{done.stderr[-2000:]}", file=sys.stderr)
            return
        if record:
            runs[mode].append(json.loads(done.stdout.strip().splitlines()[-1]))
            if args.log:
                with open(args.log, "a") as log:
                    log.write(json.dumps({"mode": mode, "results": runs[mode][-1]}) + "\n")

    _write_bytecode()
    if args.cupy_cold:
        run("cupy-cold")
    if not args.cold:  # fill the machine's caches, so that the measured first calls are warm ones
        run("kspec", record=False)
        run("cupy", record=False)
    for _ in range(args.procs):
        for mode in modes:
            run(mode)
    both: list[dict[str, dict]] = []  # --paired: each process's {mode: {name: results}}
    for p in range(args.paired):
        cmd = [sys.executable, __file__, "--child", "paired", "--reps", str(args.reps), "--blocks", str(args.blocks),
               "--only", args.only, "--kspec-first", str(1 - p % 2)]
        done = subprocess.run(cmd, capture_output=True, text=True, env=_child_env("kspec", False, ""))
        if done.returncode != 0:
            print(f"paired process failed:\n{done.stderr[-2000:]}", file=sys.stderr)
            continue
        both.append(json.loads(done.stdout.strip().splitlines()[-1]))
        if args.log:
            with open(args.log, "a") as log:
                log.write(json.dumps({"mode": "paired", "results": both[-1]}) + "\n")
    names = list(dict.fromkeys(n for r in runs["kspec"] + runs["cupy"] for n in r if n != START_UP))
    cold = "cold, empty caches" if args.cold else "warm caches"
    served = " / served from the captured build" if args.captured else ""
    cupy_cold = "CuPy cold / " if args.cupy_cold else ""
    paired = " served - CuPy, paired by round, ms |" if args.captured else ""
    if both:
        print(f"warm columns: {len(both)} processes of both modes, {args.blocks} blocks of {args.reps} calls; ratio: the "
              "median of the processes' ratios (their range)")
    print(f"| function | CuPy device ms | kspec device ms | ratio | CuPy host ms | kspec host ms | ratio | first call ms "
          f"{cupy_cold}CuPy / kspec ({cold}){served} |{paired}")
    print("|---|---|---|---|---|---|---|---|" + ("---|" if args.captured else ""))
    ratios: list[float] = []
    for name in names:
        row = {}
        for mode in ("cupy", "kspec"):
            got = [r[name] for r in runs[mode] if name in r]
            errors = [g["error"] for g in got if "error" in g]
            if errors or not got:
                row[mode] = errors[0] if errors else "missing"
                continue
            row[mode] = (statistics.median(x for g in got for x in g["device"]) * 1e3,
                         statistics.median(x for g in got for x in g["host"]) * 1e3,
                         statistics.median(g["first"] for g in got) * 1e3)
        if isinstance(row["cupy"], str) or isinstance(row["kspec"], str):
            print(f"| {name} | {row['cupy'] if isinstance(row['cupy'], str) else '%.3f' % row['cupy'][0]} | "
                  f"{row['kspec'] if isinstance(row['kspec'], str) else '%.3f' % row['kspec'][0]} | | | | | |")
            continue
        c, k = row["cupy"], row["kspec"]
        warm = warm_columns(both, name) if both else (
            f"{c[0]:.3f} | {k[0]:.3f} | {k[0] / c[0]:.2f} | {c[1]:.3f} | {k[1]:.3f} | {k[1] / c[1]:.2f}", k[0] / c[0])
        if warm[1] == warm[1]:  # not NaN: a process failed the function
            ratios.append(warm[1])
        firsts = f"{c[2]:.1f} / {k[2]:.1f}"
        if args.cupy_cold:
            got = [r[name] for r in runs["cupy-cold"] if name in r and "first" in r[name]]
            firsts = (f"{got[0]['first'] * 1e3:.0f}" if got else "missing") + " / " + firsts
        if args.captured:
            got = [r[name] for r in runs["served"] if name in r]
            firsts += " / " + (f"{statistics.median(g['first'] for g in got) * 1e3:.1f}" if got and all("first" in g for g in got)
                               else (got[0].get("error", "missing") if got else "missing"))
            firsts += f" | {_served_minus_cupy(runs['served'], runs['cupy'], name)}"
        print(f"| {name} | {warm[0]} | {firsts} |")
    if ratios:
        mean = statistics.geometric_mean(ratios)
        print(f"\ngeometric mean of the device ratios over {len(ratios)} functions: {mean:.3f} ({1 / mean:.3f}x CuPy's speed)")
    for mode in modes:  # what each process paid before its first call: part of a fresh process's cost too
        steps = [r[START_UP] for r in runs[mode] if START_UP in r]
        if steps:
            print(f"\nstart-up of the {mode} processes, median ms: " + ", ".join(
                f"{step} {statistics.median(s[step] for s in steps) * 1e3:.1f}" for step in steps[0]))
    return 0


def _served_minus_cupy(served: list[dict], cupy: list[dict], name: str) -> str:
    """The median over rounds of (served first call - CuPy's first call) in ms, or "-" where a round lacks one (a
    process failed: its rounds no longer pair)."""
    if len(served) != len(cupy):
        return "-"
    pairs = [(s.get(name, {}), c.get(name, {})) for s, c in zip(served, cupy)]
    if not pairs or not all("first" in s and "first" in c for s, c in pairs):
        return "-"
    return f"{statistics.median(s['first'] - c['first'] for s, c in pairs) * 1e3:+.1f}"


def _write_bytecode() -> None:
    """kspec's modules and its dependencies' compiled to bytecode, as a pip install has them: otherwise, where
    PYTHONDONTWRITEBYTECODE is set and the dependencies were installed without bytecode (the GPU machine), every
    process compiles their sources again (~250 ms for pydantic alone), and the start-up and first-call columns
    measure Python's compiler (CuPy's installed modules come with their bytecode)."""
    import importlib

    roots = []
    for name in ("kspec", "pydantic", "pydantic_core", "jinja2", "markupsafe", "annotated_types", "typing_inspection"):
        try:
            roots.append(os.path.dirname(importlib.import_module(name).__file__ or ""))
        except ImportError:
            continue
    subprocess.run([sys.executable, "-m", "compileall", "-q", *roots], check=False,
                   env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"})


def _child_env(mode: str, cold: bool, captured: str) -> dict[str, str]:
    import tempfile

    env = os.environ.copy()
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the bytecode _write_bytecode wrote is read, and kept current
    if cold or mode == "served":  # a fresh machine's kspec: nothing cached, nothing memoized
        env["KSPEC_CACHE_DIR"], env["KSPEC_MEMO_DIR"] = tempfile.mkdtemp(), tempfile.mkdtemp()
    if (cold and mode != "served") or mode == "cupy-cold":
        env["CUPY_CACHE_DIR"] = tempfile.mkdtemp()
    if mode == "served":
        env.update(KSPEC_BINARIES=captured, KSPEC_COMPILE="never")
    return env


def _capture(out: str, only: str) -> int:
    """One kspec process under a recorder, its records merged into spec files in ``out`` (what ``kspec capture``
    does for a program)."""
    import tempfile

    from kspec.capturer import recording_environment, write_captured

    records = tempfile.mkdtemp()
    env = {**os.environ, **recording_environment(records)}
    subprocess.run([sys.executable, __file__, "--child", "kspec", "--reps", "1", "--only", only], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    print(f"captured: {write_captured(records, out).summary()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
