"""Host cost per call of ElementwiseKernel / ReductionKernel on 1-element arrays, next to CuPy in the same run.

Run on the GPU machine: ``python3 benchmarks/host_cost.py``. Prints a table (median of 7 x 20000 calls after
warm-up; the device is synchronised at the end of each batch, so the figure is the host cost per call).
"""

import time, numpy as np, cupy as cp, kspec
def per_call(f, n=20000):
    for _ in range(200): f()
    cp.cuda.Device().synchronize()
    best = []
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(n): f()
        cp.cuda.Device().synchronize()
        best.append((time.perf_counter() - t) / n * 1e6)
    return float(np.median(best))
x = cp.ones(1, np.float32); y = cp.ones(1, np.float32); z = cp.empty(1, np.float32)
kk = kspec.ElementwiseKernel('float32 x, float32 y', 'float32 z', 'z = (x - y) * (x - y)', 'sqd')
ck = cp.ElementwiseKernel('float32 x, float32 y', 'float32 z', 'z = (x - y) * (x - y)', 'sqd')
kr = kspec.ReductionKernel('T x', 'T y', 'x * x', 'a + b', 'y = a', '0', 'ssq')
cr = cp.ReductionKernel('T x', 'T y', 'x * x', 'a + b', 'y = a', '0', 'ssq')
rows = []
for label, kf, cf in [
    ("elementwise, out given", lambda: kk(x, y, z), lambda: ck(x, y, z)),
    ("elementwise, allocating", lambda: kk(x, y), lambda: ck(x, y)),
    ("elementwise, scalar", lambda: kk(x, 2.0, z), lambda: ck(x, 2.0, z)),
    ("reduction", lambda: kr(x), lambda: cr(x)),
]:
    a, b = per_call(kf), per_call(cf)
    rows.append((label, a, b))
print(f"{'call':28s} {'kspec us':>9s} {'CuPy us':>9s} {'ratio':>6s}")
for label, a, b in rows:
    print(f"{label:28s} {a:9.2f} {b:9.2f} {a/b:6.2f}")
