// kspec device header: NumPy's math ufuncs as device functions (namespace kspec::uf), for the code that
// kspec.fuse emits (kspec/fuse/_ufuncs.py). Each function takes and returns exactly the types of one NumPy
// loop and follows NumPy's semantics where NumPy defines them: integer arithmetic wraps, floor_divide /
// remainder follow Python's sign rules, integer division by zero gives 0, maximum/minimum propagate NaN
// while fmax/fmin ignore it, shifts by >= the bit width give 0 (or -1), and so on.
//
// float16 / bfloat16 compute in float and round back after every operation, as NumPy does. Their parts, and
// the complex parts, compile only when the kernel defines KSPEC_NEED_FP16 / KSPEC_NEED_BF16 /
// KSPEC_NEED_COMPLEX (kspec/types.cuh has included their headers by then), so a float32 kernel pays for
// none of them. No <type_traits>: the small traits below keep plain kernels at tens of milliseconds.
// Written for C++11 (CuPy code may compile with -std=c++11).
#pragma once

namespace kspec {
namespace uf {

// ------------------------------------------------------------------------------------------------ traits
// int_of<T>::type is T for the eight integer types only (SFINAE keeps the integer templates off floats and
// bool); W is the unsigned type arithmetic runs in, so signed overflow wraps instead of being undefined and
// 8/16-bit products cannot overflow a promoted int.
template <class T> struct int_of {};
#define KSPEC_UF_INT(T, W, SIGNED, BITS)                                                                  \
    template <> struct int_of<T> {                                                                        \
        typedef T type;                                                                                   \
        typedef W wide;                                                                                   \
        static const bool is_signed = SIGNED;                                                             \
        static const int bits = BITS;                                                                     \
    };
KSPEC_UF_INT(signed char, unsigned int, true, 8)
KSPEC_UF_INT(short, unsigned int, true, 16)
KSPEC_UF_INT(int, unsigned int, true, 32)
KSPEC_UF_INT(long long, unsigned long long, true, 64)
KSPEC_UF_INT(unsigned char, unsigned int, false, 8)
KSPEC_UF_INT(unsigned short, unsigned int, false, 16)
KSPEC_UF_INT(unsigned int, unsigned int, false, 32)
KSPEC_UF_INT(unsigned long long, unsigned long long, false, 64)
#undef KSPEC_UF_INT

template <class T> struct float_of {};
template <> struct float_of<float> { typedef float type; };
template <> struct float_of<double> { typedef double type; };

template <bool B> struct tag {};

#define KSPEC_UF_I(T) typename ::kspec::uf::int_of<T>::type
#define KSPEC_UF_F(T) typename ::kspec::uf::float_of<T>::type
#define KSPEC_UF_W(T) typename ::kspec::uf::int_of<T>::wide
#define KSPEC_UF_SIGNED(T) ::kspec::uf::tag< ::kspec::uf::int_of<T>::is_signed>()

__device__ inline float nan_of(float) { return __int_as_float(0x7fc00000); }
__device__ inline double nan_of(double) { return __longlong_as_double(0x7ff8000000000000LL); }
__device__ inline float inf_of(float) { return __int_as_float(0x7f800000); }
__device__ inline double inf_of(double) { return __longlong_as_double(0x7ff0000000000000LL); }

// ------------------------------------------------------------------------------------------------ integers
template <class T> __device__ inline KSPEC_UF_I(T) add(T a, T b) { return (T)((KSPEC_UF_W(T))a + (KSPEC_UF_W(T))b); }
template <class T> __device__ inline KSPEC_UF_I(T) subtract(T a, T b) { return (T)((KSPEC_UF_W(T))a - (KSPEC_UF_W(T))b); }
template <class T> __device__ inline KSPEC_UF_I(T) multiply(T a, T b) { return (T)((KSPEC_UF_W(T))a * (KSPEC_UF_W(T))b); }
template <class T> __device__ inline KSPEC_UF_I(T) negative(T a) { return (T)((KSPEC_UF_W(T))0 - (KSPEC_UF_W(T))a); }
template <class T> __device__ inline KSPEC_UF_I(T) square(T a) { return multiply(a, a); }

namespace detail {
template <class T> __device__ inline T iabs(T a, tag<true>) { return a < 0 ? negative(a) : a; }
template <class T> __device__ inline T iabs(T a, tag<false>) { return a; }
// |a| as the unsigned working type (|MIN| is exact there).
template <class T> __device__ inline KSPEC_UF_W(T) uabs(T a, tag<true>) {
    return a < 0 ? (KSPEC_UF_W(T))0 - (KSPEC_UF_W(T))a : (KSPEC_UF_W(T))a;
}
template <class T> __device__ inline KSPEC_UF_W(T) uabs(T a, tag<false>) { return (KSPEC_UF_W(T))a; }
template <class T> __device__ inline T floor_divide(T a, T b, tag<true>) {
    if (b == 0) return 0;                      // NumPy: 0 (and a divide-by-zero warning)
    if (b == (T)-1) return negative(a);        // MIN // -1 wraps to MIN, as NumPy gives
    T q = (T)(a / b);
    return ((a % b) != 0 && ((a < 0) != (b < 0))) ? (T)(q - 1) : q;
}
template <class T> __device__ inline T floor_divide(T a, T b, tag<false>) { return b == 0 ? (T)0 : (T)(a / b); }
template <class T> __device__ inline T remainder(T a, T b, tag<true>) {
    if (b == 0 || b == (T)-1) return 0;
    T r = (T)(a % b);
    return (r != 0 && ((r < 0) != (b < 0))) ? (T)(r + b) : r;
}
template <class T> __device__ inline T remainder(T a, T b, tag<false>) { return b == 0 ? (T)0 : (T)(a % b); }
template <class T> __device__ inline T fmod(T a, T b, tag<true>) { return (b == 0 || b == (T)-1) ? (T)0 : (T)(a % b); }
template <class T> __device__ inline T fmod(T a, T b, tag<false>) { return b == 0 ? (T)0 : (T)(a % b); }
template <class T> __device__ inline bool negative_exponent(T b, tag<true>) { return b < 0; }
template <class T> __device__ inline bool negative_exponent(T, tag<false>) { return false; }
template <class T> __device__ inline T sign(T a, tag<true>) { return (T)((a > 0) - (a < 0)); }
template <class T> __device__ inline T sign(T a, tag<false>) { return (T)(a > 0); }
template <class T> __device__ inline T right_shift(T a, T b, tag<true>) {
    if ((unsigned long long)(long long)b < (unsigned long long)int_of<T>::bits) return (T)(a >> b);
    return a < 0 ? (T)-1 : (T)0;               // NumPy keeps the sign bit for over-wide shifts
}
template <class T> __device__ inline T right_shift(T a, T b, tag<false>) {
    return (unsigned long long)b < (unsigned long long)int_of<T>::bits ? (T)(a >> b) : (T)0;
}
template <class T> __device__ inline T reciprocal(T a, tag<true>) {
    // NumPy computes (T)(1.0 / a); 1/0 = inf converts to x86's "integer indefinite" 0x80..0, which leaves
    // MIN in int32/int64 and 0 in the narrower types.
    if (a == 0) return int_of<T>::bits >= 32 ? (T)((KSPEC_UF_W(T))1 << (int_of<T>::bits - 1)) : (T)0;
    return (a == 1 || a == -1) ? a : (T)0;
}
template <class T> __device__ inline T reciprocal(T a, tag<false>) { return a == 1 ? (T)1 : (T)0; }
}  // namespace detail

template <class T> __device__ inline KSPEC_UF_I(T) absolute(T a) { return detail::iabs(a, KSPEC_UF_SIGNED(T)); }
template <class T> __device__ inline KSPEC_UF_I(T) floor_divide(T a, T b) { return detail::floor_divide(a, b, KSPEC_UF_SIGNED(T)); }
template <class T> __device__ inline KSPEC_UF_I(T) remainder(T a, T b) { return detail::remainder(a, b, KSPEC_UF_SIGNED(T)); }
template <class T> __device__ inline KSPEC_UF_I(T) fmod(T a, T b) { return detail::fmod(a, b, KSPEC_UF_SIGNED(T)); }
template <class T> __device__ inline KSPEC_UF_I(T) sign(T a) { return detail::sign(a, KSPEC_UF_SIGNED(T)); }
template <class T> __device__ inline KSPEC_UF_I(T) reciprocal(T a) { return detail::reciprocal(a, KSPEC_UF_SIGNED(T)); }
template <class T> __device__ inline KSPEC_UF_I(T) maximum(T a, T b) { return a > b ? a : b; }
template <class T> __device__ inline KSPEC_UF_I(T) minimum(T a, T b) { return a < b ? a : b; }
template <class T> __device__ inline KSPEC_UF_I(T) fmax(T a, T b) { return a > b ? a : b; }
template <class T> __device__ inline KSPEC_UF_I(T) fmin(T a, T b) { return a < b ? a : b; }

// Integer power by squaring, wrapping like NumPy. NumPy raises ValueError for a negative exponent; a
// device cannot raise, so it returns a**b truncated toward zero: 1 for a == 1, +-1 for a == -1, else 0.
template <class T> __device__ inline KSPEC_UF_I(T) power(T a, T b) {
    typedef KSPEC_UF_W(T) W;
    if (detail::negative_exponent(b, KSPEC_UF_SIGNED(T))) {
        if (a == 1) return 1;
        if (a == (T)-1) return (b & 1) ? a : (T)1;
        return 0;
    }
    W base = (W)a, result = 1;
    for (unsigned long long e = (unsigned long long)b; e != 0; e >>= 1) {
        if (e & 1) result *= base;
        base *= base;
    }
    return (T)result;
}

template <class T> __device__ inline KSPEC_UF_I(T) bitwise_and(T a, T b) { return (T)(a & b); }
template <class T> __device__ inline KSPEC_UF_I(T) bitwise_or(T a, T b) { return (T)(a | b); }
template <class T> __device__ inline KSPEC_UF_I(T) bitwise_xor(T a, T b) { return (T)(a ^ b); }
template <class T> __device__ inline KSPEC_UF_I(T) invert(T a) { return (T)~a; }
// Shift counts outside [0, bits) give 0 (NumPy compares the count as size_t, so negatives are huge too).
template <class T> __device__ inline KSPEC_UF_I(T) left_shift(T a, T b) {
    return (unsigned long long)(long long)b < (unsigned long long)int_of<T>::bits ? (T)((KSPEC_UF_W(T))a << b) : (T)0;
}
template <class T> __device__ inline KSPEC_UF_I(T) right_shift(T a, T b) { return detail::right_shift(a, b, KSPEC_UF_SIGNED(T)); }

// gcd / lcm of the absolute values in the unsigned type, cast back (gcd(MIN, 0) wraps to MIN, as in NumPy).
template <class T> __device__ inline KSPEC_UF_W(T) gcd_unsigned(T a, T b) {
    KSPEC_UF_W(T) x = detail::uabs(a, KSPEC_UF_SIGNED(T)), y = detail::uabs(b, KSPEC_UF_SIGNED(T));
    while (x != 0) {
        KSPEC_UF_W(T) c = x;
        x = y % x;
        y = c;
    }
    return y;
}
template <class T> __device__ inline KSPEC_UF_I(T) gcd(T a, T b) { return (T)gcd_unsigned(a, b); }
template <class T> __device__ inline KSPEC_UF_I(T) lcm(T a, T b) {
    KSPEC_UF_W(T) g = gcd_unsigned(a, b);
    return g == 0 ? (T)0 : (T)(detail::uabs(a, KSPEC_UF_SIGNED(T)) / g * detail::uabs(b, KSPEC_UF_SIGNED(T)));
}
// Population count of |a| (NumPy's definition for signed types).
template <class T> __device__ inline unsigned char bitwise_count(T a) {
    KSPEC_UF_W(T) u = detail::uabs(a, KSPEC_UF_SIGNED(T));
    return (unsigned char)(sizeof(u) == 8 ? __popcll((unsigned long long)u) : __popc((unsigned int)u));
}

// Conversion of a float to an integer type with C truncation. NumPy leaves NaN and out-of-range values
// undefined (it warns); in range, signed values reach unsigned types wrapped (-1.0 -> 255 for uint8), as
// NumPy's x86 casts give, so the narrow types go through a 64-bit signed conversion.
template <class T, class F> __device__ inline T float_to_int(F x) { return (T)(long long)x; }
template <> __device__ inline unsigned long long float_to_int<unsigned long long, float>(float x) {
    return x >= 9223372036854775808.0f ? (unsigned long long)x : (unsigned long long)(long long)x;
}
template <> __device__ inline unsigned long long float_to_int<unsigned long long, double>(double x) {
    return x >= 9223372036854775808.0 ? (unsigned long long)x : (unsigned long long)(long long)x;
}

// Comparisons between int64 and uint64 (NumPy 2 has exact loops for them).
#define KSPEC_UF_MIXED_CMP(NAME, OP, LT_SIGNED)                                                           \
    __device__ inline bool NAME(long long a, unsigned long long b) {                                      \
        return a < 0 ? LT_SIGNED : ((unsigned long long)a OP b);                                          \
    }                                                                                                     \
    __device__ inline bool NAME(unsigned long long a, long long b) {                                      \
        return b < 0 ? !(LT_SIGNED) : (a OP(unsigned long long) b);                                       \
    }
// When the signed operand is negative it is less than every unsigned value.
KSPEC_UF_MIXED_CMP(less, <, true)
KSPEC_UF_MIXED_CMP(less_equal, <=, true)
KSPEC_UF_MIXED_CMP(greater, >, false)
KSPEC_UF_MIXED_CMP(greater_equal, >=, false)
#undef KSPEC_UF_MIXED_CMP
__device__ inline bool equal(long long a, unsigned long long b) { return a >= 0 && (unsigned long long)a == b; }
__device__ inline bool equal(unsigned long long a, long long b) { return b >= 0 && a == (unsigned long long)b; }
__device__ inline bool not_equal(long long a, unsigned long long b) { return !equal(a, b); }
__device__ inline bool not_equal(unsigned long long a, long long b) { return !equal(a, b); }

// ------------------------------------------------------------------------------------------------ bool
__device__ inline bool add(bool a, bool b) { return a || b; }
__device__ inline bool multiply(bool a, bool b) { return a && b; }
__device__ inline bool maximum(bool a, bool b) { return a || b; }
__device__ inline bool minimum(bool a, bool b) { return a && b; }
__device__ inline bool fmax(bool a, bool b) { return a || b; }
__device__ inline bool fmin(bool a, bool b) { return a && b; }
__device__ inline bool absolute(bool a) { return a; }
__device__ inline bool bitwise_and(bool a, bool b) { return a && b; }
__device__ inline bool bitwise_or(bool a, bool b) { return a || b; }
__device__ inline bool bitwise_xor(bool a, bool b) { return a != b; }
__device__ inline bool invert(bool a) { return !a; }


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

// ------------------------------------------------------------------------------------------------ complex
// NumPy's own formulas where they differ from C99's (multiply, divide, reciprocal, square, power, sign,
// expm1, log1p, log2, log10, ordering); kspec/complex_math.cuh's for the rest (qualified: an unqualified
// exp(z) here would see both kspec::uf::exp and, by argument-dependent lookup, kspec_cx::exp).
#if defined(KSPEC_NEED_COMPLEX)
template <class T> __device__ inline bool nonzero(complex<T> z) { return z.real() != 0 || z.imag() != 0; }
template <class T> __device__ inline complex<T> add(complex<T> a, complex<T> b) { return a + b; }
template <class T> __device__ inline complex<T> subtract(complex<T> a, complex<T> b) { return a - b; }
template <class T> __device__ inline complex<T> negative(complex<T> a) { return complex<T>(-a.real(), -a.imag()); }
template <class T> __device__ inline complex<T> conjugate(complex<T> a) { return complex<T>(a.real(), -a.imag()); }
template <class T> __device__ inline complex<T> multiply(complex<T> a, complex<T> b) {
    return kspec_cx::detail::mul(a.real(), a.imag(), b.real(), b.imag());
}
template <class T> __device__ inline complex<T> square(complex<T> a) { return multiply(a, a); }
// Smith's algorithm, as NumPy (kspec/complex.cuh's division); a zero divisor gives inf/NaN parts.
template <class T> __device__ inline complex<T> divide(complex<T> a, complex<T> b) {
    return kspec_cx::detail::div(a.real(), a.imag(), b.real(), b.imag());
}
template <class T> __device__ inline complex<T> reciprocal(complex<T> a) {
    const T r = a.real(), i = a.imag();
    if (::fabs(i) <= ::fabs(r)) {
        const T q = i / r, d = r + i * q;
        return complex<T>(T(1) / d, -q / d);
    }
    const T q = r / i, d = r * q + i;
    return complex<T>(q / d, T(-1) / d);
}
// kspec/complex.cuh's abs: CUDA's hypot overflows beside the largest doubles
template <class T> __device__ inline T absolute(complex<T> a) { return kspec_cx::abs(a); }
template <class T> __device__ inline complex<T> sign(complex<T> a) {
    const T r = a.real(), i = a.imag(), m = kspec_cx::abs(a), nan = nan_of(r);
    if (::isnan(m)) return complex<T>(nan, nan);
    if (::isinf(m)) {
        if (::isinf(r)) return ::isinf(i) ? complex<T>(nan, nan) : complex<T>(r > 0 ? T(1) : T(-1), T(0));
        return complex<T>(T(0), i > 0 ? T(1) : T(-1));
    }
    if (m == 0) return complex<T>(T(0), T(0));
    return complex<T>(r / m, i / m);
}
// NumPy's nc_pow: exact special cases for b == 0, a == 0 and small integer exponents (by squaring).
template <class T> __device__ inline complex<T> power(complex<T> a, complex<T> b) {
    const T ar = a.real(), ai = a.imag(), br = b.real(), bi = b.imag();
    if (br == 0 && bi == 0) return complex<T>(T(1), T(0));
    if (ar == 0 && ai == 0) {
        if (br > 0) return complex<T>(T(0), T(0));  // NumPy 2: any exponent with a positive real part
        return complex<T>(nan_of(ar), nan_of(ar));
    }
    if (bi == 0 && br == (T)(long long)br && br > -100 && br < 100) {
        long long n = (long long)br;
        if (n == 1) return a;
        if (n == 2) return multiply(a, a);
        if (n == 3) return multiply(multiply(a, a), a);
        if (n < 0) n = -n;
        complex<T> acc(T(1), T(0)), p = a;
        for (long long mask = 1;; mask <<= 1) {
            if (n & mask) acc = multiply(acc, p);
            if (n < (mask << 1)) break;
            p = multiply(p, p);
        }
        return br < 0 ? divide(complex<T>(T(1), T(0)), acc) : acc;
    }
    return kspec_cx::pow(a, b);
}
template <class T> __device__ inline complex<T> float_power(complex<T> a, complex<T> b) { return power(a, b); }
template <class T> __device__ inline complex<T> exp(complex<T> z) { return kspec_cx::exp(z); }
template <class T> __device__ inline complex<T> log(complex<T> z) { return kspec_cx::log(z); }
template <class T> __device__ inline complex<T> sqrt(complex<T> z) { return kspec_cx::sqrt(z); }
template <class T> __device__ inline complex<T> sin(complex<T> z) { return kspec_cx::sin(z); }
template <class T> __device__ inline complex<T> cos(complex<T> z) { return kspec_cx::cos(z); }
template <class T> __device__ inline complex<T> tan(complex<T> z) { return kspec_cx::tan(z); }
template <class T> __device__ inline complex<T> arcsin(complex<T> z) { return kspec_cx::asin(z); }
template <class T> __device__ inline complex<T> arccos(complex<T> z) { return kspec_cx::acos(z); }
template <class T> __device__ inline complex<T> arctan(complex<T> z) { return kspec_cx::atan(z); }
template <class T> __device__ inline complex<T> sinh(complex<T> z) { return kspec_cx::sinh(z); }
template <class T> __device__ inline complex<T> cosh(complex<T> z) { return kspec_cx::cosh(z); }
template <class T> __device__ inline complex<T> tanh(complex<T> z) { return kspec_cx::tanh(z); }
template <class T> __device__ inline complex<T> arcsinh(complex<T> z) { return kspec_cx::asinh(z); }
template <class T> __device__ inline complex<T> arccosh(complex<T> z) { return kspec_cx::acosh(z); }
template <class T> __device__ inline complex<T> arctanh(complex<T> z) { return kspec_cx::atanh(z); }
template <class T> __device__ inline complex<T> exp2(complex<T> z) {
    const T ln2 = T(0.693147180559945309417232121458176568);
    return kspec_cx::exp(complex<T>(z.real() * ln2, z.imag() * ln2));
}
template <class T> __device__ inline complex<T> expm1(complex<T> z) {
    const T h = sin(z.imag() / T(2));
    return complex<T>(expm1(z.real()) * cos(z.imag()) - T(2) * h * h, exp(z.real()) * sin(z.imag()));
}
template <class T> __device__ inline complex<T> log1p(complex<T> z) {
    const T re = z.real() + T(1);
    return complex<T>(log(hypot(re, z.imag())), arctan2(z.imag(), re));
}
template <class T> __device__ inline complex<T> log2(complex<T> z) {
    const complex<T> l = kspec_cx::log(z);
    const T k = T(1.442695040888963407359924681001892137);
    return complex<T>(l.real() * k, l.imag() * k);
}
template <class T> __device__ inline complex<T> log10(complex<T> z) {
    const complex<T> l = kspec_cx::log(z);
    const T k = T(0.434294481903251827651128918916605082);
    return complex<T>(l.real() * k, l.imag() * k);
}
template <class T> __device__ inline complex<T> rint(complex<T> z) { return complex<T>(rint(z.real()), rint(z.imag())); }
template <class T> __device__ inline bool isnan(complex<T> z) { return ::isnan(z.real()) || ::isnan(z.imag()); }
template <class T> __device__ inline bool isinf(complex<T> z) { return ::isinf(z.real()) || ::isinf(z.imag()); }
template <class T> __device__ inline bool isfinite(complex<T> z) { return ::isfinite(z.real()) && ::isfinite(z.imag()); }
// NumPy orders complex numbers lexicographically (its CLT/CLE/CGT/CGE macros): the real parts decide when
// they differ strictly and no imaginary part is NaN, the imaginary parts when the real parts are equal.
#define KSPEC_UF_C_CMP(NAME, STRICT, OP)                                                                  \
    template <class T> __device__ inline bool NAME(complex<T> a, complex<T> b) {                          \
        return (a.real() STRICT b.real() && !::isnan(a.imag()) && !::isnan(b.imag())) ||                  \
               (a.real() == b.real() && a.imag() OP b.imag());                                            \
    }
KSPEC_UF_C_CMP(less, <, <)
KSPEC_UF_C_CMP(less_equal, <, <=)
KSPEC_UF_C_CMP(greater, >, >)
KSPEC_UF_C_CMP(greater_equal, >, >=)
#undef KSPEC_UF_C_CMP
template <class T> __device__ inline bool equal(complex<T> a, complex<T> b) { return a.real() == b.real() && a.imag() == b.imag(); }
template <class T> __device__ inline bool not_equal(complex<T> a, complex<T> b) { return !equal(a, b); }
template <class T> __device__ inline complex<T> maximum(complex<T> a, complex<T> b) { return (isnan(a) || greater_equal(a, b)) ? a : b; }
template <class T> __device__ inline complex<T> minimum(complex<T> a, complex<T> b) { return (isnan(a) || less_equal(a, b)) ? a : b; }
template <class T> __device__ inline complex<T> fmax(complex<T> a, complex<T> b) { return (isnan(b) || greater_equal(a, b)) ? a : b; }
template <class T> __device__ inline complex<T> fmin(complex<T> a, complex<T> b) { return (isnan(b) || less_equal(a, b)) ? a : b; }
#endif

// Truth value of any operand (logical_and/or/xor/not and casts to bool); NaN is true, as in NumPy.
template <class T> __device__ inline bool logical_and(T a, T b) { return nonzero(a) && nonzero(b); }
template <class T> __device__ inline bool logical_or(T a, T b) { return nonzero(a) || nonzero(b); }
template <class T> __device__ inline bool logical_xor(T a, T b) { return nonzero(a) != nonzero(b); }
template <class T> __device__ inline bool logical_not(T a) { return !nonzero(a); }

}  // namespace uf
}  // namespace kspec

#undef KSPEC_UF_I
#undef KSPEC_UF_F
#undef KSPEC_UF_W
#undef KSPEC_UF_SIGNED
