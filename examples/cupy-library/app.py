"""A program written for CuPy: a few cupyx.scipy functions, each first call timed (the first call of a fresh process
is where NVRTC compiles a kernel that no cache holds)."""

import time

import cupy
import cupyx.scipy.ndimage as ndi
import cupyx.scipy.signal as signal

rng = cupy.random.default_rng(0)
image = rng.standard_normal((1024, 1024), dtype=cupy.float32)
trace = rng.standard_normal(1_000_000, dtype=cupy.float64)
calls = {
    "ndimage.uniform_filter": lambda: ndi.uniform_filter(image, size=5),
    "ndimage.gaussian_filter": lambda: ndi.gaussian_filter(image, 3.0),
    "ndimage.zoom": lambda: ndi.zoom(image, 2, order=3),
    "ndimage.sobel": lambda: ndi.sobel(image),
    "signal.convolve": lambda: signal.convolve(trace, trace[:1001], method="direct"),
    "signal.lfilter": lambda: signal.lfilter(cupy.asarray([0.2, 0.3, 0.1]), cupy.asarray([1.0, -0.5, 0.2]), trace),
}
for name, call in calls.items():
    cupy.cuda.Device().synchronize()
    start = time.perf_counter()
    out = call()
    cupy.cuda.Device().synchronize()
    print(f"{name:26s} first call {1e3 * (time.perf_counter() - start):9.1f} ms   checksum {float(out.sum()):.6g}")
