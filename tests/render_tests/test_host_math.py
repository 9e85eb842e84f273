"""The CPU device's CUDA math API (templates/include_host/kspec_host/math*.h): special functions against
Python's math/statistics, directed-rounding arithmetic against exact fractions, saturating conversions, the
integer intrinsics against Python integers, and CUDA's min/max overloads. CPU only."""

from __future__ import annotations

import ctypes
import math
import statistics
from fractions import Fraction

import numpy as np
import pytest

from helpers.host_build import load, requires_host_cxx
from helpers.exact_rounding import F32, F64, RD, RN, RU, RZ, round_exact

pytestmark = requires_host_cxx

SOURCE = r"""
#define PICK(MODE, FN) ((MODE) == 0 ? FN##_rn : (MODE) == 1 ? FN##_rz : (MODE) == 2 ? FN##_rd : FN##_ru)
EXPORT double special(int op, double x) {
  const float f = (float)x;
  switch (op) {
    case 0: return rsqrt(x);
    case 1: return rsqrtf(f);
    case 2: return rcbrt(x);
    case 3: return sinpi(x);
    case 4: return cospi(x);
    case 5: return sinpif(f);
    case 6: return erfinv(x);
    case 7: return erfinvf(f);
    case 8: return erfcinv(x);
    case 9: return erfcinvf(f);
    case 10: return normcdf(x);
    case 11: return normcdff(f);
    case 12: return normcdfinv(x);
    case 13: return normcdfinvf(f);
    case 14: return erfcx(x);
    case 15: return erfcxf(f);
    case 16: return exp10(x);
    case 17: return __saturatef(f);
    case 18: { double s, c; sincospi(x, &s, &c); return s * 4 + c; }
    case 19: { float s, c; sincos(f, &s, &c); return s; }
    case 20: return __expf(f);
    case 21: return __fdividef(f, 3.0f);
    default: return rhypot(x, 2.0);
  }
}
EXPORT float arith_f(int op, int mode, float a, float b) {
  switch (op) {
    case 0: return PICK(mode, __fadd)(a, b);
    case 1: return PICK(mode, __fsub)(a, b);
    case 2: return PICK(mode, __fmul)(a, b);
    default: return PICK(mode, __fdiv)(a, b);
  }
}
EXPORT double arith_d(int op, int mode, double a, double b) {
  switch (op) {
    case 0: return PICK(mode, __dadd)(a, b);
    case 1: return PICK(mode, __dsub)(a, b);
    case 2: return PICK(mode, __dmul)(a, b);
    default: return PICK(mode, __ddiv)(a, b);
  }
}
EXPORT long long to_int(int which, int mode, double x) {
  switch (which) {
    case 0: return PICK(mode, __float2int)((float)x);
    case 1: return PICK(mode, __float2uint)((float)x);
    case 2: return PICK(mode, __double2ll)(x);
    default: return PICK(mode, __double2int)(x);
  }
}
EXPORT float ll_to_float(int mode, long long x) { return PICK(mode, __ll2float)(x); }
EXPORT float d_to_float(int mode, double x) { return PICK(mode, __double2float)(x); }
EXPORT unsigned long long intrinsic(int op, unsigned long long a, unsigned long long b, unsigned long long c) {
  const unsigned int ua = (unsigned int)a, ub = (unsigned int)b;
  switch (op) {
    case 0: return __popc(ua);
    case 1: return __popcll(a);
    case 2: return __clz((int)ua);
    case 3: return __clzll((long long)a);
    case 4: return __ffs((int)ua);
    case 5: return __ffsll((long long)a);
    case 6: return __brev(ua);
    case 7: return __brevll(a);
    case 8: return __byte_perm(ua, ub, (unsigned int)c);
    case 9: return (unsigned int)__mulhi((int)ua, (int)ub);
    case 10: return __umulhi(ua, ub);
    case 11: return (unsigned long long)__mul64hi((long long)a, (long long)b);
    case 12: return __umul64hi(a, b);
    case 13: return (unsigned int)__mul24((int)ua, (int)ub);
    case 14: return __umul24(ua, ub);
    case 15: return __sad((int)ua, (int)ub, (unsigned int)c);
    case 16: return (unsigned int)__hadd((int)ua, (int)ub);
    case 17: return (unsigned int)__rhadd((int)ua, (int)ub);
    case 18: return __funnelshift_l(ua, ub, (unsigned int)c);
    case 19: return __funnelshift_r(ua, ub, (unsigned int)c);
    case 20: return (unsigned int)__float_as_int(__int_as_float((int)ua));
    case 21: return (unsigned long long)__double_as_longlong(__hiloint2double(__double2hiint(__longlong_as_double((long long)a)), __double2loint(__longlong_as_double((long long)a))));
    case 22: return (unsigned int)min((int)ua, ub);
    case 23: return (unsigned int)max((int)ua, (int)ub);
    case 24: return (unsigned long long)min((long long)a, (long long)b);
    default: return __usad(ua, ub, (unsigned int)c);
  }
}
EXPORT double minmax_f(int op, double a, double b) {
  switch (op) {
    case 0: return min((float)a, (float)b);
    case 1: return max(a, b);
    case 3: return abs((float)a) + abs((long long)b) + fminf((float)a, (float)b) + fmax(a, b);  // unqualified, as CUDA
    default: return max((float)a, b);
  }
}
EXPORT int vector_layout(void) {
  return (alignof(float2) == 8) + 2 * (alignof(float4) == 16) + 4 * (sizeof(float3) == 12) + 8 * (alignof(double2) == 16)
         + 16 * (alignof(int4) == 16) + 32 * (alignof(uchar4) == 4) + 64 * (sizeof(longlong2) == 16)
         + 128 * (make_int3(1, 2, 3).z == 3) + 256 * (make_float4(1, 2, 3, 4).w == 4.0f) + 512 * (alignof(short2) == 4);
}
"""


