// kspec's CPU device: CUDA's math functions that C's <math.h> lacks, and CUDA's global min/max overloads
// (see kspec_host/math.h). Float versions compute in double and round once, so they are at least as
// accurate as the GPU's; the double versions are within a few ulp of the exact value.
#pragma once

#include <cfloat>
#include <cmath>
#include <limits>

namespace kspec_host {

constexpr double kPi = 3.141592653589793238462643383279502884;
constexpr double kTwoOverSqrtPi = 1.128379167095512573896158903121545172;
constexpr double kSqrt2 = 1.414213562373095048801688724209698079;

// sin(pi x) and cos(pi x) with the argument reduced exactly: x = n/2 + f, |f| <= 1/4.
inline void sincospi_d(double x, double* s, double* c) {
  if (!std::isfinite(x)) {
    *s = *c = std::numeric_limits<double>::quiet_NaN();
    return;
  }
  const double r = std::remainder(x, 2.0);  // exact, in [-1, 1]
  const double n = std::nearbyint(2.0 * r);
  const double f = r - 0.5 * n;  // exact
  const double sf = std::sin(kPi * f), cf = std::cos(kPi * f);
  switch (static_cast<int>(n) & 3) {
    case 0: *s = sf; *c = cf; break;
    case 1: *s = cf; *c = -sf; break;
    case 2: *s = -sf; *c = -cf; break;
    default: *s = -cf; *c = sf; break;
  }
  if (*s == 0) *s = std::copysign(0.0, x);  // sinpi(+-n) is +-0, as CUDA gives
  if (*c == 0) *c = 0.0;                    // cospi(n + 1/2) is +0
}

// erfc(x) = y solved by Newton steps from the normal-quantile approximation (Abramowitz & Stegun 26.2.23).
inline double erfcinv_d(double y) {
  if (y != y || y < 0 || y > 2) return std::numeric_limits<double>::quiet_NaN();
  if (y == 0) return std::numeric_limits<double>::infinity();
  if (y == 2) return -std::numeric_limits<double>::infinity();
  if (y > 1) return -erfcinv_d(2.0 - y);  // 2 - y is exact here
  const double t = std::sqrt(-2.0 * std::log(0.5 * y));
  double x = (t - (2.515517 + t * (0.802853 + t * 0.010328)) / (1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308)))) / kSqrt2;
  if (x < 0) x = 0;
  for (int i = 0; i < 8; ++i) {
    const double fx = std::erfc(x) - y;
    const double d = fx / (kTwoOverSqrtPi * std::exp(-x * x));
    x += d / (1.0 - x * d);  // Halley's step (f''/f' = -2x)
    if (std::fabs(d) <= 1e-17 * std::fabs(x)) break;
  }
  return x;
}

inline double erfinv_d(double y) {
  if (y != y || y < -1 || y > 1) return std::numeric_limits<double>::quiet_NaN();
  if (y == 0) return y;  // keeps -0
  if (std::fabs(y) > 0.5) return std::copysign(erfcinv_d(1.0 - std::fabs(y)), y);  // 1 - |y| is exact
  double x = y / kTwoOverSqrtPi * (1.0 + kPi / 12.0 * y * y);
  for (int i = 0; i < 8; ++i) {
    const double d = (std::erf(x) - y) / (kTwoOverSqrtPi * std::exp(-x * x));
    x -= d / (1.0 + x * d);
    if (std::fabs(d) <= 1e-17 * std::fabs(x)) break;
  }
  return x;
}

// exp(x*x) * erfc(x): exp of the exactly split square, and the asymptotic series where erfc underflows.
inline double erfcx_d(double x) {
  if (x != x) return x;
  if (x > 26.0) {
    if (std::isinf(x)) return 0.0;
    const double q = 1.0 / (2.0 * x * x);
    double term = 1.0, sum = 1.0;
    for (int k = 1; k < 12; ++k) {
      term *= -(2.0 * k - 1.0) * q;
      sum += term;
    }
    return sum / (x * 1.772453850905516027298167483341145183);
  }
  const double hi = x * x, lo = std::fma(x, x, -hi);
  return std::exp(hi) * std::exp(lo) * std::erfc(x);
}

