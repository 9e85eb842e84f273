"""kspec against CuPy, side by side, with the device-to-device copy bandwidth of the same run as the ceiling.

Run on the GPU machine::

    python3 benchmarks/kernels/bench.py [--out DIR] [--quick] [--only SUBSTR] [--list] [--log2n 28]
    python3 benchmarks/kernels/bench.py --only capture    # the CUDA-graph rows only (benchmarks/helpers/_capture.py)

(``--list`` prints the case labels that ``--only`` matches; ``--log2n`` shrinks every case for a trial run.)

Every case builds ``kspec.ElementwiseKernel`` / ``kspec.ReductionKernel`` with exactly the arguments of the
matching ``cupy.ElementwiseKernel`` / ``cupy.ReductionKernel``, draws fresh random inputs (2**28 elements,
1-4 GB per case: several times the 60 MB L2, so repeated runs do not measure the cache), checks kspec's
result against CuPy's (outputs poisoned with NaN first, so an unwritten element fails), then times both.

Method (.library/device/METHOD.md):

* bandwidth ceiling: ``cudaMemcpyAsync`` device to device of 1 GiB, counting bytes read + bytes written;
  measured at the start and at the end of the run, the larger median is the ceiling;
* device time of one call: CUDA events (``cupy.cuda.Event``) recorded on the current stream around each call,
  after a warm-up that includes kspec's first call (compile and load); median of ``--reps`` calls, taken in
  two rounds that alternate kspec and CuPy so that drift of the machine lands on both;
* bandwidth of a kernel: bytes of every input read once + every output written once, over the median time;
* host cost per call: 1-element float32 arrays, loops of ``--host-calls`` calls, the device synchronised at
  the end of each loop (inside the timed region), the variants taking turns; median of 7 loops after warm-up.
  It includes cuda.core's ``launch()`` (the former ``benchmarks/host_cost.py`` is folded in here).

A failed check marks the case FAILED in the table; an exception marks it ERROR; neither stops the run.
Prints a table at the end (the device name and copy bandwidth at its top) and writes ``bench.json`` (all
numbers) and ``bench.png`` (needs matplotlib; skipped with a message without it) into ``--out`` (default:
``$OUT`` if set, else ``./bench_out``). Reference anchor for the ``cupy.sum`` (CUB) rows: about 4299 GB/s.
"""

# This file is the entry point; the parts live in benchmarks/helpers/: _settings.py (the command line's settings, passed
# to every part), _kernels.py (the kernel pairs), _check.py (data and the check against CuPy), _cases.py (the
# cases and their targets), _timing.py (CUDA-event timing, the copy ceiling, running a case), _host_cost.py
# (host cost per call), _capture.py (100 small calls eager and replayed from CUDA graphs), _report.py (tables,
# bench.json, bench.png).

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))  # benchmarks/helpers: the parts below
from _settings import REPO, Settings  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_out = os.environ.get("OUT") or "bench_out"
    parser.add_argument("--out", default=default_out, help=f"folder for bench.json and bench.png (default: {default_out})")
    parser.add_argument("--quick", action="store_true", help="5 timed calls per case, 2000 calls per host-cost loop")
    parser.add_argument("--only", metavar="SUBSTR", action="append", help="run only the cases whose label holds "
                        "SUBSTR (case-insensitive; repeat it for several; 'host' selects the host-cost rows); the "
                        "copy ceiling always runs")
    parser.add_argument("--list", action="store_true", help="print the case labels and exit (needs no GPU)")
    parser.add_argument("--reps", type=int, help="timed calls per library and case (default 40, --quick 5)")
    parser.add_argument("--warmup", type=int, help="untimed calls first (default 5, --quick 2)")
    parser.add_argument("--host-calls", type=int, help="calls per host-cost loop (default 20000, --quick 2000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of cupy.random (every case still draws fresh data)")
    parser.add_argument("--log2n", type=int, default=28, help="elements per case as a power of two (default 28; "
                        "smaller for a trial run: the L2 then holds more of the data)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    settings = Settings.from_options(opts)
    sys.path.insert(0, str(REPO))  # the working tree's kspec, installed or not (imported by the parts below)
    from _capture import ROWS as CAPTURE_ROWS, print_capture, run_capture
    from _cases import all_cases, reduction_accelerators
    from _host_cost import BATCHES, HOST_ROWS, run_host_cost
    from _report import fmt, gbps, print_tables, versions, write_json, write_png
    from _timing import Result, measure_copy, release, run_case, short_error

    cases = [c for c in all_cases(settings) if settings.selects(c.label)]
    if opts.list:
        for c in all_cases(settings):
            print(c.label)
        for row in HOST_ROWS:
            print(f"host cost: {row}")
        for row in CAPTURE_ROWS:
            print(row)
        return 0
    reps, warmup = settings.reps, settings.warmup

    import cupy as cp

    out_dir = Path(opts.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    wall = time.perf_counter()

    cp.random.seed(settings.seed)
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    info: dict[str, Any] = {
        "device": name, "arch": f"{props['major']}{props['minor']}", "sm_count": props.get("multiProcessorCount"),
        "l2_bytes": props.get("l2CacheSize"), "versions": versions(),
        "settings": {"reps": reps, "warmup": warmup, "host_calls": settings.host_calls, "quick": settings.quick,
                     "only": settings.only, "elements": settings.n, "log2n": settings.log2n,
                     "copy_bytes": settings.copy_bytes, "seed": settings.seed},
        "reduction_accelerators": reduction_accelerators(),
    }
    print(f"{name} (sm_{info['arch']}), {len(cases)} cases, {reps} timed calls each; writing to {out_dir}", flush=True)

    copy_reps = max(reps, 20)
    info["copy_start"] = measure_copy(settings.copy_bytes, warmup, copy_reps)
    release()
    print(f"copy: {info['copy_start']['gbps']:.0f} GB/s", flush=True)

    results: list[Result] = []
    for i, case in enumerate(cases, 1):
        t0 = time.perf_counter()
        r = run_case(case, warmup, reps)
        results.append(r)
        check = "-" if r.check is None else ("ok" if r.check.ok else "FAILED")
        print(f"[{i}/{len(cases)}] {case.label}: kspec {fmt(gbps(r.kspec), '.0f')} GB/s, "
              f"CuPy {fmt(gbps(r.cupy), '.0f')} GB/s, check {check}"
              f"{'; ' + '; '.join(r.errors) if r.errors else ''} ({time.perf_counter() - t0:.1f} s)", flush=True)

    try:
        host = run_host_cost(settings)
    except Exception as exc:
        traceback.print_exc()
        host = {"rows": [], "calls": settings.host_calls, "batches": BATCHES,
                "notes": [f"host cost failed: {short_error(exc)}"]}

    try:
        info["capture"] = run_capture(settings.selects)
    except Exception as exc:
        traceback.print_exc()
        info["capture"] = {"rows": [], "calls": 0, "elements": 0, "error": short_error(exc)}

    release()
    info["copy_end"] = measure_copy(settings.copy_bytes, warmup, copy_reps)
    release()
    info["copy_gbps"] = max(info["copy_start"]["gbps"], info["copy_end"]["gbps"])
    info["wall_s"] = time.perf_counter() - wall

    write_json(out_dir / "bench.json", info, results, host)
    try:
        write_png(out_dir / "bench.png", results, info["copy_gbps"], name)
    except Exception as exc:
        print(f"bench.png failed: {short_error(exc)}")
    print_tables(info, results, host)
    print_capture(info["capture"])
    print(f"\nwrote {out_dir / 'bench.json'}; {info['wall_s']:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
