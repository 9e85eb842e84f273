// kspec's CPU device: CUDA's conversions and arithmetic with an explicit rounding mode (see kspec_host/math.h).
// _rn is the C++ operation kept out of FMA contraction (a register barrier after it); _rz/_rd/_ru take the
// round-to-nearest result and step one place when the exact error (from an FMA or two-sum) says the mode
// rounds the other way. Float -> integer conversions saturate and send NaN to 0, as the GPU's cvt does.
#pragma once

#include <cfloat>
#include <cmath>

#include <kspec_host/types_bits.h>

namespace kspec_host {

// The value as computed, never fused with a neighbouring multiply or add.
template <class F>
__attribute__((always_inline)) inline F opaque(F x) {
#if defined(__x86_64__) || defined(__i386__)
  __asm__("" : "+x"(x));
#elif defined(__aarch64__)
  __asm__("" : "+w"(x));
#else
  volatile F v = x;
  x = v;
#endif
  return x;
}

// `rn` is the nearest value to an exact result that exceeds it by `err_sign` (-1, 0, +1); step by mode.
template <class F>
inline F directed(F rn, int err_sign, round_mode mode) {
  if (err_sign == 0 || mode == round_rn || rn != rn) return rn;
  const F inf = std::numeric_limits<F>::infinity();
  if (mode == round_rd) return err_sign < 0 ? std::nextafter(rn, -inf) : rn;
  if (mode == round_ru) return err_sign > 0 ? std::nextafter(rn, inf) : rn;
  // toward zero: step when the nearest value is farther from zero than the exact one
  if ((rn > 0 && err_sign < 0) || (rn < 0 && err_sign > 0)) return std::nextafter(rn, F(0));
  return rn;
}

// A rounded-to-nearest result that overflowed to inf from finite operands.
template <class F>
inline F overflowed(F rn, round_mode mode) {
  const F big = std::numeric_limits<F>::max();
  if (mode == round_rz) return rn > 0 ? big : -big;
  if (mode == round_rd) return rn > 0 ? big : rn;
  if (mode == round_ru) return rn < 0 ? -big : rn;
  return rn;
}

inline int sign_of(long double e) { return (e > 0) - (e < 0); }

template <class F>
inline F add(F a, F b, round_mode mode) {
  const F s = opaque(a + b);
  if (mode == round_rn) return s;
  if (std::isinf(s)) return std::isfinite(a) && std::isfinite(b) ? overflowed(s, mode) : s;
  if (s == 0 && a != 0) return mode == round_rd ? -F(0) : F(0);  // exact cancellation: -0 only rounding down
  const F bb = opaque(s - a);
  const F err = opaque(opaque(a - opaque(s - bb)) + opaque(b - bb));  // two-sum: s + err == a + b exactly
  return directed(s, (err > 0) - (err < 0), mode);
}
template <class F>
inline F mul(F a, F b, round_mode mode) {
  const F p = opaque(a * b);
  if (mode == round_rn) return p;
  if (std::isinf(p)) return std::isfinite(a) && std::isfinite(b) ? overflowed(p, mode) : p;
  const F err = std::fma(a, b, -p);  // exact unless the product is subnormal (double: off by an ulp there)
  return directed(p, (err > 0) - (err < 0), mode);
}
template <class F>
inline F div(F a, F b, round_mode mode) {
  const F q = opaque(a / b);
  if (mode == round_rn || !std::isfinite(a) || !std::isfinite(b) || b == 0) return q;
  if (std::isinf(q)) return overflowed(q, mode);
  const F r = std::fma(-q, b, a);  // a - q*b exactly: the error of q has the sign of r / b
  return directed(q, ((r > 0) - (r < 0)) * ((b > 0) - (b < 0)), mode);
}
template <class F>
inline F sqrt_r(F a, round_mode mode) {
  const F s = std::sqrt(a);
  if (mode == round_rn || !(a > 0) || std::isinf(a)) return s;
  const F r = std::fma(-s, s, a);
  return directed(s, (r > 0) - (r < 0), mode);
}
// float: the product is exact in double, and so is the remainder a - q * b, also for subnormal results.
inline float mul(float a, float b, round_mode mode) {
  const float p = opaque(a * b);
  if (mode == round_rn) return p;
  if (std::isinf(p)) return std::isfinite(a) && std::isfinite(b) ? overflowed(p, mode) : p;
  const double err = static_cast<double>(a) * static_cast<double>(b) - static_cast<double>(p);
  return directed(p, (err > 0) - (err < 0), mode);
}
inline float div(float a, float b, round_mode mode) {
  const float q = opaque(a / b);
  if (mode == round_rn || !std::isfinite(a) || !std::isfinite(b) || b == 0) return q;
  if (std::isinf(q)) return overflowed(q, mode);
  const double r = static_cast<double>(a) - static_cast<double>(q) * static_cast<double>(b);
  return directed(q, ((r > 0) - (r < 0)) * ((b > 0) - (b < 0)), mode);
}

// Integer or double to a narrower float type: compare the nearest value with the exact one in long double
// (64 significant bits on x86, enough for every 64-bit integer).
template <class F, class X>
inline F narrow(X x, round_mode mode) {
  const F r = static_cast<F>(x);
  if (mode == round_rn || r != r) return r;
  if (std::isinf(r) && !std::isinf(static_cast<long double>(x))) return overflowed(r, mode);
  return directed(r, sign_of(static_cast<long double>(x) - static_cast<long double>(r)), mode);
}

}  // namespace kspec_host