inline double normcdf_d(double x) { return 0.5 * std::erfc(-x / kSqrt2); }
inline double normcdfinv_d(double p) { return -kSqrt2 * erfcinv_d(2.0 * p); }

}  // namespace kspec_host

// ------------------------------------------------------------------------------------------------ functions
__device__ __forceinline__ double rsqrt(double x) { return 1.0 / std::sqrt(x); }
__device__ __forceinline__ float rsqrtf(float x) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(x))); }
__device__ __forceinline__ double rcbrt(double x) { return 1.0 / std::cbrt(x); }
__device__ __forceinline__ float rcbrtf(float x) { return static_cast<float>(1.0 / std::cbrt(static_cast<double>(x))); }
__device__ __forceinline__ double sinpi(double x) { double s, c; kspec_host::sincospi_d(x, &s, &c); return s; }
__device__ __forceinline__ double cospi(double x) { double s, c; kspec_host::sincospi_d(x, &s, &c); return c; }
__device__ __forceinline__ void sincospi(double x, double* s, double* c) { kspec_host::sincospi_d(x, s, c); }
__device__ __forceinline__ float sinpif(float x) { return static_cast<float>(sinpi(static_cast<double>(x))); }
__device__ __forceinline__ float cospif(float x) { return static_cast<float>(cospi(static_cast<double>(x))); }
__device__ __forceinline__ void sincospif(float x, float* s, float* c) {
  double ds, dc;
  kspec_host::sincospi_d(x, &ds, &dc);
  *s = static_cast<float>(ds);
  *c = static_cast<float>(dc);
}
// glibc declares sincos(double, ...) and sincosf; CUDA also overloads sincos and sincospi for float.
__device__ __forceinline__ void sincos(float x, float* s, float* c) { ::sincosf(x, s, c); }
__device__ __forceinline__ void sincospi(float x, float* s, float* c) { sincospif(x, s, c); }
__device__ __forceinline__ double erfinv(double x) { return kspec_host::erfinv_d(x); }
__device__ __forceinline__ float erfinvf(float x) { return static_cast<float>(kspec_host::erfinv_d(x)); }
__device__ __forceinline__ double erfcinv(double x) { return kspec_host::erfcinv_d(x); }
__device__ __forceinline__ float erfcinvf(float x) { return static_cast<float>(kspec_host::erfcinv_d(x)); }
__device__ __forceinline__ double erfcx(double x) { return kspec_host::erfcx_d(x); }
__device__ __forceinline__ float erfcxf(float x) { return static_cast<float>(kspec_host::erfcx_d(x)); }
__device__ __forceinline__ double normcdf(double x) { return kspec_host::normcdf_d(x); }
__device__ __forceinline__ float normcdff(float x) { return static_cast<float>(kspec_host::normcdf_d(x)); }
__device__ __forceinline__ double normcdfinv(double p) { return kspec_host::normcdfinv_d(p); }
__device__ __forceinline__ float normcdfinvf(float p) { return static_cast<float>(kspec_host::normcdfinv_d(p)); }
__device__ __forceinline__ double rhypot(double x, double y) { return 1.0 / std::hypot(x, y); }
__device__ __forceinline__ float rhypotf(float x, float y) { return static_cast<float>(1.0 / std::hypot(static_cast<double>(x), static_cast<double>(y))); }
__device__ __forceinline__ double norm3d(double a, double b, double c) { return std::hypot(a, b, c); }
__device__ __forceinline__ float norm3df(float a, float b, float c) { return static_cast<float>(std::hypot(static_cast<double>(a), static_cast<double>(b), static_cast<double>(c))); }
__device__ __forceinline__ double rnorm3d(double a, double b, double c) { return 1.0 / std::hypot(a, b, c); }
__device__ __forceinline__ float rnorm3df(float a, float b, float c) { return static_cast<float>(1.0 / norm3d(a, b, c)); }
__device__ __forceinline__ float fdividef(float x, float y) { return x / y; }