@pytest.fixture(scope="module")
def lib() -> ctypes.CDLL:
    module = load(SOURCE)
    module.special.restype = ctypes.c_double
    module.special.argtypes = [ctypes.c_int, ctypes.c_double]
    module.arith_f.restype = ctypes.c_float
    module.arith_f.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_float, ctypes.c_float]
    module.arith_d.restype = ctypes.c_double
    module.arith_d.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_double, ctypes.c_double]
    module.to_int.restype = ctypes.c_longlong
    module.to_int.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_double]
    module.ll_to_float.restype = ctypes.c_float
    module.ll_to_float.argtypes = [ctypes.c_int, ctypes.c_longlong]
    module.d_to_float.restype = ctypes.c_float
    module.d_to_float.argtypes = [ctypes.c_int, ctypes.c_double]
    module.intrinsic.restype = ctypes.c_ulonglong
    module.intrinsic.argtypes = [ctypes.c_int, ctypes.c_ulonglong, ctypes.c_ulonglong, ctypes.c_ulonglong]
    module.minmax_f.restype = ctypes.c_double
    module.minmax_f.argtypes = [ctypes.c_int, ctypes.c_double, ctypes.c_double]
    return module


def close(got: float, want: float, rel: float) -> bool:
    if math.isnan(want):
        return math.isnan(got)
    if math.isinf(want):
        return got == want
    return abs(got - want) <= rel * max(abs(want), 1e-300)


ND = statistics.NormalDist()


