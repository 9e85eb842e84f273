"""kspec's CPU device against NumPy on the same machine, in one run (issue [T]).

Rows: an elementwise ``(x - y) ** 2`` on 10**7 float32 (kspec.ElementwiseKernel, out given and allocating,
against NumPy's ``(x - y) ** 2``); row sums of a (10**4, 10**3) and a (10**3, 10**4) float32 matrix
(kspec.ReductionKernel, against ``x.sum(axis=1)``); the seed's jit grid-stride copy of 10**6 float32 over a
128 x 1024 grid (against ``numpy.copyto``); the first call of a new kernel in a fresh process with an empty
cache and with a warm one. Times are medians of ``--repeat`` runs on fresh random data per round (the
inputs rotate through ``--sets`` arrays so no round reads what the previous one left in cache), after a
warm-up; the ratio is kspec's time over NumPy's (below 1: kspec is faster). Usage::

    python benchmarks/kernels/cpu_device.py [--repeat 15] [--sets 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import kspec  # noqa: E402
from kspec import jit  # noqa: E402

SQDIFF = kspec.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = (x - y) * (x - y)", "cpu_sqdiff")
ROWSUM = kspec.ReductionKernel("float32 x", "float32 y", "x", "a + b", "y = a", "0", "cpu_rowsum")


@jit.rawkernel()
def grid_stride_copy(x, y, size):  # the seed's example (cupyx.jit docs), word for word
    tid = jit.blockIdx.x * jit.blockDim.x + jit.threadIdx.x
    ntid = jit.gridDim.x * jit.blockDim.x
    for i in range(tid, size, ntid):
        y[i] = x[i]


def median_ms(run: Callable[[int], Any], sets: int, repeat: int) -> float:
    run(0)  # warm-up: compiles, loads, touches the memory
    times = []
    for k in range(repeat):
        start = time.perf_counter()
        run(k % sets)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def first_call_ms(cache: str) -> dict[str, float]:
    """A fresh process on the CPU device with ``cache`` as its binary cache, timed inside it (ms): importing
    numpy and kspec, constructing an ElementwiseKernel, its first call, then a second kernel's first call."""
    code = (
        "import time; t0 = time.perf_counter()\n"
        "import numpy as np, kspec\n"
        "t1 = time.perf_counter()\n"
        "k = kspec.ElementwiseKernel('float32 x, float32 y', 'float32 z', 'z = (x - y) * (x - y)', 'cpu_first')\n"
        "x = np.ones(1000, np.float32)\n"
        "t2 = time.perf_counter(); k(x, x); t3 = time.perf_counter()\n"
        "k2 = kspec.ElementwiseKernel('float32 x', 'float32 z', 'z = x * 3', 'cpu_second'); k2(x)\n"
        "t4 = time.perf_counter()\n"
        "print((t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3, (t4 - t3) * 1e3)\n"
    )
    env = dict(os.environ, KSPEC_DEVICE="cpu", KSPEC_CACHE_DIR=cache, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    values = [float(v) for v in out.stdout.strip().splitlines()[-1].split()]
    return dict(zip(("import", "construct", "first", "second"), values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--sets", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    sets, repeat = args.sets, args.repeat
    rows: list[tuple[str, float, float, str]] = []

    with kspec.use_device("cpu"):
        n = 10**7
        xs = [rng.random(n, dtype=np.float32) for _ in range(sets)]
        ys = [rng.random(n, dtype=np.float32) for _ in range(sets)]
        out = np.empty(n, np.float32)
        numpy_ms = median_ms(lambda k: (xs[k] - ys[k]) ** 2, sets, repeat)
        rows.append(("elementwise (x-y)^2, 1e7 float32, allocating", median_ms(lambda k: SQDIFF(xs[k], ys[k]), sets, repeat), numpy_ms, "(x-y)**2"))
        rows.append(("elementwise (x-y)^2, 1e7 float32, out given", median_ms(lambda k: SQDIFF(xs[k], ys[k], out), sets, repeat), numpy_ms, "(x-y)**2"))
        for shape in ((10**4, 10**3), (10**3, 10**4)):
            ms = [rng.random(shape, dtype=np.float32) for _ in range(sets)]
            rows.append((f"row sum {shape[0]}x{shape[1]} float32", median_ms(lambda k, ms=ms: ROWSUM(ms[k], axis=1), sets, repeat),
                         median_ms(lambda k, ms=ms: ms[k].sum(axis=1), sets, repeat), "x.sum(axis=1)"))  # fmt: skip
        m = 10**6
        cx = [rng.random(m, dtype=np.float32) for _ in range(sets)]
        cy = np.empty(m, np.float32)
        size = np.uint32(m)
        rows.append(("jit grid-stride copy 1e6 float32, 128x1024", median_ms(lambda k: grid_stride_copy((128,), (1024,), (cx[k], cy, size)), sets, repeat),
                     median_ms(lambda k: np.copyto(cy, cx[k]), sets, repeat), "np.copyto"))  # fmt: skip

    with tempfile.TemporaryDirectory() as cache:
        cold = first_call_ms(cache)  # also builds the precompiled host prelude, once per cache directory
        warm_runs = [first_call_ms(cache) for _ in range(5)]
        warm = {key: statistics.median(r[key] for r in warm_runs) for key in cold}
    from kspec.compiler import host_compiler

    print(f"kspec CPU device: {kspec.get_device(-1).name}; host compiler {' '.join(host_compiler().command)}; "
          f"NumPy {np.__version__}; medians of {repeat}")  # fmt: skip
    print(f"{'what':48} {'kspec ms':>10} {'NumPy ms':>10} {'ratio':>7}  NumPy call")
    for what, ours, theirs, call in rows:
        print(f"{what:48} {ours:10.2f} {theirs:10.2f} {ours / theirs:7.2f}  {call}")
    for label, run in (("empty cache", cold), ("warm cache", warm)):
        print(f"new process, {label}: first call {run['first']:.1f} ms, a second kernel's first call {run['second']:.1f} ms "
              f"(import numpy + kspec {run['import']:.1f} ms, ElementwiseKernel(...) {run['construct']:.1f} ms)")


if __name__ == "__main__":
    main()
