"""The CPU device's CUDA types and math (templates/include_host): float16/bfloat16 conversions and
arithmetic bit for bit against NumPy and an exact reference, CUDA's math and integer intrinsics, the
complex mapping and kspec's mixed-precision complex operators, and kspec's device headers
compiling under the host prelude. CPU only: every test builds with the host C++ compiler."""

from __future__ import annotations

import ctypes
import math
from fractions import Fraction

import numpy as np
import pytest

from helpers.exact_rounding import BF16, HALF, RD, RN, RU, RZ, Format, round_exact
from helpers.host_build import load, requires_host_cxx

# NaN and out-of-range patterns go through NumPy casts on purpose (the reference handles them)
pytestmark = [requires_host_cxx, pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")]

def half_bits(values: list[float]) -> np.ndarray:
    return np.array(values, dtype=np.float64).astype(np.float16).view(np.uint16)


def bf16_bits(values: list[float]) -> np.ndarray:
    # every value is already a bfloat16, so the float32 conversion is exact and the top half is the pattern
    return (np.array(values, dtype=np.float64).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def bf16_to_float(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


ALL16 = np.arange(65536, dtype=np.uint32).astype(np.uint16)


def f32_samples(seed: int, n: int = 20000, limit: int | None = None) -> np.ndarray:
    """Random float32 bit patterns plus the edge cases of both 16-bit formats (ties, subnormals, overflow)."""
    rng = np.random.default_rng(seed)
    rand = rng.integers(0, 2 ** 32, size=n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    small = (rng.standard_normal(n) * 10.0 ** rng.integers(-9, 6, n)).astype(np.float32)
    halves = ALL16.view(np.float16).astype(np.float32)
    with np.errstate(invalid="ignore"):
        mid = (halves.astype(np.float64)[:-1] + halves.astype(np.float64)[1:]) / 2  # ties between neighbours
    mid = mid[np.isfinite(mid)].astype(np.float32)
    edges = np.array([0.0, -0.0, 65504.0, 65519.99, 65520.0, -65520.0, 2.0 ** -24, 2.0 ** -25, 2.0 ** -25 * 1.0001,
                      3 * 2.0 ** -26, np.inf, -np.inf, 3.4e38, -3.4e38, 1e-45, 2.0 ** -133, 2.0 ** -134,
                      3.3961e38, 3.3962e38], dtype=np.float32)
    every = np.concatenate([rand, small, halves, mid, np.nextafter(mid, np.float32(np.inf))])
    if limit is not None:
        every = rng.choice(every, limit, replace=False)
    return np.concatenate([every, edges])


def ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


# ------------------------------------------------------------------------------------------------ the module

SOURCE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#define PICK(MODE, FN, X) ((MODE) == 0 ? FN##_rn(X) : (MODE) == 1 ? FN##_rz(X) : (MODE) == 2 ? FN##_rd(X) : FN##_ru(X))
EXPORT void f32_to_f16(const float* in, unsigned short* out, long n, int mode) {
  for (long i = 0; i < n; ++i) out[i] = __half_as_ushort(PICK(mode, __float2half, in[i]));
}
EXPORT void f32_to_bf16(const float* in, unsigned short* out, long n, int mode) {
  for (long i = 0; i < n; ++i) out[i] = __bfloat16_as_ushort(PICK(mode, __float2bfloat16, in[i]));
}
EXPORT void f64_to_f16(const double* in, unsigned short* out, long n, int mode) {
  for (long i = 0; i < n; ++i) out[i] = __half_as_ushort(PICK(mode, __double2half, in[i]));
}
EXPORT void f64_to_bf16(const double* in, unsigned short* out, long n, int mode) {
  for (long i = 0; i < n; ++i) out[i] = __bfloat16_as_ushort(PICK(mode, __double2bfloat16, in[i]));
}
EXPORT void ll_to_16(const long long* in, unsigned short* out, long n, int mode, int bf) {
  for (long i = 0; i < n; ++i)
    out[i] = bf ? __bfloat16_as_ushort(PICK(mode, __ll2bfloat16, in[i])) : __half_as_ushort(PICK(mode, __ll2half, in[i]));
}
EXPORT void implicit(const float* in, const double* ind, const int* ini, unsigned short* out, long n) {
  for (long i = 0; i < n; ++i) {  // constructors and assignment: round to nearest
    __half a = in[i];
    __half b(ind[i]);
    __nv_bfloat16 c = in[i];
    __half d = ini[i];
    out[4 * i] = __half_as_ushort(a);
    out[4 * i + 1] = __half_as_ushort(b);
    out[4 * i + 2] = __bfloat16_as_ushort(c);
    out[4 * i + 3] = __half_as_ushort(d);
  }
}
EXPORT void f16_to_f32(const unsigned short* in, float* out, long n, int bf) {
  for (long i = 0; i < n; ++i) out[i] = bf ? __bfloat162float(__ushort_as_bfloat16(in[i])) : __half2float(__ushort_as_half(in[i]));
}
EXPORT void f16_to_int(const unsigned short* in, long long* out, long n, int mode, int bf) {
  for (long i = 0; i < n; ++i) {
    const __half h = __ushort_as_half(in[i]);
    const __nv_bfloat16 b = __ushort_as_bfloat16(in[i]);
    out[5 * i] = bf ? PICK(mode, __bfloat162int, b) : PICK(mode, __half2int, h);
    out[5 * i + 1] = bf ? PICK(mode, __bfloat162short, b) : PICK(mode, __half2short, h);
    out[5 * i + 2] = bf ? PICK(mode, __bfloat162ushort, b) : PICK(mode, __half2ushort, h);
    out[5 * i + 3] = bf ? (long long)PICK(mode, __bfloat162ull, b) : (long long)PICK(mode, __half2ull, h);
    out[5 * i + 4] = bf ? (int)(signed char)b : (int)(signed char)h;  // implicit: truncate, saturate
  }
}
template <class H>
H apply(int op, H a, H b, H c) {
  switch (op) {
    case 0: return a + b;
    case 1: return a - b;
    case 2: return a * b;
    case 3: return a / b;
    case 4: return __hfma(a, b, c);
    case 5: { H r = a; r += b; r *= c; return r; }
    case 6: return -a;
    case 7: return __hmax(a, b);
    case 8: return __hmin(a, b);
    case 9: return hsqrt(a);
    case 10: return hfloor(a);
    case 11: return hceil(a);
    case 12: return htrunc(a);
    case 13: return hrint(a);
    case 14: return hexp(a);
    case 15: return hlog(a);
    case 16: return hsin(a);
    case 17: return hcos(a);
    default: return __habs(a);
  }
}
EXPORT void arith(const unsigned short* a, const unsigned short* b, const unsigned short* c, unsigned short* out, long n,
                  int op, int bf) {
  for (long i = 0; i < n; ++i)
    out[i] = bf ? __bfloat16_as_ushort(apply(op, __ushort_as_bfloat16(a[i]), __ushort_as_bfloat16(b[i]), __ushort_as_bfloat16(c[i])))
                : __half_as_ushort(apply(op, __ushort_as_half(a[i]), __ushort_as_half(b[i]), __ushort_as_half(c[i])));
}
EXPORT void compare(const unsigned short* a, const unsigned short* b, unsigned char* out, long n) {
  for (long i = 0; i < n; ++i) {
    const __half x = __ushort_as_half(a[i]), y = __ushort_as_half(b[i]);
    out[i] = (x < y) | (x <= y) << 1 | (x == y) << 2 | (x != y) << 3 | (x > y) << 4 | (x >= y) << 5 |
             __hisnan(x) << 6 | (__hisinf(x) != 0) << 7;
  }
}
EXPORT int half2_ops(float* out) {
  half2 p = __floats2half2_rn(1.5f, -2.25f), q = __halves2half2(__float2half(0.5f), __float2half(4.0f));
  half2 s = p + q, m = __hmul2(p, q), f = __hfma2(p, q, s);
  float2 fs = __half22float2(s);
  out[0] = fs.x; out[1] = fs.y; out[2] = __low2float(m); out[3] = __high2float(m);
  out[4] = __low2float(f); out[5] = __high2float(f);
  const half2 lt = __hlt2(p, q);
  out[6] = __low2float(lt) + 2 * __high2float(lt) + 4 * __hblt2(p, q) + 8 * __hbgt2(q, __hneg2(q));
  return sizeof(__half) * 100 + alignof(__half2) * 10 + sizeof(__nv_bfloat162) / 2;
}
"""


@pytest.fixture(scope="module")
def lib() -> ctypes.CDLL:
    return load(SOURCE)


@pytest.fixture(scope="module")
def lib_portable() -> ctypes.CDLL:
    """The same module without F16C, so the portable conversion code runs."""
    return load(SOURCE, ("-mno-f16c",))


def run_to16(lib: ctypes.CDLL, fn: str, values: np.ndarray, mode: int) -> np.ndarray:
    out = np.empty(values.size, np.uint16)
    getattr(lib, fn)(ptr(values), ptr(out), ctypes.c_long(values.size), ctypes.c_int(mode))
    return out


def check_bits(got: np.ndarray, want: np.ndarray, source: np.ndarray, what: str) -> None:
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, f"{what}: {bad.size} mismatches, e.g. " + ", ".join(
        f"{source[i]!r}: got {got[i]:#06x} want {want[i]:#06x}" for i in bad[:5])


def reference_bits(values: np.ndarray, fmt: Format, mode: int) -> np.ndarray:
    """Exact rounding of every finite value; NaN -> CUDA's canonical 0x7fff; inf stays."""
    out: list[float] = []
    for v in values.astype(np.float64).tolist():
        if math.isnan(v):
            out.append(math.nan)
        elif math.isinf(v) or v == 0:
            out.append(v)
        else:
            out.append(round_exact(Fraction(v), fmt, mode))
    with np.errstate(invalid="ignore"):
        bits = half_bits(out) if fmt is HALF else bf16_bits(out)
    bits[np.isnan(values)] = 0x7FFF
    return bits


@pytest.mark.parametrize("flavour", ["native", "portable"])
def test_float_to_half_rounds_to_nearest_even_like_numpy(lib: ctypes.CDLL, lib_portable: ctypes.CDLL, flavour: str) -> None:
    module = lib if flavour == "native" else lib_portable
    x = f32_samples(1)
    got = run_to16(module, "f32_to_f16", x, RN)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).view(np.uint16).copy()
    want[np.isnan(x)] = 0x7FFF  # CUDA's conversions give the canonical NaN; NumPy keeps payload bits
    check_bits(got, want, x, f"float->half ({flavour})")


@pytest.mark.parametrize("flavour", ["native", "portable"])
def test_every_half_and_bfloat16_widens_exactly(lib: ctypes.CDLL, lib_portable: ctypes.CDLL, flavour: str) -> None:
    module = lib if flavour == "native" else lib_portable
    for bf, want in ((0, ALL16.view(np.float16).astype(np.float32)), (1, bf16_to_float(ALL16))):
        out = np.empty(65536, np.float32)
        module.f16_to_f32(ptr(ALL16), ptr(out), ctypes.c_long(65536), ctypes.c_int(bf))
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(out), nan)
        assert np.array_equal(out[~nan].view(np.uint32), want[~nan].view(np.uint32)), f"bf={bf}"


@pytest.mark.parametrize("mode", [RN, RZ, RD, RU])
def test_float_to_half_and_bfloat16_in_every_rounding_mode(lib: ctypes.CDLL, mode: int) -> None:
    x = f32_samples(2, n=4000, limit=12000)
    check_bits(run_to16(lib, "f32_to_f16", x, mode), reference_bits(x, HALF, mode), x, f"__float2half mode {mode}")
    check_bits(run_to16(lib, "f32_to_bf16", x, mode), reference_bits(x, BF16, mode), x, f"__float2bfloat16 mode {mode}")


def test_bfloat16_of_every_float16_tie_and_all_patterns(lib: ctypes.CDLL) -> None:
    # every bfloat16 pattern and the midpoints between neighbours round like the reference
    pats = bf16_to_float(ALL16)
    mids = ((pats.astype(np.float64)[:-1] + pats.astype(np.float64)[1:]) / 2).astype(np.float32)
    x = np.concatenate([pats, mids[np.isfinite(mids)]])
    got = run_to16(lib, "f32_to_bf16", x, RN)
    check_bits(got, reference_bits(x, BF16, RN), x, "float->bfloat16")


@pytest.mark.parametrize("mode", [RN, RZ, RD, RU])
def test_double_to_16_bits_rounds_once(lib: ctypes.CDLL, mode: int) -> None:
    rng = np.random.default_rng(3)
    x = np.concatenate([
        rng.standard_normal(3000) * 10.0 ** rng.integers(-10, 6, 3000),
        # one part in 2**40 above a float16 / bfloat16 midpoint: rounding through float first would tie
        np.array([1 + 2.0 ** -11 + 2.0 ** -40, 1 + 2.0 ** -8 + 2.0 ** -40, -(1 + 2.0 ** -11 + 2.0 ** -40), 65520.0,
                  65519.999999, 1e300, -1e300, 2.0 ** -25, 2.0 ** -25 + 2.0 ** -70, math.inf, math.nan]),
    ])
    check_bits(run_to16(lib, "f64_to_f16", x, mode), reference_bits(x, HALF, mode), x, f"__double2half mode {mode}")
    check_bits(run_to16(lib, "f64_to_bf16", x, mode), reference_bits(x, BF16, mode), x, f"__double2bfloat16 {mode}")


@pytest.mark.parametrize("mode", [RN, RZ, RD, RU])
def test_integers_to_16_bits(lib: ctypes.CDLL, mode: int) -> None:
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.integers(-70000, 70000, 2000), rng.integers(-2 ** 62, 2 ** 62, 500),
                        np.array([0, 2049, 2051, 65504, 65519, 65520, -65520, 2 ** 24 + 1, 2 ** 53 + 1,
                                  (1 << 8) + 1, 2 ** 63 - 1, -2 ** 63, 0x7F80_0000_0000_0001])]).astype(np.int64)
    for bf, fmt in ((0, HALF), (1, BF16)):
        out = np.empty(x.size, np.uint16)
        lib.ll_to_16(ptr(x), ptr(out), ctypes.c_long(x.size), ctypes.c_int(mode), ctypes.c_int(bf))
        want = [round_exact(Fraction(int(v)), fmt, mode) for v in x.tolist()]
        check_bits(out, half_bits(want) if bf == 0 else bf16_bits(want), x, f"__ll2 mode {mode} bf={bf}")


