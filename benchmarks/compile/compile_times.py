"""Cold NVRTC compile time of rendered kspec modules (no cache), median of fresh compiles; no GPU needed.

    python3 benchmarks/compile/compile_times.py [--arch sm_90] [--repeat 5]

The first compile of a process also loads the NVRTC library; that cost is printed on its own line.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from kspec.compiler import CompileOptions, compile_source
from kspec.render import render, render_raw, specialize
from kspec.spec import RawSpec, load_library

REPO = Path(__file__).resolve().parents[2]

CASES = [
    ("squared_diff", {}),
    ("squared_diff_generic", {"T": "float16"}),
    ("squared_diff_generic", {"T": "bfloat16"}),
    ("abs_squared", {}),
    ("l2norm", {"T": "float32"}),
    ("argmax", {"T": "float32"}),
    ("my_add", {}),
    ("my_func", {}),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    library = load_library(REPO / "specs")
    options = CompileOptions(arch=args.arch)

    start = time.perf_counter()
    compile_source('extern "C" __global__ void warm() {}', name="warm", options=options)
    print(f"first compile of the process (loads NVRTC): {1e3 * (time.perf_counter() - start):.0f} ms\n")

    print(f"{'kernel':<22} {'types':<12} {'entries':>7} {'median ms':>10} {'min ms':>8}   ({args.arch}, {args.repeat} runs)")
    for name, types in CASES:
        spec = library[name]
        module = render_raw(spec) if isinstance(spec, RawSpec) else render(specialize(spec, types))
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            compile_source(module.source, name=name, options=CompileOptions(arch=args.arch, extra=tuple(spec.options)),
                           name_expressions=module.name_expressions, needs=module.needs)
            times.append(1e3 * (time.perf_counter() - t0))
        label = ",".join(f"{k}={v}" for k, v in types.items()) or "-"
        print(f"{name:<22} {label:<12} {len(module.name_expressions):>7} {statistics.median(times):>10.1f} {min(times):>8.1f}")


if __name__ == "__main__":
    main()
