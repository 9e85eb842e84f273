// kspec device header, part of kspec/ufunc.cuh (which includes it inside its own setup; not for direct
// inclusion): NumPy's ufuncs on float, double, float16 and bfloat16.
#pragma once

namespace kspec {
namespace uf {

// ------------------------------------------------------------------------------------------------ float, double
// One line per function: the float and the double overload. Inside kspec::uf the names of NumPy's ufuncs
// shadow the C library's, so the C functions are called with ::.
#define KSPEC_UF_F1(NAME, FEXPR, DEXPR)                                                                   \
    __device__ inline float NAME(float x) { return FEXPR; }                                              \
    __device__ inline double NAME(double x) { return DEXPR; }
#define KSPEC_UF_F2(NAME, FEXPR, DEXPR)                                                                   \
    __device__ inline float NAME(float x, float y) { return FEXPR; }                                     \
    __device__ inline double NAME(double x, double y) { return DEXPR; }

KSPEC_UF_F1(sqrt, ::sqrtf(x), ::sqrt(x))
KSPEC_UF_F1(cbrt, ::cbrtf(x), ::cbrt(x))
KSPEC_UF_F1(exp, ::expf(x), ::exp(x))
KSPEC_UF_F1(exp2, ::exp2f(x), ::exp2(x))
KSPEC_UF_F1(expm1, ::expm1f(x), ::expm1(x))
KSPEC_UF_F1(log, ::logf(x), ::log(x))
KSPEC_UF_F1(log2, ::log2f(x), ::log2(x))
KSPEC_UF_F1(log10, ::log10f(x), ::log10(x))
KSPEC_UF_F1(log1p, ::log1pf(x), ::log1p(x))
KSPEC_UF_F1(sin, ::sinf(x), ::sin(x))
KSPEC_UF_F1(cos, ::cosf(x), ::cos(x))
KSPEC_UF_F1(tan, ::tanf(x), ::tan(x))
KSPEC_UF_F1(arcsin, ::asinf(x), ::asin(x))
KSPEC_UF_F1(arccos, ::acosf(x), ::acos(x))
KSPEC_UF_F1(arctan, ::atanf(x), ::atan(x))
KSPEC_UF_F1(sinh, ::sinhf(x), ::sinh(x))
KSPEC_UF_F1(cosh, ::coshf(x), ::cosh(x))
KSPEC_UF_F1(tanh, ::tanhf(x), ::tanh(x))
KSPEC_UF_F1(arcsinh, ::asinhf(x), ::asinh(x))
KSPEC_UF_F1(arccosh, ::acoshf(x), ::acosh(x))
KSPEC_UF_F1(arctanh, ::atanhf(x), ::atanh(x))
KSPEC_UF_F1(rint, ::rintf(x), ::rint(x))  // round half to even
KSPEC_UF_F1(floor, ::floorf(x), ::floor(x))
KSPEC_UF_F1(ceil, ::ceilf(x), ::ceil(x))
KSPEC_UF_F1(trunc, ::truncf(x), ::trunc(x))
KSPEC_UF_F1(absolute, ::fabsf(x), ::fabs(x))
KSPEC_UF_F1(fabs, ::fabsf(x), ::fabs(x))
KSPEC_UF_F1(negative, -x, -x)
KSPEC_UF_F1(square, x * x, x * x)
KSPEC_UF_F1(reciprocal, 1.0f / x, 1.0 / x)
// NumPy's constants: x * (pi / 180) and x * (180 / pi), each rounded to the type first.
KSPEC_UF_F1(deg2rad, x * 0.017453292519943295f, x * 0.017453292519943295)
KSPEC_UF_F1(rad2deg, x * 57.29577951308232f, x * 57.29577951308232)
#define KSPEC_UF_TEST(NAME)                                                                               \
    __device__ inline bool NAME(float x) { return ::NAME(x); }                                            \
    __device__ inline bool NAME(double x) { return ::NAME(x); }
KSPEC_UF_TEST(isnan)
KSPEC_UF_TEST(isinf)
KSPEC_UF_TEST(isfinite)
KSPEC_UF_TEST(signbit)
#undef KSPEC_UF_TEST
KSPEC_UF_F2(add, x + y, x + y)
KSPEC_UF_F2(subtract, x - y, x - y)
KSPEC_UF_F2(multiply, x * y, x * y)
KSPEC_UF_F2(divide, x / y, x / y)
KSPEC_UF_F2(arctan2, ::atan2f(x, y), ::atan2(x, y))
KSPEC_UF_F2(hypot, ::hypotf(x, y), ::hypot(x, y))
KSPEC_UF_F2(copysign, ::copysignf(x, y), ::copysign(x, y))
KSPEC_UF_F2(nextafter, ::nextafterf(x, y), ::nextafter(x, y))
KSPEC_UF_F2(fmod, ::fmodf(x, y), ::fmod(x, y))
KSPEC_UF_F2(power, ::powf(x, y), ::pow(x, y))
KSPEC_UF_F2(float_power, ::powf(x, y), ::pow(x, y))
// NumPy picks the second operand when the two compare equal (maximum(-0.0, 0.0) is 0.0) and propagates
// a NaN from either side; fmax/fmin return the other operand when one is NaN.
KSPEC_UF_F2(maximum, (x > y || ::isnan(x)) ? x : y, (x > y || ::isnan(x)) ? x : y)
KSPEC_UF_F2(minimum, (x < y || ::isnan(x)) ? x : y, (x < y || ::isnan(x)) ? x : y)
KSPEC_UF_F2(fmax, (x >= y || ::isnan(y)) ? x : y, (x >= y || ::isnan(y)) ? x : y)
KSPEC_UF_F2(fmin, (x <= y || ::isnan(y)) ? x : y, (x <= y || ::isnan(y)) ? x : y)
#undef KSPEC_UF_F1
#undef KSPEC_UF_F2

// NumPy's npy_divmod (CPython's float divmod): the quotient is snapped to an integer so that
// a == q * b + r holds as closely as possible; r has the sign of b. b == 0 gives a / b and fmod(a, 0).
template <class F> __device__ inline KSPEC_UF_F(F) floor_divide(F a, F b) {
    if (b == 0) return a / b;
    const F mod = fmod(a, b);
    F div = (a - mod) / b;
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= F(1);
    if (div == 0) return copysign(F(0), a / b);
    F floordiv = floor(div);
    if (div - floordiv > F(0.5)) floordiv += F(1);
    return floordiv;
}
template <class F> __device__ inline KSPEC_UF_F(F) remainder(F a, F b) {
    F mod = fmod(a, b);
    if (b == 0) return mod;
    if (mod != 0) {
        if ((b < 0) != (mod < 0)) mod += b;
    } else {
        mod = copysign(F(0), b);
    }
    return mod;
}
template <class F> __device__ inline KSPEC_UF_F(F) logaddexp(F x, F y) {
    if (x == y) return x + F(0.693147180559945309417232121458176568);  // also inf + inf without a NaN
    const F tmp = x - y;
    if (tmp > 0) return x + log1p(exp(-tmp));
    if (tmp <= 0) return y + log1p(exp(tmp));
    return tmp;  // NaN
}
// Products NumPy rounds before adding: kept out of FMA contraction so the sum rounds as NumPy's does.
__device__ inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mul_rn(double a, double b) { return __dmul_rn(a, b); }
template <class F> __device__ inline KSPEC_UF_F(F) logaddexp2(F x, F y) {
    const F log2e = F(1.442695040888963407359924681001892137);
    if (x == y) return x + F(1);
    const F tmp = x - y;
    if (tmp > 0) return x + mul_rn(log2e, log1p(exp2(-tmp)));
    if (tmp <= 0) return y + mul_rn(log2e, log1p(exp2(tmp)));
    return tmp;
}
template <class F> __device__ inline KSPEC_UF_F(F) heaviside(F x, F h0) {
    if (::isnan(x)) return nan_of(x);
    if (x == 0) return h0;
    return x < 0 ? F(0) : F(1);
}
template <class F> __device__ inline KSPEC_UF_F(F) sign(F x) {
    return x > 0 ? F(1) : (x < 0 ? F(-1) : (x == 0 ? F(0) : x));  // NaN stays NaN
}
// Distance to the next value away from zero, negative for x < 0 (spacing(-0.0) is +min subnormal, as in
// NumPy); inf -> NaN.
template <class F> __device__ inline KSPEC_UF_F(F) spacing(F x) {
    if (::isinf(x)) return nan_of(x);
    return nextafter(x, x < 0 ? -inf_of(x) : inf_of(x)) - x;
}
__device__ inline float ldexp(float x, int e) { return ::ldexpf(x, e); }
__device__ inline double ldexp(double x, int e) { return ::ldexp(x, e); }
// NumPy's int64-exponent loops clamp the exponent to int's range (the result is 0 or inf anyway).
template <class F> __device__ inline KSPEC_UF_F(F) ldexp(F x, long long e) {
    return ldexp(x, e > 2147483647LL ? 2147483647 : (e < -2147483647LL - 1 ? -2147483647 - 1 : (int)e));
}
// frexp and modf have two outputs; each output is its own pure function (the compiler merges the calls).
// inf and NaN: (x, 0) for frexp, (+-0, x) / (NaN, NaN) for modf, as C and NumPy give.
__device__ inline float frexp_mantissa(float x) { int e; return ::isfinite(x) ? ::frexpf(x, &e) : x; }
__device__ inline double frexp_mantissa(double x) { int e; return ::isfinite(x) ? ::frexp(x, &e) : x; }
__device__ inline int frexp_exponent(float x) { int e = 0; if (::isfinite(x)) ::frexpf(x, &e); return e; }
__device__ inline int frexp_exponent(double x) { int e = 0; if (::isfinite(x)) ::frexp(x, &e); return e; }
__device__ inline float modf_fraction(float x) { float i; return ::isinf(x) ? ::copysignf(0.0f, x) : ::modff(x, &i); }
__device__ inline double modf_fraction(double x) { double i; return ::isinf(x) ? ::copysign(0.0, x) : ::modf(x, &i); }
__device__ inline float modf_integral(float x) { float i; if (::isinf(x)) return x; ::modff(x, &i); return i; }
__device__ inline double modf_integral(double x) { double i; if (::isinf(x)) return x; ::modf(x, &i); return i; }

template <class T> __device__ inline bool nonzero(T x) { return x != 0; }

// ------------------------------------------------------------------------------------------------ float16, bfloat16
// Every half-precision function converts to float, calls the float overload and rounds back once.
#define KSPEC_UF_VIA_FLOAT(H, TO_F, FROM_F)                                                               \
    __device__ inline bool nonzero(H x) { return TO_F(x) != 0.0f; }                                       \
    KSPEC_UF_H_CMP(H, TO_F, less, <)                                                                      \
    KSPEC_UF_H_CMP(H, TO_F, less_equal, <=)                                                               \
    KSPEC_UF_H_CMP(H, TO_F, greater, >)                                                                   \
    KSPEC_UF_H_CMP(H, TO_F, greater_equal, >=)                                                            \
    KSPEC_UF_H_CMP(H, TO_F, equal, ==)                                                                    \
    KSPEC_UF_H_CMP(H, TO_F, not_equal, !=)                                                                \
    KSPEC_UF_H1(H, TO_F, FROM_F, sqrt) KSPEC_UF_H1(H, TO_F, FROM_F, cbrt) KSPEC_UF_H1(H, TO_F, FROM_F, exp)  \
    KSPEC_UF_H1(H, TO_F, FROM_F, exp2) KSPEC_UF_H1(H, TO_F, FROM_F, expm1) KSPEC_UF_H1(H, TO_F, FROM_F, log) \
    KSPEC_UF_H1(H, TO_F, FROM_F, log2) KSPEC_UF_H1(H, TO_F, FROM_F, log10)                                 \
    KSPEC_UF_H1(H, TO_F, FROM_F, log1p) KSPEC_UF_H1(H, TO_F, FROM_F, sin) KSPEC_UF_H1(H, TO_F, FROM_F, cos)  \
    KSPEC_UF_H1(H, TO_F, FROM_F, tan) KSPEC_UF_H1(H, TO_F, FROM_F, arcsin)                                 \
    KSPEC_UF_H1(H, TO_F, FROM_F, arccos) KSPEC_UF_H1(H, TO_F, FROM_F, arctan)                              \
    KSPEC_UF_H1(H, TO_F, FROM_F, sinh) KSPEC_UF_H1(H, TO_F, FROM_F, cosh) KSPEC_UF_H1(H, TO_F, FROM_F, tanh) \
    KSPEC_UF_H1(H, TO_F, FROM_F, arcsinh) KSPEC_UF_H1(H, TO_F, FROM_F, arccosh)                            \
    KSPEC_UF_H1(H, TO_F, FROM_F, arctanh) KSPEC_UF_H1(H, TO_F, FROM_F, rint)                               \
    KSPEC_UF_H1(H, TO_F, FROM_F, floor) KSPEC_UF_H1(H, TO_F, FROM_F, ceil)                                 \
    KSPEC_UF_H1(H, TO_F, FROM_F, trunc) KSPEC_UF_H1(H, TO_F, FROM_F, absolute)                             \
    KSPEC_UF_H1(H, TO_F, FROM_F, fabs) KSPEC_UF_H1(H, TO_F, FROM_F, negative)                              \
    KSPEC_UF_H1(H, TO_F, FROM_F, square) KSPEC_UF_H1(H, TO_F, FROM_F, reciprocal)                          \
    KSPEC_UF_H1(H, TO_F, FROM_F, deg2rad) KSPEC_UF_H1(H, TO_F, FROM_F, rad2deg)                            \
    KSPEC_UF_H1(H, TO_F, FROM_F, sign) KSPEC_UF_H1(H, TO_F, FROM_F, frexp_mantissa)                        \
    KSPEC_UF_H1(H, TO_F, FROM_F, modf_fraction) KSPEC_UF_H1(H, TO_F, FROM_F, modf_integral)                \
    KSPEC_UF_H2(H, TO_F, FROM_F, add) KSPEC_UF_H2(H, TO_F, FROM_F, subtract)                               \
    KSPEC_UF_H2(H, TO_F, FROM_F, multiply) KSPEC_UF_H2(H, TO_F, FROM_F, divide)                            \
    KSPEC_UF_H2(H, TO_F, FROM_F, arctan2) KSPEC_UF_H2(H, TO_F, FROM_F, hypot)                              \
    KSPEC_UF_H2(H, TO_F, FROM_F, copysign) KSPEC_UF_H2(H, TO_F, FROM_F, fmod)                              \
    KSPEC_UF_H2(H, TO_F, FROM_F, power) KSPEC_UF_H2(H, TO_F, FROM_F, maximum)                              \
    KSPEC_UF_H2(H, TO_F, FROM_F, minimum) KSPEC_UF_H2(H, TO_F, FROM_F, fmax) KSPEC_UF_H2(H, TO_F, FROM_F, fmin) \
    KSPEC_UF_H2(H, TO_F, FROM_F, floor_divide) KSPEC_UF_H2(H, TO_F, FROM_F, remainder)                     \
    KSPEC_UF_H2(H, TO_F, FROM_F, logaddexp) KSPEC_UF_H2(H, TO_F, FROM_F, logaddexp2)                       \
    KSPEC_UF_H2(H, TO_F, FROM_F, heaviside)                                                               \
    __device__ inline bool isnan(H x) { return ::isnan(TO_F(x)); }                                        \
    __device__ inline bool isinf(H x) { return ::isinf(TO_F(x)); }                                        \
    __device__ inline bool isfinite(H x) { return ::isfinite(TO_F(x)); }                                  \
    __device__ inline bool signbit(H x) { return ::signbit(TO_F(x)); }                                    \
    __device__ inline int frexp_exponent(H x) { return frexp_exponent(TO_F(x)); }                         \
    __device__ inline H ldexp(H x, int e) { return FROM_F(::ldexpf(TO_F(x), e)); }                        \
    __device__ inline H ldexp(H x, long long e) { return FROM_F(ldexp(TO_F(x), e)); }
#define KSPEC_UF_H1(H, TO_F, FROM_F, NAME) \
    __device__ inline H NAME(H x) { return FROM_F(NAME(TO_F(x))); }
#define KSPEC_UF_H2(H, TO_F, FROM_F, NAME) \
    __device__ inline H NAME(H x, H y) { return FROM_F(NAME(TO_F(x), TO_F(y))); }
#define KSPEC_UF_H_CMP(H, TO_F, NAME, OP) \
    __device__ inline bool NAME(H x, H y) { return TO_F(x) OP TO_F(y); }

// nextafter on the bit pattern (NumPy's npy_half_nextafter; the same steps hold for bfloat16's layout).
__device__ inline unsigned short nextafter_bits(unsigned short x, unsigned short y, bool x_nan, bool y_nan,
                                                 bool equal, unsigned short nan_bits) {
    if (x_nan || y_nan) return nan_bits;
    if (equal) return x;
    if ((x & 0x7fffu) == 0) return (unsigned short)((y & 0x8000u) + 1);  // smallest subnormal toward y
    if (!(x & 0x8000u)) return (short)x > (short)y ? (unsigned short)(x - 1) : (unsigned short)(x + 1);
    return (!(y & 0x8000u) || (x & 0x7fffu) > (y & 0x7fffu)) ? (unsigned short)(x - 1) : (unsigned short)(x + 1);
}

#if defined(KSPEC_NEED_FP16)
KSPEC_UF_VIA_FLOAT(__half, __half2float, __float2half_rn)
__device__ inline __half nextafter(__half x, __half y) {
    const float fx = __half2float(x), fy = __half2float(y);
    return __ushort_as_half(nextafter_bits(__half_as_ushort(x), __half_as_ushort(y), ::isnan(fx), ::isnan(fy),
                                           fx == fy, 0x7e00u));
}
// NumPy's npy_half_spacing, step by step: always positive, and for a negative power of two the gap
// toward zero (spacing(float16(-1)) is 2**-11, not -2**-10 as float32/float64 would give).
__device__ inline __half spacing(__half x) {
    const unsigned short h = __half_as_ushort(x), h_exp = h & 0x7c00u, h_sig = h & 0x03ffu;
    unsigned short r;
    if (h_exp == 0x7c00u) r = 0x7e00u;
    else if (h == 0x7bffu) r = 0x7c00u;
    else if ((h & 0x8000u) && h_sig == 0) r = h_exp > 0x2c00u ? (unsigned short)(h_exp - 0x2c00u)
                                            : (h_exp > 0x0400u ? (unsigned short)(1u << ((h_exp >> 10) - 2)) : (unsigned short)1u);
    else if (h_exp > 0x2800u) r = (unsigned short)(h_exp - 0x2800u);
    else if (h_exp > 0x0400u) r = (unsigned short)(1u << ((h_exp >> 10) - 1));
    else r = 1u;
    return __ushort_as_half(r);
}
#endif

#if defined(KSPEC_NEED_BF16)
KSPEC_UF_VIA_FLOAT(__nv_bfloat16, __bfloat162float, __float2bfloat16_rn)
__device__ inline __nv_bfloat16 nextafter(__nv_bfloat16 x, __nv_bfloat16 y) {
    const float fx = __bfloat162float(x), fy = __bfloat162float(y);
    return __ushort_as_bfloat16(nextafter_bits(__bfloat16_as_ushort(x), __bfloat16_as_ushort(y), ::isnan(fx),
                                               ::isnan(fy), fx == fy, 0x7fc0u));
}
// NumPy has no bfloat16; this follows NumPy's float32 definition.
__device__ inline __nv_bfloat16 spacing(__nv_bfloat16 x) {
    const float fx = __bfloat162float(x);
    if (::isinf(fx)) return __ushort_as_bfloat16(0x7fc0u);
    const __nv_bfloat16 next = nextafter(x, __float2bfloat16_rn(fx < 0 ? -inf_of(fx) : inf_of(fx)));
    return __float2bfloat16_rn(__bfloat162float(next) - fx);
}
#endif
#undef KSPEC_UF_VIA_FLOAT
#undef KSPEC_UF_H1
#undef KSPEC_UF_H2
#undef KSPEC_UF_H_CMP


}  // namespace uf
}  // namespace kspec
