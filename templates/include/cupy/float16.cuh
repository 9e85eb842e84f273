// CuPy's <cupy/float16.cuh> for kspec: the class float16, CuPy's C type of float16 values, over CUDA's
// __half. It converts implicitly from float and to float (arithmetic and comparisons compute in float, as
// CuPy's do), explicitly from the other arithmetic types, __half, __half_raw and bfloat16; assigning any
// value that converts explicitly works too. Members to_bits() / from_bits(), iszero / isnan / isinf /
// isfinite / signbit; functions copysign, nextafter, min, max, fmin, fmax and the predicates.
//
// kspec's own kernels spell float16 as __half (the C type of kspec's float16 dtype): a float16 converts to
// it with __half(float(x)) and from it with float16(h).
#pragma once

#include <cupy/carray.cuh>
#include <cuda_fp16.h>
#include <kspec/half_bits.cuh>

class float16 {
 private:
  __half data_;
  typedef kspec_half::Binary16 Bits;

 public:
  float16() = default;  // trivial, so that float16 can live in __shared__ memory
  __device__ float16(float v) : data_(__float2half(v)) {}
  explicit __device__ float16(double v) : data_(__double2half(v)) {}
  explicit __device__ float16(bool v) : data_(__float2half(v ? 1.0f : 0.0f)) {}
  // every integer that binary16 can hold is exact in float: converting through float rounds once
  explicit __device__ float16(int v) : data_(__float2half(static_cast<float>(v))) {}
  explicit __device__ float16(unsigned int v) : data_(__float2half(static_cast<float>(v))) {}
  explicit __device__ float16(long v) : data_(__float2half(static_cast<float>(v))) {}
  explicit __device__ float16(unsigned long v) : data_(__float2half(static_cast<float>(v))) {}
  explicit __device__ float16(long long v) : data_(__float2half(static_cast<float>(v))) {}
  explicit __device__ float16(unsigned long long v) : data_(__float2half(static_cast<float>(v))) {}
  explicit __device__ float16(const __half& v) : data_(v) {}
  explicit __device__ float16(const __half_raw& v) : data_(v) {}
  template <typename T, typename = typename cupy::type_traits::enable_if<cupy::type_traits::is_same<T, bfloat16>::value>::type>
  explicit __device__ float16(T v) : data_(__float2half(static_cast<float>(v))) {}

  __device__ operator float() const { return __half2float(data_); }

  float16& operator=(const float16&) = default;
  template <typename T>
  __device__ float16& operator=(const T& rhs) {
    *this = static_cast<float16>(rhs);
    return *this;
  }

  static constexpr unsigned short nan = Bits::quiet_nan;

  __device__ unsigned short to_bits() const { return __half_as_ushort(data_); }
  __device__ static float16 from_bits(unsigned short v) { return float16(__ushort_as_half(v)); }

  __device__ int iszero() const { return Bits::iszero(to_bits()); }
  __device__ int isnan() const { return Bits::isnan(to_bits()); }
  __device__ int isinf() const { return Bits::isinf(to_bits()); }
  __device__ int isfinite() const { return Bits::isfinite(to_bits()); }
  __device__ int signbit() const { return Bits::signbit(to_bits()); }

  template <typename T>
  __device__ float16& operator+=(const T& rhs) {
    return *this = *this + rhs;
  }
  template <typename T>
  __device__ float16& operator-=(const T& rhs) {
    return *this = *this - rhs;
  }
  template <typename T>
  __device__ float16& operator*=(const T& rhs) {
    return *this = *this * rhs;
  }
  template <typename T>
  __device__ float16& operator/=(const T& rhs) {
    return *this = *this / rhs;
  }
};

// Functions of float16 values: templates with an unused defaulted parameter, compiled only where a kernel
// uses them (see cupy/carray.cuh). min and max are CUDA's on float: fminf / fmaxf, where a NaN operand loses.
template <typename = void>
__device__ __forceinline__ float16 min(float16 x, float16 y) { return float16(fminf(float(x), float(y))); }
template <typename = void>
__device__ __forceinline__ float16 max(float16 x, float16 y) { return float16(fmaxf(float(x), float(y))); }
template <typename = void>
__device__ __forceinline__ float16 fmin(float16 x, float16 y) { return float16(fminf(float(x), float(y))); }
template <typename = void>
__device__ __forceinline__ float16 fmax(float16 x, float16 y) { return float16(fmaxf(float(x), float(y))); }
template <typename = void>
__device__ __forceinline__ int iszero(float16 x) { return x.iszero(); }
template <typename = void>
__device__ __forceinline__ int isnan(float16 x) { return x.isnan(); }
template <typename = void>
__device__ __forceinline__ int isinf(float16 x) { return x.isinf(); }
template <typename = void>
__device__ __forceinline__ int isfinite(float16 x) { return x.isfinite(); }
template <typename = void>
__device__ __forceinline__ int signbit(float16 x) { return x.signbit(); }
template <typename = void>
__device__ __forceinline__ float16 copysign(float16 x, float16 y) {
  return float16::from_bits(kspec_half::Binary16::copysign(x.to_bits(), y.to_bits()));
}
template <typename = void>
__device__ __forceinline__ float16 nextafter(float16 x, float16 y) {
  return float16::from_bits(kspec_half::Binary16::nextafter(x.to_bits(), y.to_bits(), float(x) < float(y)));
}