// ------------------------------------------------------------------------------------------------ fast intrinsics
// The GPU's approximate versions; the host gives the accurate value (within their documented error).
__device__ __forceinline__ float __fdividef(float x, float y) {
  // CUDA: for 2**126 < |y| < 2**128 the result is 0 (NaN when x is infinite).
  if (std::fabs(y) > 0x1p126f && std::isfinite(y)) return std::isinf(x) ? std::numeric_limits<float>::quiet_NaN() : 0.0f * x;
  return x / y;
}
__device__ __forceinline__ float __expf(float x) { return std::exp(x); }
__device__ __forceinline__ float __exp10f(float x) { return static_cast<float>(std::pow(10.0, static_cast<double>(x))); }
__device__ __forceinline__ float __logf(float x) { return std::log(x); }
__device__ __forceinline__ float __log2f(float x) { return std::log2(x); }
__device__ __forceinline__ float __log10f(float x) { return std::log10(x); }
__device__ __forceinline__ float __powf(float x, float y) { return std::pow(x, y); }
__device__ __forceinline__ float __sinf(float x) { return std::sin(x); }
__device__ __forceinline__ float __cosf(float x) { return std::cos(x); }
__device__ __forceinline__ float __tanf(float x) { return std::tan(x); }
__device__ __forceinline__ void __sincosf(float x, float* s, float* c) { ::sincosf(x, s, c); }
__device__ __forceinline__ float __saturatef(float x) { return x != x ? 0.0f : (x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x)); }
__device__ __forceinline__ float __tanhf(float x) { return std::tanh(x); }

// ------------------------------------------------------------------------------------------------ min, max
// CUDA's global overloads: integers of one signedness compare as that type; int with unsigned compares as
// unsigned (as CUDA's umin/umax do); float with double promotes.
#define KSPEC_HOST_MINMAX(R, A, B)                                                                          \
  __device__ __forceinline__ R min(A a, B b) { return static_cast<R>(a) < static_cast<R>(b) ? static_cast<R>(a) : static_cast<R>(b); } \
  __device__ __forceinline__ R max(A a, B b) { return static_cast<R>(a) > static_cast<R>(b) ? static_cast<R>(a) : static_cast<R>(b); }
KSPEC_HOST_MINMAX(int, int, int)
KSPEC_HOST_MINMAX(unsigned int, unsigned int, unsigned int)
KSPEC_HOST_MINMAX(unsigned int, int, unsigned int)
KSPEC_HOST_MINMAX(unsigned int, unsigned int, int)
KSPEC_HOST_MINMAX(long, long, long)
KSPEC_HOST_MINMAX(unsigned long, unsigned long, unsigned long)
KSPEC_HOST_MINMAX(unsigned long, long, unsigned long)
KSPEC_HOST_MINMAX(unsigned long, unsigned long, long)
KSPEC_HOST_MINMAX(long long, long long, long long)
KSPEC_HOST_MINMAX(unsigned long long, unsigned long long, unsigned long long)
KSPEC_HOST_MINMAX(unsigned long long, long long, unsigned long long)
KSPEC_HOST_MINMAX(unsigned long long, unsigned long long, long long)
#undef KSPEC_HOST_MINMAX
// Floating min/max are fminf/fmax: a NaN operand yields the other one.
__device__ __forceinline__ float min(float a, float b) { return std::fmin(a, b); }
__device__ __forceinline__ float max(float a, float b) { return std::fmax(a, b); }
__device__ __forceinline__ double min(double a, double b) { return std::fmin(a, b); }
__device__ __forceinline__ double max(double a, double b) { return std::fmax(a, b); }
__device__ __forceinline__ double min(float a, double b) { return std::fmin(static_cast<double>(a), b); }
__device__ __forceinline__ double max(float a, double b) { return std::fmax(static_cast<double>(a), b); }
__device__ __forceinline__ double min(double a, float b) { return std::fmin(a, static_cast<double>(b)); }
__device__ __forceinline__ double max(double a, float b) { return std::fmax(a, static_cast<double>(b)); }
__device__ __forceinline__ unsigned int umin(unsigned int a, unsigned int b) { return a < b ? a : b; }
__device__ __forceinline__ unsigned int umax(unsigned int a, unsigned int b) { return a > b ? a : b; }
__device__ __forceinline__ long long llmin(long long a, long long b) { return a < b ? a : b; }
__device__ __forceinline__ long long llmax(long long a, long long b) { return a > b ? a : b; }
__device__ __forceinline__ unsigned long long ullmin(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
__device__ __forceinline__ unsigned long long ullmax(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