def test_constructors_round_to_nearest(lib: ctypes.CDLL) -> None:
    x = f32_samples(5, n=2000, limit=8000)
    x = x[np.isfinite(x)]
    d = x.astype(np.float64) * (1 + 2.0 ** -30)
    i = np.random.default_rng(5).integers(-70000, 70000, x.size).astype(np.int32)
    out = np.empty(4 * x.size, np.uint16)
    lib.implicit(ptr(x), ptr(d), ptr(i), ptr(out), ctypes.c_long(x.size))
    check_bits(out[0::4], x.astype(np.float16).view(np.uint16), x, "__half(float)")
    check_bits(out[1::4], reference_bits(d, HALF, RN), d, "__half(double)")
    check_bits(out[2::4], reference_bits(x, BF16, RN), x, "__nv_bfloat16(float)")
    check_bits(out[3::4], i.astype(np.float16).view(np.uint16), i, "__half(int)")


def saturated(v: float, mode: int, lo: int, hi: int) -> int:
    if math.isnan(v):
        return 0
    if math.isinf(v):
        return hi if v > 0 else lo
    r = {RN: round, RZ: math.trunc, RD: math.floor, RU: math.ceil}[mode](v)  # round() is half-to-even
    return max(lo, min(hi, int(r)))


@pytest.mark.parametrize("mode", [RN, RZ, RD, RU])
@pytest.mark.parametrize("bf", [0, 1])
def test_16_bits_to_integers_saturate(lib: ctypes.CDLL, mode: int, bf: int) -> None:
    out = np.empty(5 * 65536, np.int64)
    lib.f16_to_int(ptr(ALL16), ptr(out), ctypes.c_long(65536), ctypes.c_int(mode), ctypes.c_int(bf))
    values = (bf16_to_float(ALL16) if bf else ALL16.view(np.float16).astype(np.float32)).astype(np.float64).tolist()
    limits = [(-2 ** 31, 2 ** 31 - 1), (-2 ** 15, 2 ** 15 - 1), (0, 2 ** 16 - 1), (0, 2 ** 64 - 1)]
    for k, (lo, hi) in enumerate(limits):
        want = [saturated(v, mode, lo, hi) for v in values]
        got = out[k::5].astype(np.uint64).tolist() if k == 3 else out[k::5].tolist()
        assert got == want, f"column {k}"
    want_char = [saturated(v, RZ, -128, 127) for v in values]
    assert out[4::5].tolist() == want_char


