// kspec's CPU device: bit-exact conversions shared by the half-precision types and the conversion
// intrinsics (kspec_host/math.h): float <-> IEEE half and float <-> bfloat16 with round-to-nearest-even as
// the GPU's cvt.rn does (NaN becomes the canonical 0x7fff, as CUDA's conversions give), the directed
// roundings (_rz/_rd/_ru) as one step from the nearest value, and saturating float -> integer conversions
// (NaN -> 0, out of range -> the type's limit), which is what cvt.rzi/rni/rmi/rpi do on the GPU.
#pragma once

#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#if defined(__F16C__)
#include <immintrin.h>
#endif

// Integer types by the short names of CUDA's conversion intrinsics (__int2half_rn, __half2ull_rz...).
typedef int kspec_host_int_int;
typedef unsigned int kspec_host_int_uint;
typedef short kspec_host_int_short;
typedef unsigned short kspec_host_int_ushort;
typedef long long kspec_host_int_ll;
typedef unsigned long long kspec_host_int_ull;

namespace kspec_host {

template <class To, class From>
__attribute__((always_inline)) inline To bit_cast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast between types of different sizes");
  To to;
  std::memcpy(&to, &from, sizeof(To));
  return to;
}

enum round_mode { round_rn = 0, round_rz = 1, round_rd = 2, round_ru = 3 };

