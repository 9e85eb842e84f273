"""kspec's own complex<T> (templates/include/kspec/complex.cuh + complex_math.cuh), which replaced CCCL's
cuda::std::complex (a kernel including it compiled in ~1.6 s with NVRTC; with this one ~0.045 s):

- no header on the complex path includes CCCL / libcu++ (<cuda/std/...>) or thrust;
- every operator and function compiles with NVRTC for float and double, mixed precisions and scalars included;
- on kspec's CPU device (and a GPU where there is one) every function matches NumPy over a grid of complex
  numbers with special values (+-0, +-inf, NaN), subnormal and near-overflow parts and points on and beside the
  branch cuts: NaN and infinite parts where NumPy has them, the rest within rtol (1e-6 complex64, 1e-12
  complex128) of NumPy's complex128 result, and signed zeros where NumPy's result is a zero beside a number.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np
import pytest

import kspec
from kspec.compiler import CompileOptions, compile_source

INCLUDE = Path(__file__).resolve().parents[2] / "templates" / "include"
COMPLEX_HEADERS = ["kspec/complex.cuh", "cupy/complex.cuh", "cupy/cuComplex_bridge.h", "kspec/cucomplex_compat.cuh",
                   "kspec/ufunc.cuh"]

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's reference warns on inf / NaN


def _include_graph(header: str) -> set[str]:
    """Every header ``header`` includes, transitively; those outside templates/include as named."""
    seen: set[str] = set()
    todo = [header]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = INCLUDE / name
        if path.is_file():
            todo += re.findall(r'(?m)^\s*#\s*include\s*[<"]([^>"]+)[>"]', path.read_text())
    return seen


@pytest.mark.parametrize("header", COMPLEX_HEADERS)
def test_complex_path_includes_no_cccl(header: str) -> None:
    graph = _include_graph(header)
    assert "kspec/complex_math.cuh" in graph or header == "kspec/ufunc.cuh"
    heavy = sorted(h for h in graph if h.startswith(("cuda/", "thrust/", "cub/", "nv/")) or h == "complex")
    assert not heavy, f"{header} includes {heavy}"


OPERATIONS = r"""
#define KSPEC_NEED_COMPLEX 1
#include <kspec/types.cuh>
template <class T>
__device__ void all_ops(complex<T>* out, const complex<T>* in, const T* r, int i) {
  const complex<T> z = in[i], w = in[i + 1];
  const T s = r[i];
  int k = 0;
  complex<T> a = z + w, b = z - w, c = z * w, d = z / w;
  a += w; b -= w; c *= w; d /= w; a += s; b -= 2; c *= 0.5f; d /= s; a += 1.0; c *= 3;
  a = +a; b = -b; a = s; b = 3;
  out[k++] = a + s + (s + a) + (a - s) + (s - a) + a * s + s * a + a / s + s / a + a * 2 + 2 * a + a / 2 + 2 / a;
  out[k++] = complex<T>(z == w, z != w) + complex<T>(z == s, s == z) + complex<T>(z != s, s != z) + complex<T>(z == 1, 1 != z);
  out[k++] = complex<T>(real(z), imag(z)) + complex<T>(abs(z), arg(z)) + complex<T>(norm(z), T(0));
  out[k++] = conj(z) + proj(z) + polar(s, s) + polar(s);
  out[k++] = exp(z) + log(z) + log10(z) + sqrt(z);
  out[k++] = pow(z, w) + pow(z, s) + pow(s, z) + pow(z, 2) + pow(2, z);
  out[k++] = sin(z) + cos(z) + tan(z) + asin(z) + acos(z) + atan(z);
  out[k++] = sinh(z) + cosh(z) + tanh(z) + asinh(z) + acosh(z) + atanh(z);
  out[k++] = thrust::exp(z) + thrust::pow(z, w) + thrust::complex<T>(1, 2) + thrust::conj(z) + thrust::abs(z);
  complex<T> e(z);
  e.real(s);
  e.imag(s);
  out[k++] = e + complex<T>(e.real(), e.imag());
}
extern "C" __global__ void ops_f(complex<float>* out, const complex<float>* in, const float* r) {
  all_ops(out, in, r, threadIdx.x);
}
extern "C" __global__ void ops_d(complex<double>* out, const complex<double>* in, const double* r) {
  all_ops(out, in, r, threadIdx.x);
}
// Mixed precisions and scalars promote to the common type (thrust's rule); narrowing converts implicitly.
extern "C" __global__ void mixed(complex<double>* out, const complex<float>* f, const complex<double>* d) {
  const complex<float> x = f[0];
  const complex<double> y = d[0];
  complex<double> a = x + y, b = y * x, c = x / y, e = x * 0.5, g = 2.0 * x, h = pow(x, y), p = pow(x, 2.5);
  complex<double> q = pow(2.5, x), t = x - 1.0;
  complex<float> m = x * 2, n = 3 - x, o = x / 2u, u = pow(x, 2), v = x + 1.5f;
  complex<float> narrowed = y;
  narrowed += y;
  out[0] = a + b + c + e + g + h + p + q + t + m + n + o + u + v + narrowed + complex<double>(x == y, x != 1.0);
}
template <class A, class B> struct same { static const bool value = false; };
template <class A> struct same<A, A> { static const bool value = true; };
static_assert(same<decltype(complex<float>() * 2), complex<float>>::value, "complex<float> * int");
static_assert(same<decltype(complex<float>() * 0.5), complex<double>>::value, "complex<float> * double");
static_assert(same<decltype(complex<float>() + complex<double>()), complex<double>>::value, "mixed precision");
static_assert(same<decltype(pow(complex<float>(), 2)), complex<float>>::value, "pow with an int exponent");
static_assert(same<complex<float>::value_type, float>::value, "value_type");
static_assert(sizeof(complex<float>) == 8 && alignof(complex<float>) == 8, "complex64 layout");
static_assert(sizeof(complex<double>) == 16 && alignof(complex<double>) == 16, "complex128 layout");
"""


def test_every_operator_and_function_compiles_with_nvrtc() -> None:
    program = compile_source(OPERATIONS, name="complex_ops", options=CompileOptions(arch="sm_90"))
    assert program.binary
    # CuPy passes -std=c++11; the header keeps to it (PTX only: the same front end, no ptxas)
    compile_source(OPERATIONS, name="complex_ops11", options=CompileOptions(arch="compute_90", std="c++11"))


def test_trivial_complex_kernel_compiles_fast() -> None:
    source = ("#define KSPEC_NEED_COMPLEX 1\n#include <kspec/types.cuh>\n"
              'extern "C" __global__ void sq(complex<float>* x) { x[threadIdx.x] = x[threadIdx.x] * x[threadIdx.x]; }\n')
    options = CompileOptions(arch="sm_90")
    compile_source(source, name="warm", options=options)
    start = time.perf_counter()
    compile_source(source, name="sq", options=options)
    # ~0.045 s here; with <cuda/std/complex> ~1.6 s. Generous against a loaded machine.
    assert time.perf_counter() - start < 1.0


# --- values against NumPy ------------------------------------------------------------------------------------

# (C++ expression of z, NumPy function of a complex128 array); kernel output k holds entry k.
UNARY = [
    ("sqrt(v)", np.sqrt), ("exp(v)", np.exp), ("log(v)", np.log), ("log10(v)", np.log10),
    ("sin(v)", np.sin), ("cos(v)", np.cos), ("tan(v)", np.tan),
    ("asin(v)", np.arcsin), ("acos(v)", np.arccos), ("atan(v)", np.arctan),
    ("sinh(v)", np.sinh), ("cosh(v)", np.cosh), ("tanh(v)", np.tanh),
    ("asinh(v)", np.arcsinh), ("acosh(v)", np.arccosh), ("atanh(v)", np.arctanh),
    ("conj(v)", np.conj), ("complex<T>(abs(v), arg(v))", lambda z: _cx(np.abs(z), np.angle(z))),
    ("complex<T>(real(v), imag(v))", lambda z: z),
    ("v * w", None), ("v / w", None), ("w / v", None), ("v * v.real()", None), ("v.real() / v", None),
]

VALUES = r"""
#include <kspec/complex.cuh>
template <class T>
__global__ void values(const complex<T>* z, const complex<T>* zw, complex<T>* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const complex<T> v = z[i], w = zw[i];
  int k = 0;
%s
}
"""
SOURCE = VALUES % "\n".join(f"  out[k++ * n + i] = {expr};" for expr, _ in UNARY)


def _cx(re: np.ndarray, im: np.ndarray) -> np.ndarray:
    """re + i im without arithmetic (1j * inf would make the real part NaN)."""
    out = np.empty(np.shape(re), np.complex128)
    out.real, out.imag = re, im
    return out


def _magnitudes(dtype: type) -> np.ndarray:
    """Magnitudes that reach every branch of the header: subnormal, tiny, the thresholds, near overflow."""
    fi = np.finfo(np.float32 if dtype == np.complex64 else np.float64)
    single = dtype == np.complex64
    m = [0.0, fi.smallest_subnormal, 7 * fi.smallest_subnormal, fi.tiny, 3.7 * fi.tiny, 1e-30 if single else 1e-292,
         1e-20, 3e-9, 2e-5, 0.01, 0.3, 0.5, 0.6, 0.8, 1 - fi.eps, 1.0, 1 + fi.eps, 1.3, 2.0, 3.5, 8.9, 9.1, 21.9, 22.1,
         30.0, 87.5 if single else 709.5, 88.9 if single else 710.1, 1e3, 9e3, 1.1e4, 1e8, 2e8, 1e18, 1e19,
         float(np.sqrt(fi.max)), float(fi.max) / 3, float(fi.max), np.inf, np.nan]
    return np.array([v for v in m if v <= fi.max or not np.isfinite(v)], dtype=np.float64)


def _grid(dtype: type) -> np.ndarray:
    m = _magnitudes(dtype)
    parts = np.concatenate([m, -m])
    x, y = np.meshgrid(parts, parts)
    rng = np.random.default_rng(7)
    scale = 10.0 ** rng.uniform(-6, 6, size=(2, 400))
    rand = rng.standard_normal(400) * scale[0] + 1j * rng.standard_normal(400) * scale[1]
    grid = np.concatenate([(x + 1j * y).ravel(), rand])
    return grid.astype(dtype)


def _reference(expr: str, fn, z: np.ndarray, w: np.ndarray, dtype: type) -> np.ndarray:
    zd, wd = z.astype(np.complex128), w.astype(np.complex128)
    if fn is not None:
        ref = fn(zd)
    elif expr == "v * w":
        ref = zd * wd
    elif expr == "v / w":
        ref = zd / wd
    elif expr == "w / v":
        ref = wd / zd
    elif expr == "v * v.real()":
        ref = _cx(zd.real * zd.real, zd.imag * zd.real)  # part by part: no inf * 0 from a zero imaginary part
    else:  # real / complex: Smith's division of (x + 0i)
        ref = zd.real / zd
    if dtype == np.complex128:
        return ref
    # complex64: NumPy's complex128 result rounded, but division as NumPy does it in float (Smith's algorithm
    # step by step: 1 / a subnormal divisor overflows in float as it does in NumPy)
    return {"v / w": z / w, "w / v": w / z, "v.real() / v": z.real / z}.get(expr, ref.astype(dtype))


def _mismatches(got: np.ndarray, want: np.ndarray, rtol: float, signs: bool = True) -> np.ndarray:
    """Where ``got`` is not NumPy's ``want``: NaN and infinite parts must match exactly (signs of infinities too),
    finite results within rtol of |want| (part by part beside an infinite part) or within rtol of the smallest
    normal number (subnormal results carry fewer digits), and with ``signs``, where ``want`` has a zero part
    beside a non-NaN part, its sign (the binary operators leave it out: a product that underflows to zero may
    be -0 or +0 depending on fused multiply-adds, in NumPy's loops and in compiled code alike)."""
    atol = rtol * np.finfo(got.real.dtype).tiny
    bad = np.zeros(got.shape, bool)
    for g, w, other in ((got.real, want.real, want.imag), (got.imag, want.imag, want.real)):
        bad |= np.isnan(g) != np.isnan(w)
        bad |= (np.isinf(g) | np.isinf(w)) & (g != w)
        if signs:
            bad |= (w == 0) & ~np.isnan(other) & (np.signbit(g) != np.signbit(w))
        part_only = np.isfinite(w) & ~np.isfinite(other)
        bad |= part_only & (np.abs(g - w) > rtol * np.abs(w) + atol)
    finite = np.isfinite(want.real) & np.isfinite(want.imag)
    with np.errstate(all="ignore"):
        err = np.abs(got.astype(np.complex128) - want)
    bad |= finite & ~(err <= rtol * np.abs(want) + atol)
    return bad


@pytest.mark.parametrize("dtype, rtol", [(np.complex64, 1e-6), (np.complex128, 1e-12)])
def test_functions_match_numpy(xp, dtype: type, rtol: float) -> None:
    z = _grid(dtype)
    w = np.roll(z[::-1], 3)  # the other operand of the binary operators: every kind of value against every kind
    n = len(z)
    name = f"values<{'float' if dtype == np.complex64 else 'double'}>"
    kernel = kspec.RawModule(code=SOURCE, name_expressions=[name]).get_function(name)
    out = xp.zeros(len(UNARY) * n, dtype)
    kernel(((n + 127) // 128,), (128,), (xp.asarray(z), xp.asarray(w), out, np.int32(n)))
    got = xp.asnumpy(out).reshape(len(UNARY), n)
    failures = []
    for k, (expr, fn) in enumerate(UNARY):
        want = _reference(expr, fn, z, w, dtype)
        bad = _mismatches(got[k], want, rtol, signs=fn is not None)
        if bad.any():
            idx = np.flatnonzero(bad)[:4]
            failures.append(f"{expr}: {bad.sum()} of {n}, e.g. " + "; ".join(
                f"z={z[i]!r} w={w[i]!r} got {got[k][i]!r} want {want[i]!r}" for i in idx))
    assert not failures, "\n".join(failures)


def test_pow_and_polar_match_numpy(xp) -> None:
    """pow with a complex, real and integer exponent, a real base, and polar, on finite moderate values."""
    rng = np.random.default_rng(11)
    n = 256
    z = (rng.standard_normal(n) * 3 + 1j * rng.standard_normal(n) * 3).astype(np.complex128)
    w = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex128)
    r = rng.uniform(0.1, 4, n)
    source = r"""
#include <kspec/complex.cuh>
extern "C" __global__ void powers(const complex<double>* z, const complex<double>* w, const double* r,
                                  complex<double>* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = pow(z[i], w[i]);
  out[n + i] = pow(z[i], r[i]);
  out[2 * n + i] = pow(r[i], z[i]);
  out[3 * n + i] = pow(complex<float>(z[i]), 3);  // complex<float>, widened on the store
  out[4 * n + i] = polar(r[i], w[i].real());
}
"""
    kernel = kspec.RawKernel(source, "powers")
    out = xp.zeros(5 * n, np.complex128)
    kernel((2,), (128,), (xp.asarray(z), xp.asarray(w), xp.asarray(r), out, np.int32(n)))
    got = xp.asnumpy(out).reshape(5, n)
    np.testing.assert_allclose(got[0], z ** w, rtol=1e-12)
    np.testing.assert_allclose(got[1], z ** r, rtol=1e-12)
    np.testing.assert_allclose(got[2], r ** z, rtol=1e-12)
    np.testing.assert_allclose(got[3], z.astype(np.complex64) ** 3, rtol=1e-5)
    np.testing.assert_allclose(got[4], r * np.exp(1j * w.real), rtol=1e-12)


def test_elementwise_kernel_on_complex_branch_cuts(xp) -> None:
    """An ElementwiseKernel (CuPy's environment includes the complex header): arcsin / arccos / arctanh / sqrt
    on both sides of their cuts (signed zero imaginary parts), plus mixed arithmetic."""
    x = np.array([2.0, -2.0, 1.5, -3.0, 0.5, 1.0, -1.0, 1e10])
    z = np.array([complex(v, zero) for zero in (0.0, -0.0) for v in x])
    kernel = kspec.ElementwiseKernel(
        "complex128 z", "complex128 a, complex128 b, complex128 c, complex128 d, complex64 e",
        "a = asin(z); b = acos(z); c = atanh(z); d = sqrt(z); e = complex<float>(z) * 2 + 1.5f",
        "complex_cuts",
    )
    a, b, c, d, e = (xp.asnumpy(v) for v in kernel(xp.asarray(z)))
    for got, want in ((a, np.arcsin(z)), (b, np.arccos(z)), (d, np.sqrt(z))):
        assert not _mismatches(got, want, 1e-12).any(), (got, want)
    np.testing.assert_allclose(c, np.arctanh(z), rtol=1e-12)
    np.testing.assert_allclose(e, z.astype(np.complex64) * 2 + 1.5, rtol=1e-6)


def test_complex_scalar_arguments(xp) -> None:
    """complex<double> scalars (16-byte aligned) after 4- and 8-byte arguments, complex<float> (8) after them:
    the CPU device's 8-byte parameter slots put some at odd multiples of 8 (kspec_host/entry.h copies them)."""
    source = r"""
#include <kspec/complex.cuh>
extern "C" __global__ void scalars(int a, complex<double> b, int c, complex<double> d, complex<float> e, float f,
                                   complex<double> g, complex<double>* out) {
  out[threadIdx.x] = b * a + d * c + e * f + g;
}
"""
    out = xp.zeros(4, np.complex128)
    kspec.RawKernel(source, "scalars")((1,), (4,), (
        np.int32(2), np.complex128(1 + 1j), np.int32(3), np.complex128(2 - 1j), np.complex64(0.5j), np.float32(4),
        np.complex128(-1e300 + 1e-300j), out))
    np.testing.assert_array_equal(xp.asnumpy(out), np.full(4, (2 + 2j) + (6 - 3j) + 2j + (-1e300 + 1e-300j)))
