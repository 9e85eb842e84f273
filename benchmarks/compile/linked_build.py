"""Binaries linked from one PTX per module (``kspec build`` for several archs, kspec/compiler/_link.py) against
binaries compiled per arch from the source, on the GPU: the same kernels from two builds of the same specs, timed
side by side (CUDA events, medians, alternating rounds, fresh random data), each as a fraction of a same-size copy.

    python benchmarks/compile/linked_build.py [--reps 30] [--rounds 5]

It builds ``specs/elementwise.toml`` and ``specs/reduction.toml`` twice into a temporary directory, in a child
process that sees no GPU: for ``sm_80`` and this GPU's arch (linked), and for this GPU's arch alone (per arch).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
SPECS = [REPO / "specs" / "elementwise.toml", REPO / "specs" / "reduction.toml"]
sys.path.insert(0, str(REPO))


def build(out: Path, archs: str) -> dict:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "KSPEC_CACHE_DIR": str(out) + "-cache"}
    done = subprocess.run([sys.executable, "-m", "kspec", "build", *map(str, SPECS), "-o", str(out), "--arch", archs,
                           "--json"], env=env, capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    import cupy as cp

    import kspec

    arch = kspec.get_device().arch
    with tempfile.TemporaryDirectory() as tmp:
        builds = {"linked": Path(tmp) / "linked", "per arch": Path(tmp) / "direct"}
        reports = {"linked": build(builds["linked"], f"sm_80,{arch}" if arch != "sm_80" else "sm_80,sm_90"),
                   "per arch": build(builds["per arch"], arch)}  # fmt: skip
        libs = {name: kspec.load(SPECS, binaries=out) for name, out in builds.items()}
        n = 1 << 26
        rng = cp.random.default_rng(0)
        cases = []
        for dt in ("float16", "bfloat16", "float32", "float64"):
            x, y = (rng.random(n, dtype=np.float32).astype(dt) for _ in range(2))
            cases.append((f"squared_diff_generic {dt}", lambda lib, x=x, y=y: lib["squared_diff_generic"](x, y), x.nbytes * 3))
        m = rng.random((8192, 8192), dtype=np.float32)
        cases.append(("l2norm float32 axis=1", lambda lib: lib["l2norm"](m, axis=1), m.nbytes))
        cases.append(("l2norm float32 axis=0", lambda lib: lib["l2norm"](m, axis=0), m.nbytes))
        h = m.astype("float16")
        total = cp.empty((), dtype=np.float32)  # its accumulator type is bound by the output alone
        cases.append(("sum_of_squares float16 all", lambda lib: lib["sum_of_squares"](h, total), h.nbytes))
        src = cp.empty(n, dtype=np.float32)
        dst = cp.empty_like(src)
        samples: dict[str, list[float]] = {}
        start, end = cp.cuda.Event(), cp.cuda.Event()

        def timed(fn) -> float:
            fn()
            start.record()
            for _ in range(options.reps):
                fn()
            end.record()
            end.synchronize()
            return cp.cuda.get_elapsed_time(start, end) / options.reps

        for _ in range(options.rounds):
            samples.setdefault("copy", []).append(timed(lambda: dst.__setitem__(Ellipsis, src)))
            for label, call, _ in cases:
                for name, lib in libs.items():
                    samples.setdefault(f"{label}|{name}", []).append(timed(lambda call=call, lib=lib: call(lib)))
        copy_ms = statistics.median(samples["copy"])
        bandwidth = 2 * src.nbytes / copy_ms  # bytes per ms of a copy
        print(f"\n{kspec.get_device().name} ({arch}); builds: linked {reports['linked']['modules_linked']} of "
              f"{reports['linked']['modules_total']} modules in {reports['linked']['wall_s']:.1f} s, per arch "
              f"{reports['per arch']['modules_total']} modules in {reports['per arch']['wall_s']:.1f} s (16-core host)")
        print(f"copy of {src.nbytes >> 20} MiB: {copy_ms:.4f} ms\n")
        print("| kernel | linked ms | / copy speed | per arch ms | / copy speed | linked / per arch |")
        print("|---|---|---|---|---|---|")
        for label, _, nbytes in cases:
            a, b = (statistics.median(samples[f"{label}|{k}"]) for k in ("linked", "per arch"))
            ideal = nbytes / bandwidth
            print(f"| {label} | {a:.4f} | {ideal / a:.2f} | {b:.4f} | {ideal / b:.2f} | {a / b:.3f} |")


if __name__ == "__main__":
    main()
