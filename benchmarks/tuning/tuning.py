"""Build-time tuning (issue [AT]): `kspec tune` against an exhaustive sweep, the untuned default beside it, and
the start-up of a process served by a tuned build against an untuned one.

1. ``kspec tune`` (kspec.tune.tune_files) on a copy of specs/tuned.toml within ``--budget`` seconds: its time.
2. Per kernel and shape of its spec: every config of the space timed again (the exhaustive sweep, same
   timing: CUDA events around the launch, L2 flushed, medians), and the rows: the default's time, the tuned
   winner's, the sweep's best, tuned / best (target <= 1.03) and default / tuned.
3. Start-up: two ``kspec build`` outputs (with the record: the winners; without: the defaults); a fresh
   process per sample loads the spec file with ``binaries=`` under ``KSPEC_COMPILE=never`` and calls the
   transpose once (the winner's bucket); wall time of the process, median of ``--procs``.

Usage::

    python benchmarks/tuning/tuning.py [--budget 240] [--reps 15] [--procs 7]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

STARTUP = """
import numpy as np, kspec
k = kspec.load({spec!r}, binaries={out!r}).transpose_tiled
src = kspec.zeros((4096, 4096), np.float32); dst = kspec.zeros((4096, 4096), np.float32)
k(src, dst, np.int32(4096), np.int32(4096))
kspec.runtime.get_device().synchronize()
print(k.choices()[0][3])
"""


def main() -> None:
    import kspec
    from kspec._tuning import config_label, configs, read_record, record_path
    from kspec.cli import main as cli
    from kspec.tune import Timer, TuneOptions, time_shape, tune_files

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=240.0)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--procs", type=int, default=7)
    parser.add_argument("--record-out", help="also copy the record written here (to check it in)")
    options = parser.parse_args()
    device = kspec.runtime.get_device()
    arch = device.arch
    work = Path(tempfile.mkdtemp(prefix="kspec-tuning-"))
    spec_file = work / "tuned.toml"
    shutil.copy(REPO / "specs" / "tuned.toml", spec_file)
    start = time.perf_counter()
    report = tune_files([spec_file], TuneOptions(budget=options.budget, reps=options.reps, progress=lambda m: print("  " + m)))
    tune_s = time.perf_counter() - start
    record = read_record(record_path(spec_file))
    if options.record_out:
        shutil.copy(record_path(spec_file), options.record_out)
    print(f"\n{device.name} ({arch}): kspec tune of specs/tuned.toml took {tune_s:.1f} s (budget {options.budget:.0f} s): {report.kernels}\n")
    print("| kernel | shape | configs | default | ms | tuned | ms | sweep's best | ms | tuned / best | default / tuned |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    library = kspec.load(spec_file)
    timer = Timer()
    for name in ("transpose_tiled", "stencil5"):
        kernel = library[name]
        space = kernel.space
        entry = record["archs"][arch]["kernels"][name]
        every = configs(space)
        for shape in space["shapes"]:
            results, skipped = time_shape(kernel, shape, every, {}, timer, TuneOptions(reps=options.reps))
            by_label = {config_label(c): ms for ms, _, c in results}
            best_ms, _, best = min(results, key=lambda r: r[0])
            label = ",".join(f"{k}={v}" for k, v in shape.items())
            from kspec._tuning import bucket_label

            winner = entry["buckets"][bucket_label(space["key"], [shape[k] for k in space["key"]])]["winner"]["config"]
            tuned_ms, default_ms = by_label[config_label(winner)], by_label[config_label(space["default"])]
            print(f"| {name} | {label} | {len(results)} ({len(skipped)} skipped) | {config_label(space['default'])} | "
                  f"{default_ms:.4f} | {config_label(winner)} | {tuned_ms:.4f} | {config_label(best)} | {best_ms:.4f} | "
                  f"{tuned_ms / best_ms:.3f} | {default_ms / tuned_ms:.2f} |")  # fmt: skip
    # start-up: a tuned build against an untuned one, KSPEC_COMPILE=never
    outs = {}
    for which in ("tuned", "untuned"):
        outs[which] = work / f"out-{which}"
        if which == "untuned":
            record_path(spec_file).rename(work / "record.json")
        assert cli(["build", str(spec_file), "--arch", arch, "-o", str(outs[which])]) == 0
    shutil.move(str(work / "record.json"), str(record_path(spec_file)))
    env = {**os.environ, "KSPEC_COMPILE": "never", "KSPEC_CACHE_DIR": str(work / "empty-cache")}
    samples: dict[str, list[float]] = {"tuned": [], "untuned": []}
    sources: dict[str, str] = {}
    for _ in range(options.procs):
        for which, out in outs.items():
            t = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", STARTUP.format(spec=str(spec_file), out=str(out))],
                                  capture_output=True, text=True, env=env, cwd=REPO)  # fmt: skip
            samples[which].append((time.perf_counter() - t) * 1e3)
            if done.returncode != 0:
                raise SystemExit(f"{which} start-up failed: {done.stderr[-2000:]}")
            sources[which] = done.stdout.strip()
    print(f"\nstart-up + first call (4096^2 transpose), KSPEC_COMPILE=never, median of {options.procs} processes:")
    for which, got in samples.items():
        print(f"  {which:8s} build: {statistics.median(got):8.1f} ms (config from: {sources[which]})")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
