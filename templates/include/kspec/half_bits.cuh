// kspec device header: IEEE-style predicates and steps on the bits of a 16-bit float (binary16 or
// bfloat16), for CuPy's float16 / bfloat16 classes (cupy/float16.cuh, cupy/bfloat16.cuh). `Exp` is the
// format's exponent mask; the sign is bit 15 in both formats, and a larger magnitude has larger bits.
#pragma once

namespace kspec_half {

template <unsigned short Exp>
struct Bits {
  // enumerators, not static data members: no device global (kspec/select.cuh)
  enum : unsigned short {
    sign = 0x8000u,
    magnitude = 0x7fffu,
    // the quiet NaN: exponent all ones, the top mantissa bit set
    quiet_nan = static_cast<unsigned short>(Exp | ((Exp >> 1) & ~Exp & 0x7fffu))
  };

  static __device__ __forceinline__ int iszero(unsigned short b) { return (b & magnitude) == 0; }
  static __device__ __forceinline__ int isnan(unsigned short b) { return (b & magnitude) > Exp; }
  static __device__ __forceinline__ int isinf(unsigned short b) { return (b & magnitude) == Exp; }
  static __device__ __forceinline__ int isfinite(unsigned short b) { return (b & Exp) != Exp; }
  static __device__ __forceinline__ int signbit(unsigned short b) { return (b & sign) != 0; }
  static __device__ __forceinline__ unsigned short copysign(unsigned short x, unsigned short y) {
    return static_cast<unsigned short>((x & magnitude) | (y & sign));
  }

  // The next representable value after x toward y, as NumPy's float16 nextafter (and CuPy's) gives it:
  // NaN if either is NaN, x when they are equal (so nextafter(0, -0) is 0), the smallest subnormal of y's
  // sign from zero, else one step of the bits, up in magnitude when moving away from zero (infinity steps
  // down to the largest finite value).
  static __device__ __forceinline__ unsigned short nextafter(unsigned short x, unsigned short y, bool x_below_y) {
    if (isnan(x) || isnan(y)) return quiet_nan;
    if (x == y || (iszero(x) && iszero(y))) return x;
    if (iszero(x)) return static_cast<unsigned short>((y & sign) | 1u);
    const bool away_from_zero = x_below_y != signbit(x);
    return static_cast<unsigned short>(away_from_zero ? x + 1u : x - 1u);
  }
};

typedef Bits<0x7c00u> Binary16;
typedef Bits<0x7f80u> BFloat16;

}  // namespace kspec_half