// ------------------------------------------------------------------------------------------------ float -> integer
#define KSPEC_HOST_F2I(NAME, F, I)                                                                          \
  __device__ __forceinline__ I NAME##_rn(F x) { return kspec_host::saturate_to<I>(x, kspec_host::round_rn); } \
  __device__ __forceinline__ I NAME##_rz(F x) { return kspec_host::saturate_to<I>(x, kspec_host::round_rz); } \
  __device__ __forceinline__ I NAME##_rd(F x) { return kspec_host::saturate_to<I>(x, kspec_host::round_rd); } \
  __device__ __forceinline__ I NAME##_ru(F x) { return kspec_host::saturate_to<I>(x, kspec_host::round_ru); }
KSPEC_HOST_F2I(__float2int, float, int)
KSPEC_HOST_F2I(__float2uint, float, unsigned int)
KSPEC_HOST_F2I(__float2ll, float, long long)
KSPEC_HOST_F2I(__float2ull, float, unsigned long long)
KSPEC_HOST_F2I(__double2int, double, int)
KSPEC_HOST_F2I(__double2uint, double, unsigned int)
KSPEC_HOST_F2I(__double2ll, double, long long)
KSPEC_HOST_F2I(__double2ull, double, unsigned long long)
#undef KSPEC_HOST_F2I

// ------------------------------------------------------------------------------------------------ to float / double
#define KSPEC_HOST_NARROW(NAME, X, F)                                                                       \
  __device__ __forceinline__ F NAME##_rn(X x) { return kspec_host::narrow<F>(x, kspec_host::round_rn); }    \
  __device__ __forceinline__ F NAME##_rz(X x) { return kspec_host::narrow<F>(x, kspec_host::round_rz); }    \
  __device__ __forceinline__ F NAME##_rd(X x) { return kspec_host::narrow<F>(x, kspec_host::round_rd); }    \
  __device__ __forceinline__ F NAME##_ru(X x) { return kspec_host::narrow<F>(x, kspec_host::round_ru); }
KSPEC_HOST_NARROW(__int2float, int, float)
KSPEC_HOST_NARROW(__uint2float, unsigned int, float)
KSPEC_HOST_NARROW(__ll2float, long long, float)
KSPEC_HOST_NARROW(__ull2float, unsigned long long, float)
KSPEC_HOST_NARROW(__ll2double, long long, double)
KSPEC_HOST_NARROW(__ull2double, unsigned long long, double)
KSPEC_HOST_NARROW(__double2float, double, float)
#undef KSPEC_HOST_NARROW
__device__ __forceinline__ double __int2double_rn(int x) { return x; }
__device__ __forceinline__ double __uint2double_rn(unsigned int x) { return x; }

// ------------------------------------------------------------------------------------------------ arithmetic
#define KSPEC_HOST_ARITH(SUFFIX, MODE)                                                                      \
  __device__ __forceinline__ float __fadd_##SUFFIX(float a, float b) { return kspec_host::add(a, b, MODE); } \
  __device__ __forceinline__ float __fsub_##SUFFIX(float a, float b) { return kspec_host::add(a, -b, MODE); } \
  __device__ __forceinline__ float __fmul_##SUFFIX(float a, float b) { return kspec_host::mul(a, b, MODE); } \
  __device__ __forceinline__ float __fdiv_##SUFFIX(float a, float b) { return kspec_host::div(a, b, MODE); } \
  __device__ __forceinline__ float __frcp_##SUFFIX(float a) { return kspec_host::div(1.0f, a, MODE); }      \
  __device__ __forceinline__ float __fsqrt_##SUFFIX(float a) { return kspec_host::sqrt_r(a, MODE); }        \
  __device__ __forceinline__ double __dadd_##SUFFIX(double a, double b) { return kspec_host::add(a, b, MODE); } \
  __device__ __forceinline__ double __dsub_##SUFFIX(double a, double b) { return kspec_host::add(a, -b, MODE); } \
  __device__ __forceinline__ double __dmul_##SUFFIX(double a, double b) { return kspec_host::mul(a, b, MODE); } \
  __device__ __forceinline__ double __ddiv_##SUFFIX(double a, double b) { return kspec_host::div(a, b, MODE); } \
  __device__ __forceinline__ double __drcp_##SUFFIX(double a) { return kspec_host::div(1.0, a, MODE); }     \
  __device__ __forceinline__ double __dsqrt_##SUFFIX(double a) { return kspec_host::sqrt_r(a, MODE); }
KSPEC_HOST_ARITH(rn, kspec_host::round_rn)
KSPEC_HOST_ARITH(rz, kspec_host::round_rz)
KSPEC_HOST_ARITH(rd, kspec_host::round_rd)
KSPEC_HOST_ARITH(ru, kspec_host::round_ru)
#undef KSPEC_HOST_ARITH
__device__ __forceinline__ float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
__device__ __forceinline__ double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
__device__ __forceinline__ float __fmaf_ieee_rn(float a, float b, float c) { return std::fma(a, b, c); }
__device__ __forceinline__ float __frsqrt_rn(float a) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(a))); }
