"""kspec.jit vs cupyx.jit, same kernels, same run (GPU machine): ``python3 benchmarks/kernels/jit_bench.py``.

Rows: (1) a grid-stride copy (its bound ``size`` as uint32, int32, int64 and uint64) and a saxpy over 2^28 float32 as fractions of the device-to-device copy
bandwidth measured in the same run (bytes read + written; CUDA events; warm-up; median of 15 runs rotating
over two input sets); (2) host cost per launch on tiny arrays (jit vs cupyx.jit vs a kspec RawKernel of the
same C++ signature); (3) the first call of a new signature (trace + translate + compile + load) with an
empty compile cache, for both libraries. Prints a table; writes JSON to ``$OUT/jit_bench.json`` if set.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

_TMP = tempfile.mkdtemp(prefix="jit-bench-")
os.environ["KSPEC_CACHE_DIR"] = os.path.join(_TMP, "kspec-cache")  # cold compiles for row (3)
os.environ["CUPY_CACHE_DIR"] = os.path.join(_TMP, "cupy-cache")

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

import kspec  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))  # benchmarks/helpers: the _*.py modules
import _jit_kernels  # noqa: E402

KS, CU = _jit_kernels.load("kspec", _TMP), _jit_kernels.load("cupyx", _TMP)


def median_ms(launch, rotate, reps=15):
    """Median device time of ``launch(data)`` over ``reps`` runs, rotating over input sets."""
    for data in rotate:  # warm-up: compile, load, first touch
        launch(data)
    cp.cuda.Device().synchronize()
    times = []
    for r in range(reps):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        data = rotate[r % len(rotate)]
        start.record()
        launch(data)
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    return float(np.median(times))


def host_us(call, n=20000):
    for _ in range(500):
        call()
    cp.cuda.Device().synchronize()
    runs = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            call()
        cp.cuda.Device().synchronize()
        runs.append((time.perf_counter() - t) / n * 1e6)
    return float(np.median(runs))


def main() -> None:
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    name, sms = props["name"].decode(), props["multiProcessorCount"]
    n = 1 << 28
    nbytes = n * 4
    sets = [(cp.random.standard_normal(n, dtype=cp.float32), cp.random.standard_normal(n, dtype=cp.float32)) for _ in range(2)]
    out = cp.empty(n, cp.float32)
    size = np.uint32(n)
    grid, block = sms * 64, 256  # grid-stride: 64 blocks of 256 per SM (8 waves), every kernel the same launch

    copy_ms = median_ms(lambda d: out.data.copy_from_device_async(d[0].data, nbytes), sets)
    copy_gbs = 2 * nbytes / copy_ms / 1e6
    results = {"device": name, "n": n, "grid": grid, "block": block, "copy_GBps": copy_gbs, "rows": {}}
    a = np.float32(2.5)
    kcopy, ccopy = KS.fresh(KS.copy), CU.fresh(CU.copy)
    ksaxpy, csaxpy = KS.fresh(KS.saxpy), CU.fresh(CU.saxpy)
    bench = {}
    for bound in (np.uint32, np.int32, np.int64, np.uint64):  # the loop bound's type decides how NVCC sees it
        bsize = bound(n)
        for lib, k in (("kspec", kcopy), ("cupyx.jit", ccopy)):
            bench[f"jit copy {bound.__name__} ({lib})"] = ((lambda d, k=k, bsize=bsize: k((grid,), (block,), (d[0], out, bsize))), 2)
    bench |= {
        "jit saxpy (kspec)": (lambda d: ksaxpy((grid,), (block,), (a, d[0], d[1], out, size)), 3),
        "jit saxpy (cupyx.jit)": (lambda d: csaxpy((grid,), (block,), (a, d[0], d[1], out, size)), 3),
    }
    for label, (launch, passes) in bench.items():
        ms = median_ms(launch, sets)
        results["rows"][label] = {"ms": ms, "GBps": passes * nbytes / ms / 1e6, "of_copy": passes * nbytes / ms / 1e6 / copy_gbs}
    expected = sets[1][0] * a + sets[1][1]
    ksaxpy((grid,), (block,), (a, sets[1][0], sets[1][1], out, size))
    # rtol/atol allow the FMA NVRTC contracts a * x + y into (CuPy's two kernels round twice)
    assert bool(cp.allclose(out, expected, rtol=1e-5, atol=1e-5)), "kspec jit saxpy is wrong"
    for bound in (np.uint32, np.int32, np.int64, np.uint64):
        out.fill(np.nan)  # poisoned: every element must be written
        kcopy((grid,), (block,), (sets[0][0], out, bound(n)))
        assert bool((out == sets[0][0]).all()), f"kspec jit copy with a {bound.__name__} bound is wrong"
    sets = out = expected = None  # free the 2^28-element arrays (not del: the lambdas above close over out)

    # host cost per launch, tiny arrays
    tx, ty = cp.ones(256, cp.float32), cp.empty(256, cp.float32)
    tsize = np.uint32(256)
    raw = kspec.RawKernel(
        'extern "C" __global__ void copy(const float* x, float* y, unsigned int n) {'
        " for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = x[i]; }",
        "copy",
    )
    host = {
        "kspec.jit": host_us(lambda: kcopy((1,), (256,), (tx, ty, tsize))),
        "kspec.jit k[g, b](...)": host_us(lambda: kcopy[1, 256](tx, ty, tsize)),
        "cupyx.jit": host_us(lambda: ccopy((1,), (256,), (tx, ty, tsize))),
        "kspec RawKernel": host_us(lambda: raw((1,), (256,), (tx, ty, tsize))),
    }
    results["host_us"] = host

    # first call of a new signature, cold compile cache (both libraries), median over three dtypes
    first = {"kspec.jit": [], "cupyx.jit": []}
    for dtype in (np.float64, np.int32, np.int16):
        for label, mod in (("kspec.jit", KS), ("cupyx.jit", CU)):
            k = mod.fresh(mod.copy)
            x1, y1 = cp.ones(256, dtype), cp.empty(256, dtype)
            cp.cuda.Device().synchronize()
            t = time.perf_counter()
            k((1,), (256,), (x1, y1, np.uint32(256)))
            cp.cuda.Device().synchronize()
            first[label].append((time.perf_counter() - t) * 1e3)
    results["first_call_ms"] = {k: float(np.median(v)) for k, v in first.items()}
    results["first_call_ms_all"] = first

    print(f"device: {name} ({sms} SMs); 2^28 float32; grid={grid} block={block}; D2D copy {copy_gbs:.0f} GB/s")
    print(f"{'row':34s} {'ms':>8s} {'GB/s':>8s} {'of copy':>8s}")
    for label, r in results["rows"].items():
        print(f"{label:34s} {r['ms']:8.3f} {r['GBps']:8.0f} {r['of_copy']:8.3f}")
    print(f"{'host cost per launch':28s} {'us':>8s}")
    for label, us in host.items():
        print(f"{label:28s} {us:8.2f}")
    print(f"{'first call, new signature':28s} {'ms':>8s}")
    for label, ms in results["first_call_ms"].items():
        print(f"{label:28s} {ms:8.1f}")
    out_dir = os.environ.get("OUT")
    if out_dir:
        Path(out_dir, "jit_bench.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