def test_special_functions(lib: ctypes.CDLL) -> None:
    xs = [0.001, 0.1, 0.3, 0.5, 0.77, 1.0, 2.5, 7.25, 123.4, 1e6]
    for x in xs:
        assert close(lib.special(0, x), 1 / math.sqrt(x), 4e-16)
        assert close(lib.special(1, x), 1 / math.sqrt(np.float32(x)), 1e-7)
        assert close(lib.special(2, x), x ** (-1 / 3), 4e-16)
        assert close(lib.special(16, x / 1e4), 10 ** (x / 1e4), 1e-15)
        assert close(lib.special(22, x), 1 / math.hypot(x, 2.0), 4e-16)
    for x in [-3.75, -2.0, -0.5, -0.25, 0.0, 0.1, 0.25, 0.5, 1.0, 1.5, 2.5, 1e15 + 0.5, 3.0]:
        assert close(lib.special(3, x), math.sin(math.pi * math.fmod(x, 2.0)), 1e-15) or abs(lib.special(3, x)) < 1e-15
        if x == int(x):
            assert lib.special(3, x) == 0.0 and math.copysign(1, lib.special(3, x)) == math.copysign(1, x)
        if x - int(x) == 0.5:
            assert lib.special(4, x) == 0.0
        assert close(lib.special(4, x), math.cos(math.pi * math.fmod(x, 2.0)), 1e-15) or abs(lib.special(4, x)) < 1e-15
        s, c = lib.special(3, x), lib.special(4, x)
        assert lib.special(18, x) == s * 4 + c
    for y in [-0.999999, -0.9, -0.5, -1e-10, 1e-300, 0.3, 0.5, 0.75, 0.999, 1 - 1e-15]:
        x = lib.special(6, y)
        assert close(math.erf(x), y, 2e-15) or abs(math.erf(x) - y) < 1e-16, y
        assert close(lib.special(7, y), lib.special(6, f32(y)), 3e-7)
    assert math.isinf(lib.special(6, 1.0)) and lib.special(6, -1.0) < 0 and math.isnan(lib.special(6, 1.5))
    for y in [1e-300, 1e-100, 1e-20, 1e-5, 0.01, 0.5, 1.0, 1.3, 1.99, 2.0 - 1e-12]:
        x = lib.special(8, y)
        assert close(math.erfc(x), y, 4e-16 * max(1.0, 2 * x * x) * 8), (y, x)  # erfc amplifies x's error by 2x^2
        assert close(lib.special(9, y), lib.special(8, f32(y)), 3e-7) or y < 1e-38
    assert math.isinf(lib.special(8, 0.0)) and math.isnan(lib.special(8, -0.5)) and lib.special(8, 2.0) == -math.inf
    for x in [-8.0, -3.0, -1.0, 0.0, 0.5, 1.96, 4.0]:
        want = 0.5 * math.erfc(-x / math.sqrt(2))  # NormalDist.cdf goes through erf and loses the far tail
        assert close(want, ND.cdf(x), 1e-6) or x < -5
        assert close(lib.special(10, x), want, 1e-15)
        assert close(lib.special(11, x), want, 1e-7)
    for p in [1e-12, 0.001, 0.025, 0.3, 0.5, 0.8, 0.975, 0.999999]:
        assert close(lib.special(12, p), ND.inv_cdf(p), 1e-13), p
        assert close(lib.special(13, p), ND.inv_cdf(f32(p)), 2e-6)
    for x in [-5.0, -1.0, 0.0, 0.5, 2.0, 10.0]:
        assert close(lib.special(14, x), math.exp(x * x) * math.erfc(x), 1e-13)
    for x in [30.0, 100.0, 1e5]:  # erfc underflows; erfcx ~ 1 / (x sqrt(pi)) (1 - 1/(2x^2))
        series = 1 - 1 / (2 * x * x) + 3 / (4 * x ** 4) - 15 / (8 * x ** 6)
        assert close(lib.special(14, x), series / (x * math.sqrt(math.pi)), 1e-10)
    assert lib.special(17, -0.5) == 0.0 and lib.special(17, 2.0) == 1.0 and lib.special(17, math.nan) == 0.0
    assert lib.special(17, 0.25) == 0.25
    assert close(lib.special(20, 1.5), math.exp(1.5), 1e-7)
    assert lib.special(21, 6.0) == 2.0
    assert close(lib.special(19, 0.5), math.sin(0.5), 1e-7)


def f32(x: float) -> float:
    return float(np.float32(x))


@pytest.mark.parametrize("mode", [RN, RZ, RD, RU])
def test_directed_rounding_arithmetic(lib: ctypes.CDLL, mode: int) -> None:
    rng = np.random.default_rng(20 + mode)
    a = (rng.standard_normal(400) * 10.0 ** rng.integers(-30, 30, 400)).astype(np.float32).tolist()
    b = (rng.standard_normal(400) * 10.0 ** rng.integers(-30, 30, 400)).astype(np.float32).tolist()
    a += [f32(3.4e38), f32(-3.4e38), 1.0, f32(1e-45), f32(1e-30)]
    b += [f32(3.4e38), f32(-3.4e38), -1.0, 3.0, f32(-3e-17)]
    for x, y in zip(a, b):
        fx, fy = Fraction(x), Fraction(y)
        exact = [fx + fy, fx - fy, fx * fy, fx / fy]
        for op in range(4):
            want = round_exact(exact[op], F32, mode)
            got = lib.arith_f(op, mode, x, y)
            assert got == want, (op, mode, x, y, got, want)
        dx, dy = x * 1.0000001234, y * 0.99999987
        fx, fy = Fraction(dx), Fraction(dy)
        exact = [fx + fy, fx - fy, fx * fy, fx / fy]
        for op in range(4):
            if op >= 2 and abs(exact[op]) < Fraction(2) ** -1000:
                continue  # double's directed product/quotient is not exact in the subnormal range (documented)
            assert lib.arith_d(op, mode, dx, dy) == round_exact(exact[op], F64, mode), (op, mode, dx, dy)


