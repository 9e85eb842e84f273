"""Issue 52: what CuPy's <cupy/complex.cuh> adds on complex<T>, which cupyx.scipy's k-d tree relies on (it sorts
complex points): NumPy's ordering (operators < <= > >=, with a real of the value type too), NaN-propagating
min / max, isnan / isinf / isfinite, log1p / log2 / expm1, rint. Compiled with NVRTC for sm_90 (no GPU) and run
on both devices (``xp``: kspec's CPU device here, a GPU where there is one) against NumPy; and the same names
in an ElementwiseKernel, whose CuPy environment includes the header whenever complex is needed.
"""

from __future__ import annotations

import numpy as np
import pytest

import kspec

# NumPy warns comparing the NaN pairs it is asked about; those results are masked out
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")

ORDERING = r"""
#include <cupy/complex.cuh>
template <typename T>
__global__ void order(const complex<T>* a, const complex<T>* b, int* flags, complex<T>* lo, complex<T>* hi, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  flags[4 * i + 0] = a[i] < b[i];
  flags[4 * i + 1] = a[i] <= b[i];
  flags[4 * i + 2] = a[i] > b[i];
  flags[4 * i + 3] = (a[i] >= b[i]) + 2 * (a[i].real() > b[i]) + 4 * isnan(a[i]) + 8 * isfinite(b[i]);
  lo[i] = min(a[i], b[i]);
  hi[i] = max(a[i], b[i]);
}
"""
NAMES = ["order<float>", "order<double>"]


def _pairs(dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """Complex pairs that tie on the real part, tie whole, and hold a NaN."""
    re = np.array([1, 1, 1, 2, -3, 0, np.nan, 5], dtype=np.float64)
    a = (re + 1j * np.array([2, 2, 1, 0, 4, -1, 0, 1])).astype(dtype)
    b = (np.array([1, 1, 1, 1, -3, 0, 0, np.nan]) + 1j * np.array([3, 2, 0, 9, 4, -2, 0, 0])).astype(dtype)
    return a, b


def test_complex_additions_compile_for_sm_90() -> None:
    kspec.RawModule(code=ORDERING, name_expressions=NAMES).compile(arch="sm_90")


@pytest.mark.parametrize("dtype, name", [(np.complex64, NAMES[0]), (np.complex128, NAMES[1])])
def test_complex_ordering_and_min_max_follow_numpy(xp, dtype: type, name: str) -> None:
    a, b = _pairs(dtype)
    n = len(a)
    flags = xp.zeros(4 * n, np.int32)
    lo, hi = xp.zeros(n, dtype), xp.zeros(n, dtype)
    kernel = kspec.RawModule(code=ORDERING, name_expressions=NAMES).get_function(name)
    kernel((1,), (32,), (xp.asarray(a), xp.asarray(b), flags, lo, hi, np.int32(n)))
    got = xp.asnumpy(flags).reshape(n, 4)
    ok = ~(np.isnan(a) | np.isnan(b))
    # NumPy orders complex numbers by real part, then imaginary part
    np.testing.assert_array_equal(got[ok, 0], (a < b)[ok])
    np.testing.assert_array_equal(got[ok, 1], (a <= b)[ok])
    np.testing.assert_array_equal(got[ok, 2], (a > b)[ok])
    np.testing.assert_array_equal(got[ok, 3] & 1, (a >= b)[ok])
    np.testing.assert_array_equal((got[:, 3] >> 2) & 1, np.isnan(a))
    np.testing.assert_array_equal((got[:, 3] >> 3) & 1, np.isfinite(b))
    # a NaN argument loses to the other one; otherwise the smaller / larger in NumPy's order
    expect_lo = np.where(np.isnan(a), b, np.where(np.isnan(b), a, np.where(b < a, b, a)))
    expect_hi = np.where(np.isnan(a), b, np.where(np.isnan(b), a, np.where(a < b, b, a)))
    np.testing.assert_array_equal(xp.asnumpy(lo), expect_lo)
    np.testing.assert_array_equal(xp.asnumpy(hi), expect_hi)


def test_constructor_kernels_see_cupy_complex_names(xp) -> None:
    """An ElementwiseKernel on complex operands gets CuPy's complex header implicitly, as CuPy prepends it."""
    kernel = kspec.ElementwiseKernel(
        "T x, T y", "T lo, T hi, bool gt",
        "lo = min(x, y); hi = max(x, y) + rint(x) * 0 + expm1(x) * 0; gt = x > y && !isnan(x)",
        "cupy_complex_names",
    )
    a, b = _pairs(np.complex128)
    lo, hi, gt = kernel(xp.asarray(a), xp.asarray(b))
    ok = ~(np.isnan(a) | np.isnan(b))
    np.testing.assert_array_equal(xp.asnumpy(gt)[ok], (a > b)[ok])
    np.testing.assert_array_equal(xp.asnumpy(lo)[ok], np.where(b < a, b, a)[ok])
    np.testing.assert_array_equal(xp.asnumpy(hi)[ok], np.where(a < b, b, a)[ok])
