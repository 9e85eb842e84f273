"""The output of benchmarks/kernels/bench.py: the tables it prints, bench.json and bench.png."""

from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Any

from _timing import Result


def fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def gbps(s: dict[str, Any] | None) -> float | None:
    return None if s is None else float(s["gbps"])


def print_tables(info: dict[str, Any], results: list[Result], host: dict[str, Any]) -> None:
    copy_gbps = info["copy_gbps"]
    print()
    print(f"device: {info['device']} (sm_{info['arch']}), CuPy {info['versions'].get('cupy')}, "
          f"kspec {info['versions'].get('kspec')}")
    copy_mib = info["settings"]["copy_bytes"] / 2**20
    print(f"copy ceiling (cudaMemcpyAsync D2D, {copy_mib:g} MiB, read+write): {copy_gbps:.0f} GB/s "
          f"(start {info['copy_start']['gbps']:.0f}, end {info['copy_end']['gbps']:.0f})")
    if not (info["copy_start"]["copy_correct"] and info["copy_end"]["copy_correct"]):
        print("WARNING: the copy's destination differs from its source: the ceiling is suspect")
    print(f"median of {info['settings']['reps']} timed calls each (CUDA events), warm-up {info['settings']['warmup']}; "
          f"GB/s = (inputs read once + outputs written once) / median; kspec/CuPy > 1: kspec faster; "
          f"CuPy reduction accelerators: {info['reduction_accelerators']}")
    header = (f"{'case':40s} {'dtype':13s} {'kspec GB/s':>10s} {'CuPy GB/s':>10s} {'kspec/copy':>10s} "
              f"{'CuPy/copy':>9s} {'kspec/CuPy':>10s} {'target':>6s} {'met?':>6s}")
    print(header)
    print("-" * len(header))
    for r in results:
        k, c = r.kspec, r.cupy
        print(f"{r.case.name:40s} {r.case.dtype:13s} {fmt(gbps(k), '10.0f'):>10s} {fmt(gbps(c), '10.0f'):>10s} "
              f"{fmt(r.ratio('kspec', copy_gbps), '10.3f'):>10s} {fmt(r.ratio('cupy', copy_gbps), '9.3f'):>9s} "
              f"{fmt(r.kspec_over_cupy, '10.2f'):>10s} {fmt(r.case.target, '6.2f'):>6s} {r.verdict(copy_gbps):>6s}")
    # below the table: why a row FAILED or says ERROR / n/a
    for r in results:
        remarks = [f"error: {e}" for e in r.errors]
        if r.check is not None and not r.check.ok:
            remarks.insert(0, f"check FAILED: {r.check.detail}")
        if r.note and r.case.kind != "reference":
            remarks.append(r.note)
        for text in remarks:
            print(f"  {r.case.label}: {text}")
    if host["rows"]:
        print()
        print(f"host cost per call, 1-element float32 arrays: median of {host['batches']} loops of {host['calls']} calls")
        header = (f"{'call':28s} {'kspec us':>9s} {'CuPy us':>9s} {'cuda.core us':>12s} {'C floor us':>10s} "
                  f"{'kspec-floor':>11s} {'CuPy-floor':>10s} {'kspec/CuPy':>10s} {'kspec/core':>10s} {'target':>34s} {'met?':>5s}")
        print(header)
        print("-" * len(header))
        for row in host["rows"]:
            met = "n/a" if row["met"] is None else ("yes" if row["met"] else "no")
            print(f"{row['call']:28s} {fmt(row['kspec_us'], '9.2f'):>9s} {fmt(row['cupy_us'], '9.2f'):>9s} "
                  f"{fmt(row['core_us'], '12.2f'):>12s} {fmt(row.get('floor_us'), '10.2f'):>10s} "
                  f"{fmt(row.get('kspec_above_floor_us'), '11.2f'):>11s} {fmt(row.get('cupy_above_floor_us'), '10.2f'):>10s} "
                  f"{fmt(row['kspec_over_cupy'], '10.2f'):>10s} "
                  f"{fmt(row['kspec_over_core'], '10.2f'):>10s} {row['target']:>34s} {met:>5s}")
        for note in host["notes"]:
            print(f"  {note}")


def write_json(path: Path, info: dict[str, Any], results: list[Result], host: dict[str, Any]) -> None:
    copy_gbps = info["copy_gbps"]
    cases = []
    for r in results:
        cases.append({
            "label": r.case.label, "name": r.case.name, "dtype": r.case.dtype, "kind": r.case.kind,
            "target": r.case.target, "bytes": r.nbytes, "kspec": r.kspec, "cupy": r.cupy,
            "kspec_over_copy": r.ratio("kspec", copy_gbps), "cupy_over_copy": r.ratio("cupy", copy_gbps),
            "kspec_over_cupy": r.kspec_over_cupy, "met": r.verdict(copy_gbps),
            "check": None if r.check is None else {"ok": r.check.ok, "detail": r.check.detail},
            "errors": r.errors, "note": r.note,
        })
    path.write_text(json.dumps({**info, "cases": cases, "host_cost": host}, indent=1, default=float))


def write_png(path: Path, results: list[Result], copy_gbps: float, device: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: bench.png skipped")
        return
    rows = [r for r in results if r.kspec or r.cupy]
    if not rows:
        return
    xs = list(range(len(rows)))
    kvals = [r.ratio("kspec", copy_gbps) or 0.0 for r in rows]
    cvals = [r.ratio("cupy", copy_gbps) or 0.0 for r in rows]
    width = 0.38
    fig, ax = plt.subplots(figsize=(max(10.0, 0.55 * len(rows) + 3), 6.5))
    ax.bar([x - width / 2 for x in xs], kvals, width, label="kspec / copy", color="#1f77b4")
    ax.bar([x + width / 2 for x in xs], cvals, width, label="CuPy / copy", color="#ff7f0e")
    ax.axhline(1.0, color="black", linewidth=1, label=f"copy ({copy_gbps:.0f} GB/s)")
    labelled = False
    for i, r in enumerate(rows):
        if r.case.target is not None:  # the target as a dashed segment over the case's two bars
            ax.hlines(r.case.target, i - 0.45, i + 0.45, colors="red", linestyles="--", linewidth=1.2,
                      label=None if labelled else "kspec target")
            labelled = True
        verdict = r.verdict(copy_gbps)
        if verdict in ("FAILED", "ERROR"):
            ax.text(i, 0.05, verdict, rotation=90, ha="center", va="bottom", color="red", fontsize=8)
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{r.case.name} [{r.case.dtype}]" for r in rows], rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("bandwidth / copy bandwidth")
    ax.set_ylim(0, max(1.15, max(kvals + cvals) * 1.08))
    ax.set_title(f"kspec and CuPy against the device-to-device copy, {device}")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def versions() -> dict[str, Any]:
    """Versions of Python, the libraries and CUDA, for bench.json."""
    from importlib import metadata

    import cupy as cp
    import numpy as np

    import kspec

    out: dict[str, Any] = {"python": platform.python_version(), "numpy": np.__version__, "cupy": cp.__version__,
                           "kspec": getattr(kspec, "__version__", None)}
    for dist in ("cuda-core", "cuda-bindings", "ml_dtypes", "torch", "matplotlib"):
        try:
            out[dist] = metadata.version(dist)
        except Exception:
            out[dist] = None
    try:
        out["cuda_runtime"] = cp.cuda.runtime.runtimeGetVersion()
        out["cuda_driver"] = cp.cuda.runtime.driverGetVersion()
    except Exception:
        pass
    return out