@pytest.mark.parametrize("mode", [RN, RZ, RD, RU])
def test_saturating_conversions(lib: ctypes.CDLL, mode: int) -> None:
    rnd = {RN: round, RZ: math.trunc, RD: math.floor, RU: math.ceil}[mode]
    limits = [(-2 ** 31, 2 ** 31 - 1), (0, 2 ** 32 - 1), (-2 ** 63, 2 ** 63 - 1), (-2 ** 31, 2 ** 31 - 1)]
    for x in [0.0, -0.5, 0.5, 1.5, 2.5, -2.5, -1.7, 7.9, 3e9, -3e9, 1e19, -1e19, 4294967040.0, math.inf, -math.inf,
              math.nan, 2.0 ** 31, -(2.0 ** 31)]:
        for which, (lo, hi) in enumerate(limits):
            v = f32(x) if which < 2 else x
            want = 0 if math.isnan(v) else (hi if v == math.inf else lo if v == -math.inf else max(lo, min(hi, rnd(v))))
            got = lib.to_int(which, mode, x)
            if which == 1:
                got &= 0xFFFFFFFF
            assert got == want, (which, mode, x)
    for x in [2 ** 24 + 1, -(2 ** 24 + 1), 2 ** 62 + 2 ** 38 + 1, 2 ** 63 - 1, -(2 ** 63), 12345]:
        assert lib.ll_to_float(mode, x) == round_exact(Fraction(x), F32, mode), (mode, x)
    for x in [1.0 + 2.0 ** -30, -(1.0 + 2.0 ** -30), 1e39, -1e39, 1e-50, 0.1]:
        assert lib.d_to_float(mode, x) == round_exact(Fraction(x), F32, mode), (mode, x)


def brev(x: int, bits: int) -> int:
    return int(format(x, f"0{bits}b")[::-1], 2)


def signed(x: int, bits: int) -> int:
    return x - (1 << bits) if x >> (bits - 1) else x


def test_integer_intrinsics(lib: ctypes.CDLL) -> None:
    rng = np.random.default_rng(30)
    values = [0, 1, 0x80000000, 0xFFFFFFFF, 0x12345678, 0xFFFFFFFFFFFFFFFF, 0x8000000000000000]
    values += rng.integers(0, 2 ** 63, 60, dtype=np.uint64).tolist() + rng.integers(0, 2 ** 32, 60).tolist()
    m32, m64 = (1 << 32) - 1, (1 << 64) - 1
    for i, a in enumerate(values):
        b = values[(i * 7 + 3) % len(values)]
        c = values[(i * 5 + 1) % len(values)] & 0xFFFF
        a32, b32 = a & m32, b & m32
        sa, sb = signed(a32, 32), signed(b32, 32)

        def call(op: int, c: int = c, a: int = a, b: int = b) -> int:
            return int(lib.intrinsic(op, a, b, c))
        assert call(0) == bin(a32).count("1")
        assert call(1) == bin(a).count("1")
        assert call(2) == 32 - a32.bit_length()
        assert call(3) == 64 - a.bit_length()
        assert call(4) == ((a32 & -a32).bit_length())
        assert call(5) == ((a & -a).bit_length())
        assert call(6) == brev(a32, 32)
        assert call(7) == brev(a, 64)
        both = a32 | b32 << 32
        assert call(8) == sum(((both >> (8 * ((c >> (4 * k)) & 7))) & 0xFF) << (8 * k) for k in range(4))
        assert call(9) == ((sa * sb) >> 32) & m32
        assert call(10) == (a32 * b32) >> 32
        assert call(11) == ((signed(a, 64) * signed(b, 64)) >> 64) & m64
        assert call(12) == (a * b) >> 64
        assert call(13) == (signed(a32 & 0xFFFFFF, 24) * signed(b32 & 0xFFFFFF, 24)) & m32
        assert call(14) == ((a32 & 0xFFFFFF) * (b32 & 0xFFFFFF)) & m32
        assert call(15) == (abs(sa - sb) + c) & m32
        assert call(16) == ((sa + sb) >> 1) & m32
        assert call(17) == ((sa + sb + 1) >> 1) & m32
        assert call(18, c & 31) == ((both << (c & 31)) >> 32) & m32
        assert call(19, c & 31) == (both >> (c & 31)) & m32
        assert call(20) == a32
        assert call(21) == a
        assert call(22) == min(sa & m32, b32)  # CUDA: int with unsigned compares as unsigned
        assert call(23) == max(sa, sb) & m32
        assert call(24) == min(signed(a, 64), signed(b, 64)) & m64
        assert call(25) == (abs(a32 - b32) + c) & m32


def test_min_max_and_vector_types(lib: ctypes.CDLL) -> None:
    assert lib.minmax_f(0, math.nan, 2.0) == 2.0  # CUDA's float min/max are fminf/fmaxf
    assert lib.minmax_f(1, 1.0, math.nan) == 1.0
    assert lib.minmax_f(2, 0.1, 0.1) == f32(0.1)  # float with double promotes: max(double(0.1f), 0.1)
    assert lib.minmax_f(3, -2.5, -3.0) == 2.5 + 3 - 3.0 - 2.5
    assert lib.vector_layout() == 1023