def f16_values(bits: np.ndarray, bf: int) -> np.ndarray:
    return (bf16_to_float(bits) if bf else bits.view(np.float16).astype(np.float32)).astype(np.float64)


def run_arith(lib: ctypes.CDLL, op: int, a: np.ndarray, b: np.ndarray, c: np.ndarray, bf: int) -> np.ndarray:
    out = np.empty(a.size, np.uint16)
    lib.arith(ptr(a), ptr(b), ptr(c), ptr(out), ctypes.c_long(a.size), ctypes.c_int(op), ctypes.c_int(bf))
    return out


def random16(seed: int, n: int, bf: int) -> np.ndarray:
    bits = np.random.default_rng(seed).integers(0, 65536, n, dtype=np.uint32).astype(np.uint16)
    keep = ~np.isnan(f16_values(bits, bf))
    return bits[keep]


@pytest.mark.parametrize("bf", [0, 1])
def test_arithmetic_rounds_once_like_numpy(lib: ctypes.CDLL, bf: int) -> None:
    a, b, c = (random16(s, 12000, bf) for s in (6, 7, 8))
    n = min(a.size, b.size, c.size)
    a, b, c = a[:n], b[:n], c[:n]
    fa, fb, fc = (f16_values(v, bf) for v in (a, b, c))
    fmt = BF16 if bf else HALF
    with np.errstate(all="ignore"):
        exact = {0: fa + fb, 1: fa - fb, 2: fa * fb, 3: fa / fb}  # exact in double except division
    for op in range(4):
        got = run_arith(lib, op, a, b, c, bf)
        if bf == 0:
            with np.errstate(all="ignore"):
                npy = {0: np.add, 1: np.subtract, 2: np.multiply, 3: np.divide}[op](a.view(np.float16), b.view(np.float16))
            want = npy.view(np.uint16).copy()
            want[np.isnan(npy)] = 0x7FFF
        elif op < 3:
            want = reference_bits(exact[op], fmt, RN)
        else:
            quotients = [float(round_exact(Fraction(x) / Fraction(y), fmt, RN)) if y != 0 and math.isfinite(x) and math.isfinite(y)
                         else float(np.float64(x) / np.float64(y)) for x, y in zip(fa.tolist(), fb.tolist())]
            with np.errstate(invalid="ignore"):
                want = reference_bits(np.array(quotients), fmt, RN)
        check_bits(got, want, np.stack([fa, fb], 1), f"op {op} bf={bf}")
    # fused multiply-add: one rounding of the exact a * b + c
    sel = slice(0, 3000)
    got = run_arith(lib, 4, a[sel], b[sel], c[sel], bf)
    want = [round_exact(Fraction(x) * Fraction(y) + Fraction(z), fmt, RN) if math.isfinite(x * 0 + y * 0 + z * 0 + 0.0)
            and math.isfinite(x) and math.isfinite(y) and math.isfinite(z) else x * y + z
            for x, y, z in zip(fa[sel].tolist(), fb[sel].tolist(), fc[sel].tolist())]
    want_bits = half_bits(want) if bf == 0 else bf16_bits(want)
    want_bits[np.isnan(np.array(want, dtype=np.float64))] = 0x7FFF
    check_bits(got, want_bits, fa[sel], f"__hfma bf={bf}")


