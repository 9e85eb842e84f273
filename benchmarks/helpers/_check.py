"""Data for the benchmark cases and the check of kspec's results against CuPy's (benchmarks/kernels/bench.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

# Relative / absolute tolerance of kspec against CuPy, compared in float32 (float64 for float64).
# 16-bit floats: each of (x - y) and the product is rounded to 8 (bf16) or 11 (f16) bits, and the two
# libraries may round the difference differently (native 16-bit op against float then round).
ELEMENTWISE_TOL = {"float16": (2e-2, 1e-4), "bfloat16": (2e-2, 1e-4), "float32": (1e-5, 1e-6), "float64": (1e-12, 1e-14)}
# Float32 sums of up to 2**28 positive terms: both libraries sum in trees of different shape.
REDUCTION_TOL = (1e-3, 1e-5)


@dataclass
class Check:
    ok: bool
    detail: str


def np_dtype(name: str) -> Any:
    """The NumPy dtype of a name; bfloat16 through ml_dtypes (what CuPy 14 and kspec both use)."""
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def randn(shape: Any, dtype: str) -> Any:
    """Fresh standard-normal CuPy data in any float dtype (drawn in float32 for the 16-bit ones)."""
    import cupy as cp

    dt = np_dtype(dtype)
    if dt in (np.float32, np.float64):
        return cp.random.standard_normal(shape, dtype=dt)
    return cp.random.standard_normal(shape, dtype=np.float32).astype(dt)


def poison(a: Any) -> None:
    """Fill an output with NaN (a CuPy array or a torch tensor), so an element nobody writes fails the check."""
    if hasattr(a, "fill_"):  # torch
        a.fill_(float("nan"))
        return
    try:
        a.fill(float("nan"))
    except Exception:  # a CuPy without NaN fill for bfloat16: write the bit pattern of a quiet NaN
        bits = {2: (np.uint16, 0x7FC0 if np.dtype(a.dtype).name == "bfloat16" else 0x7E00),
                4: (np.uint32, 0x7FC00000), 8: (np.uint64, 0x7FF8000000000000)}
        view_type, pattern = bits[np.dtype(a.dtype).itemsize]
        a.view(view_type).fill(pattern)


def compare(got: Any, ref: Any, rtol: float, atol: float) -> Check:
    """|got - ref| <= atol + rtol |ref| everywhere (NaN fails), on CuPy arrays, in float32 (float64 if ref is)."""
    import cupy as cp

    if tuple(got.shape) != tuple(ref.shape):
        return Check(False, f"shape {tuple(got.shape)} != CuPy's {tuple(ref.shape)}")
    wide = np.float64 if np.dtype(ref.dtype) == np.float64 else np.float32
    g = got.astype(wide, copy=False)
    r = ref.astype(wide, copy=False)
    diff = cp.abs(g - r)
    bad = int(cp.count_nonzero(~(diff <= atol + rtol * cp.abs(r))))
    norm = float(cp.linalg.norm(r.ravel()))
    rel = float(cp.linalg.norm(diff.ravel())) / norm if norm else float(cp.max(diff))
    detail = f"{bad} of {g.size} outside tol, ||d||/||ref|| = {rel:.2e}" if bad else f"||d||/||ref|| = {rel:.2e}"
    return Check(bad == 0, detail)


def check_elementwise(kspec_call: Callable[[], object], z_kspec: Any, cupy_call: Callable[[], object], z_cupy: Any,
                      dtype: str) -> Check:
    """Poison both outputs, run both kernels, compare kspec's output with CuPy's."""
    poison(z_kspec)
    poison(z_cupy)
    kspec_call()
    cupy_call()
    return compare(z_kspec, z_cupy, *ELEMENTWISE_TOL[dtype])
