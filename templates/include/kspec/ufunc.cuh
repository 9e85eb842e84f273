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
        enum : bool { is_signed = SIGNED };  /* enumerators: no device global (kspec/select.cuh) */       \
        enum : int { bits = BITS };                                                                       \
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


}  // namespace uf
}  // namespace kspec

// One file per family (each under ~400 lines); they use the traits and macros above.
#include <kspec/ufunc_float.cuh>
#include <kspec/ufunc_complex.cuh>
#include <kspec/ufunc_cupy.cuh>

namespace kspec {
namespace uf {


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