def test_half_math_functions(lib: ctypes.CDLL) -> None:
    a = random16(9, 20000, 0)
    x16 = a.view(np.float16)
    x = x16.astype(np.float32)
    with np.errstate(all="ignore"):
        exact_ops = {9: np.sqrt, 10: np.floor, 11: np.ceil, 12: np.trunc, 13: np.rint, 18: np.abs}
        for op, fn in exact_ops.items():
            got = run_arith(lib, op, a, a, a, 0)
            want = fn(x).astype(np.float16)
            bits = want.view(np.uint16).copy()
            bits[np.isnan(want)] = 0x7FFF
            if op == 18:
                bits = a & 0x7FFF
            check_bits(got, bits, x, f"half math op {op}")
        for op, fn in {14: np.exp, 15: np.log, 16: np.sin, 17: np.cos}.items():
            got = run_arith(lib, op, a, a, a, 0).view(np.float16).astype(np.float64)
            want = fn(x.astype(np.float64)).astype(np.float16).astype(np.float64)
            ok = (got == want) | (np.isnan(got) & np.isnan(want))
            # within one float16 ulp of the correctly rounded value
            ulp = np.spacing(np.abs(want).astype(np.float16)).astype(np.float64)
            ok |= np.abs(got - want) <= ulp
            assert ok.all(), f"op {op}: {x[~ok][:5]} -> {got[~ok][:5]} want {want[~ok][:5]}"
        neg = run_arith(lib, 6, a, a, a, 0)
        assert np.array_equal(neg, a ^ 0x8000)