// ---------------------------------------------------------------------------------------------- IEEE half
inline unsigned short half_bits_rn(float f) {
  const unsigned int w = bit_cast<unsigned int>(f);
  if ((w & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;  // NaN: CUDA's canonical half NaN
#if defined(__F16C__)
  return static_cast<unsigned short>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
#else
  // Scale so that the float adder does the rounding at half's precision (subnormals included).
  float base = (std::fabs(f) * 0x1.0p+112f) * 0x1.0p-110f;
  const unsigned int shl1_w = w + w;
  const unsigned int sign = w & 0x80000000u;
  unsigned int bias = shl1_w & 0xff000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = bit_cast<float>((bias >> 1) + 0x07800000u) + base;
  const unsigned int bits = bit_cast<unsigned int>(base);
  const unsigned int exp_bits = (bits >> 13) & 0x00007c00u;
  const unsigned int mantissa_bits = bits & 0x00000fffu;
  return static_cast<unsigned short>((sign >> 16) | (exp_bits + mantissa_bits));
#endif
}

inline float half_bits_to_float(unsigned short h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  const unsigned int w = static_cast<unsigned int>(h) << 16;
  const unsigned int sign = w & 0x80000000u;
  const unsigned int two_w = w + w;
  const float normalized = bit_cast<float>((two_w >> 4) + (0xe0u << 23)) * 0x1.0p-112f;
  const float denormalized = bit_cast<float>((two_w >> 17) | (126u << 23)) - 0.5f;
  const unsigned int result =
      sign | (two_w < (1u << 27) ? bit_cast<unsigned int>(denormalized) : bit_cast<unsigned int>(normalized));
  return bit_cast<float>(result);
#endif
}

// ---------------------------------------------------------------------------------------------- bfloat16
inline unsigned short bf16_bits_rn(float f) {
  const unsigned int u = bit_cast<unsigned int>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
  return static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float bf16_bits_to_float(unsigned short b) { return bit_cast<float>(static_cast<unsigned int>(b) << 16); }

// The two 16-bit formats as policies for the generic code below.
struct half_format {
  static unsigned short from_float(float f) { return half_bits_rn(f); }
  static float to_float(unsigned short b) { return half_bits_to_float(b); }
};
struct bf16_format {
  static unsigned short from_float(float f) { return bf16_bits_rn(f); }
  static float to_float(unsigned short b) { return bf16_bits_to_float(b); }
};

// One step of a 16-bit sign-magnitude pattern up (toward +inf) or down (toward -inf).
inline unsigned short bits16_up(unsigned short b) {
  if (b == 0x8000u) return 1u;
  return static_cast<unsigned short>((b & 0x8000u) ? b - 1u : b + 1u);
}
inline unsigned short bits16_down(unsigned short b) {
  if (b == 0u) return 0x8001u;
  return static_cast<unsigned short>((b & 0x8000u) ? b + 1u : b - 1u);
}

// `x` rounded to nearest already gave `bits`; move one step when the mode rounds the other way.
template <class Format, class Source>
inline unsigned short round_directed(unsigned short bits, Source x, round_mode mode) {
  if (mode == round_rn || x != x) return bits;
  const Source r = static_cast<Source>(Format::to_float(bits));
  if (r == x) return bits;
  if (mode == round_rz) return (r > x) == (x > 0) ? static_cast<unsigned short>(bits - 1u) : bits;
  if (mode == round_rd) return r > x ? bits16_down(bits) : bits;
  return r < x ? bits16_up(bits) : bits;
}

template <class Format>
inline unsigned short from_float(float f, round_mode mode = round_rn) {
  return round_directed<Format>(Format::from_float(f), f, mode);
}

// double -> float rounded to odd: a second rounding to a format at least 2 bits narrower is then exact
// (a single correct rounding of the double), which is how the GPU converts double to half/bfloat16.
inline float double_to_float_odd(double d) {
  float f = static_cast<float>(d);
  if (static_cast<double>(f) != d && d == d) {
    unsigned int u = bit_cast<unsigned int>(f);
    if ((u & 1u) == 0u) {
      u = std::fabs(static_cast<double>(f)) > std::fabs(d) ? u - 1u : u + 1u;
      f = bit_cast<float>(u);
    }
  }
  return f;
}

template <class Format>
inline unsigned short from_double(double d, round_mode mode = round_rn) {
  return round_directed<Format>(Format::from_float(double_to_float_odd(d)), d, mode);
}

// a * b + c rounded to odd in double, for operands whose product is exact in double (16-bit formats): a
// later rounding to 16 bits then rounds the exact value once, even when c is far below a half-way product.
inline double fma_odd(double a, double b, double c) {
  const double p = a * b;  // exact
  const double s = p + c;
  if (!std::isfinite(s)) return s;
  const double bb = s - p;
  const double e = (p - (s - bb)) + (c - bb);  // two-sum: s + e == p + c exactly
  unsigned long long u = bit_cast<unsigned long long>(s);
  if (e != 0 && (u & 1ull) == 0ull) {
    u = ((e > 0) == (s > 0)) ? u + 1ull : u - 1ull;
    return bit_cast<double>(u);
  }
  return s;
}

// A 64-bit integer as a double rounded to odd (exact for |x| < 2**53).
inline double ull_to_double_odd(unsigned long long m) {
  if (m < (1ull << 53)) return static_cast<double>(m);
  const int shift = 11 - __builtin_clzll(m);
  const unsigned long long sticky = (m & ((1ull << shift) - 1ull)) != 0ull;
  return std::ldexp(static_cast<double>((m >> shift) | sticky), shift);
}
inline double ll_to_double_odd(long long x) {
  const unsigned long long m = x < 0 ? 0ull - static_cast<unsigned long long>(x) : static_cast<unsigned long long>(x);
  const double d = ull_to_double_odd(m);
  return x < 0 ? -d : d;
}

// Integers to a 16-bit format: exact through double rounded to odd, then one directed rounding.
template <class Format, class I>
inline unsigned short from_integer(I value, round_mode mode) {
  double d;
  if (std::is_signed<I>::value) d = ll_to_double_odd(static_cast<long long>(value));
  else d = ull_to_double_odd(static_cast<unsigned long long>(value));
  // Rounding of d to odd lost nothing that the directed modes need: d differs from value only below the
  // 53rd bit, far under the 16-bit format's last place, and keeps the side of every format value.
  return from_double<Format>(d, mode);
}

// ---------------------------------------------------------------------------------------------- to integers
template <class F>
inline F round_by(F x, round_mode mode) {
  switch (mode) {
    case round_rn: return std::nearbyint(x);
    case round_rz: return std::trunc(x);
    case round_rd: return std::floor(x);
    default: return std::ceil(x);
  }
}

// x rounded by `mode`, clamped to I's range, NaN -> 0 (the GPU's cvt.*i semantics).
template <class I, class F>
inline I saturate_to(F x, round_mode mode) {
  if (x != x) return I(0);
  const F r = round_by(x, mode);
  // Compare against the limits as F: the max of a 64-bit type rounds up to 2**63 / 2**64 in F, hence >=.
  if (r <= static_cast<F>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (r >= static_cast<F>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(r);
}

}  // namespace kspec_host
