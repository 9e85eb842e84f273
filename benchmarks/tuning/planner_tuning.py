"""Planner tuning (issue [AT]): each case of benchmarks/tuning/bench_kernels.toml with the planner's rules, with the
knobs of a record `kspec tune` wrote in the same run, and with CuPy's kernel of the same arguments.

1. ``kspec tune`` (kspec.tune.tune_files) on a copy of benchmarks/tuning/bench_kernels.toml within ``--budget``
   seconds (or ``--record FILE``: that record, not tuned again); the record is copied to ``$OUT``.
2. Per case: fresh random arrays of its layouts (CuPy arrays, as bench.py passes), the kernel loaded from the
   copy (its record beside it), the same kernel with the rules (``with_knobs({})``) and ``cupy.ElementwiseKernel``
   / ``cupy.ReductionKernel`` of the spec's fields; results checked against CuPy's; CUDA events around each
   call, medians of ``--reps`` in two rounds that alternate the three (benchmarks/helpers/_timing.py); bandwidth as
   bench.py counts it (inputs read once, outputs written once) over the copy ceiling measured in the same run.

Usage::

    python benchmarks/tuning/planner_tuning.py [--budget 400] [--reps 20] [--record FILE] [--only SUBSTR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))  # benchmarks/helpers: the _*.py modules
SPECS = HERE / "bench_kernels.toml"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", type=float, default=400.0)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--record", help="a record of bench_kernels.toml to use instead of tuning")
    parser.add_argument("--only", help="cases whose kernel name or layout holds this text")
    args = parser.parse_args()

    import cupy as cp
    import numpy as np

    import kspec
    from _timing import measure_copy
    from kspec._tuning import read_record, record_path
    from kspec.tune import TuneOptions, tune_files

    work = Path(tempfile.mkdtemp(prefix="kspec-planner-"))
    spec_file = work / SPECS.name
    shutil.copy(SPECS, spec_file)
    if args.record:
        shutil.copy(args.record, record_path(spec_file))
    else:
        start = time.perf_counter()
        report = tune_files([spec_file], TuneOptions(budget=args.budget, reps=10, progress=lambda line: print("  " + line, flush=True)))
        print(f"kspec tune: {report.seconds:.1f} s (budget {args.budget:.0f} s): {report.kernels}")
        print(f"  wall {time.perf_counter() - start:.1f} s")
    out = Path(os.environ.get("OUT") or ".")
    if record_path(spec_file).exists():
        shutil.copy(record_path(spec_file), out / record_path(SPECS).name)
    record = read_record(record_path(spec_file)) or {"archs": {}}
    arch = kspec.runtime.get_device().arch
    entries = (record["archs"].get(arch) or {}).get("kernels", {})
    ceiling = max(measure_copy(1 << 30, 3, 20)["gbps"] for _ in range(2))
    lib = kspec.load(spec_file)
    rows = []
    for name in lib:
        table = lib.spec(name).to_data()
        for case in table["tune"]["cases"]:
            text = f"{name} {case}"
            if args.only and args.only not in text:
                continue
            rows.append(run_case(cp, np, lib[name], table, case, args.reps, entries.get(name)))
            cp.get_default_memory_pool().free_all_blocks()
    print(f"\n## {kspec.runtime.get_device().name}: copy ceiling {ceiling:.0f} GB/s\n")
    print("| kernel | case | layout | knobs | rules ms | tuned ms | CuPy ms | rules / tuned | rules of copy | tuned of copy | CuPy of copy |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        fr = [r["gb"] / (ms * 1e-3) / ceiling for ms in (r["rules"], r["tuned"], r["cupy"])]
        print(f"| {r['name']} | {r['case']} | {r['label']} | {r['knobs']} | {r['rules']:.4f} | {r['tuned']:.4f} | "
              f"{r['cupy']:.4f} | {r['rules'] / r['tuned']:.3f} | {fr[0]:.3f} | {fr[1]:.3f} | {fr[2]:.3f} |")
    return 0


def run_case(cp: Any, np: Any, kernel: Any, table: dict[str, Any], case: dict[str, Any], reps: int,
             entry: dict[str, Any] | None) -> dict[str, Any]:  # fmt: skip
    from _timing import time_libraries
    from kspec._plan_tuning import knob_label, parse_layout

    params = [p.strip().split()[-1] for p in table["in_params"].split(",")]
    outs = [p.strip().split()[-1] for p in table["out_params"].split(",")]
    given = case["args"]
    names = params + (outs if any(o in given for o in outs) else [])
    values, nbytes = [], 0
    rng = cp.random.default_rng()
    for n in names:
        v = given[n]
        if not isinstance(v, str):
            values.append(v)
            continue
        layout = parse_layout(v, n)
        a = rng.standard_normal(layout.shape, dtype=cp.float32).astype(layout.dtype)
        values.append(a if layout.perm is None else a.transpose(layout.perm))
        nbytes += a.nbytes
    kwargs = {k: (tuple(v) if isinstance(v, list) else v) for k, v in case.items() if k != "args"}
    if table["kind"] == "elementwise":
        ref = cp.ElementwiseKernel(table["in_params"], table["out_params"], table["operation"], table["name"])
    else:
        ref = cp.ReductionKernel(table["in_params"], table["out_params"], table["map_expr"], table["reduce_expr"],
                                 table["post_map_expr"], table["identity"], table["name"],
                                 reduce_type=table.get("reduce_type"))  # fmt: skip
    rules = kernel.with_knobs({})
    gives_out = any(o in given for o in outs)
    want = ref(*values, **kwargs)
    want = (want if want is not None else values[-1]).copy()  # a given output is written again below
    # bench.py's tolerances (benchmarks/helpers/_check.py); reductions sum in another order under another split
    rtol, atol = {2: (2e-2, 1e-4), 4: (1e-5, 1e-6), 8: (1e-12, 1e-14)}[want.dtype.itemsize]
    if table["kind"] == "reduction":
        rtol = max(rtol, 1e-4)
    for k in (kernel, rules):
        if gives_out:
            values[-1].fill(float("nan"))  # an element left unwritten fails the check
        got = k(*values, **kwargs)
        got = got if got is not None else values[-1]
        assert bool(cp.allclose(got, want, rtol=rtol, atol=atol)), f"{table['name']} {case}: differs from CuPy's"
    if not gives_out:
        nbytes += want.nbytes
    samples, errors = time_libraries({"rules": lambda: rules(*values, **kwargs), "tuned": lambda: kernel(*values, **kwargs),
                                      "cupy": lambda: ref(*values, **kwargs)}, 3, reps)  # fmt: skip
    assert not errors, errors
    choice = kernel.choices()[-1] if kernel.choices() else (None, "-", None, "rules")
    label = choice[1] if choice[1] != "-" else "-"
    shown = {k: v for k, v in case.items() if k != "args"}
    desc = ", ".join(f"{n}={given[n]}" for n in names) + (f" {shown}" if shown else "")
    return {"name": table["name"], "case": desc, "label": label, "knobs": f"{knob_label(choice[2])} ({choice[3]})",
            "gb": nbytes / 1e9, **{lib: statistics.median(s) for lib, s in samples.items()}}


if __name__ == "__main__":
    sys.exit(main())