def test_half_max_min_and_comparisons(lib: ctypes.CDLL) -> None:
    nan, pz, nz, one = 0x7E00, 0x0000, 0x8000, 0x3C00
    a = np.array([nan, one, nan, pz, nz, one], np.uint16)
    b = np.array([one, nan, nan, nz, pz, 0xBC00], np.uint16)
    assert run_arith(lib, 7, a, b, a, 0).tolist() == [one, one, 0x7FFF, pz, pz, one]
    assert run_arith(lib, 8, a, b, a, 0).tolist() == [one, one, 0x7FFF, nz, nz, 0xBC00]
    x, y = random16(10, 5000, 0), random16(11, 5000, 0)
    n = min(x.size, y.size)
    x, y = np.concatenate([x[:n], [nan, one]]).astype(np.uint16), np.concatenate([y[:n], [one, nan]]).astype(np.uint16)
    out = np.empty(x.size, np.uint8)
    lib.compare(ptr(x), ptr(y), ptr(out), ctypes.c_long(x.size))
    fx, fy = x.view(np.float16), y.view(np.float16)
    want = ((fx < fy) * 1 | (fx <= fy) * 2 | (fx == fy) * 4 | (fx != fy) * 8 | (fx > fy) * 16 | (fx >= fy) * 32
            | np.isnan(fx) * 64 | np.isinf(fx) * 128)
    assert np.array_equal(out, want.astype(np.uint8))


def test_half2_pairs_and_layout(lib: ctypes.CDLL) -> None:
    out = np.zeros(7, np.float32)
    lib.half2_ops.restype = ctypes.c_int
    assert lib.half2_ops(ptr(out)) == 2 * 100 + 4 * 10 + 2
    assert out.tolist() == [2.0, 1.75, 0.75, -9.0, 2.75, -7.25, 2.0 + 8.0]  # 1.5 < 0.5 no, -2.25 < 4 yes
