// CuPy's <cupy/bfloat16.cuh> for kspec: the class bfloat16, CuPy's C type of bfloat16 values, over CUDA's
// __nv_bfloat16. It converts implicitly from float and __nv_bfloat16 and to float (arithmetic and
// comparisons compute in float, as CuPy's do), explicitly from the other arithmetic types and float16;
// assigning any value that converts explicitly works too. Members to_bits() / from_bits(), iszero / isnan
// / isinf / isfinite / signbit; functions nextafter, min, max, fmin, fmax, _floor_divide and the predicates.
//
// kspec's own kernels spell bfloat16 as __nv_bfloat16 (the C type of kspec's bfloat16 dtype), which
// converts to bfloat16 implicitly; a bfloat16 converts back with __nv_bfloat16(float(x)).
#pragma once

#include <cupy/carray.cuh>
#include <cuda_bf16.h>
#include <kspec/half_bits.cuh>

class bfloat16 {
 private:
  __nv_bfloat16 data_;
  typedef kspec_half::BFloat16 Bits;

 public:
  bfloat16() = default;  // trivial, so that bfloat16 can live in __shared__ memory
  __device__ bfloat16(const __nv_bfloat16& v) : data_(v) {}
  __device__ bfloat16(float v) : data_(__float2bfloat16(v)) {}
  explicit __device__ bfloat16(double v) : data_(__double2bfloat16(v)) {}
  explicit __device__ bfloat16(bool v) : data_(__float2bfloat16(v ? 1.0f : 0.0f)) {}
  // integers through float, as CuPy converts them
  explicit __device__ bfloat16(int v) : data_(__float2bfloat16(static_cast<float>(v))) {}
  explicit __device__ bfloat16(unsigned int v) : data_(__float2bfloat16(static_cast<float>(v))) {}
  explicit __device__ bfloat16(long v) : data_(__float2bfloat16(static_cast<float>(v))) {}
  explicit __device__ bfloat16(unsigned long v) : data_(__float2bfloat16(static_cast<float>(v))) {}
  explicit __device__ bfloat16(long long v) : data_(__float2bfloat16(static_cast<float>(v))) {}
  explicit __device__ bfloat16(unsigned long long v) : data_(__float2bfloat16(static_cast<float>(v))) {}
  template <typename T, typename = typename cupy::type_traits::enable_if<cupy::type_traits::is_same<T, float16>::value>::type>
  explicit __device__ bfloat16(T v) : data_(__float2bfloat16(static_cast<float>(v))) {}

  __device__ operator float() const { return __bfloat162float(data_); }

  bfloat16& operator=(const bfloat16&) = default;
  template <typename T>
  __device__ bfloat16& operator=(const T& rhs) {
    *this = static_cast<bfloat16>(rhs);
    return *this;
  }

  __device__ unsigned short to_bits() const { return __bfloat16_as_ushort(data_); }
  __device__ static bfloat16 from_bits(unsigned short v) { return bfloat16(__ushort_as_bfloat16(v)); }

  __device__ int iszero() const { return Bits::iszero(to_bits()); }
  __device__ int isnan() const { return Bits::isnan(to_bits()); }
  __device__ int isinf() const { return Bits::isinf(to_bits()); }
  __device__ int isfinite() const { return Bits::isfinite(to_bits()); }
  __device__ int signbit() const { return Bits::signbit(to_bits()); }

  template <typename T>
  __device__ bfloat16& operator+=(const T& rhs) {
    return *this = *this + rhs;
  }
  template <typename T>
  __device__ bfloat16& operator-=(const T& rhs) {
    return *this = *this - rhs;
  }
  template <typename T>
  __device__ bfloat16& operator*=(const T& rhs) {
    return *this = *this * rhs;
  }
  template <typename T>
  __device__ bfloat16& operator/=(const T& rhs) {
    return *this = *this / rhs;
  }
};

// Functions of bfloat16 values: templates with an unused defaulted parameter, compiled only where a kernel
// uses them (see cupy/carray.cuh). min and max are CUDA's on float: fminf / fmaxf, where a NaN operand loses.
template <typename = void>
__device__ __forceinline__ bfloat16 min(bfloat16 x, bfloat16 y) { return bfloat16(fminf(float(x), float(y))); }
template <typename = void>
__device__ __forceinline__ bfloat16 max(bfloat16 x, bfloat16 y) { return bfloat16(fmaxf(float(x), float(y))); }
template <typename = void>
__device__ __forceinline__ bfloat16 fmin(bfloat16 x, bfloat16 y) { return bfloat16(fminf(float(x), float(y))); }
template <typename = void>
__device__ __forceinline__ bfloat16 fmax(bfloat16 x, bfloat16 y) { return bfloat16(fmaxf(float(x), float(y))); }
template <typename = void>
__device__ __forceinline__ int iszero(bfloat16 x) { return x.iszero(); }
template <typename = void>
__device__ __forceinline__ int isnan(bfloat16 x) { return x.isnan(); }
template <typename = void>
__device__ __forceinline__ int isinf(bfloat16 x) { return x.isinf(); }
template <typename = void>
__device__ __forceinline__ int isfinite(bfloat16 x) { return x.isfinite(); }
template <typename = void>
__device__ __forceinline__ int signbit(bfloat16 x) { return x.signbit(); }
template <typename = void>
__device__ __forceinline__ bfloat16 copysign(bfloat16 x, bfloat16 y) {
  return bfloat16::from_bits(kspec_half::BFloat16::copysign(x.to_bits(), y.to_bits()));
}
template <typename = void>
__device__ __forceinline__ bfloat16 nextafter(bfloat16 x, bfloat16 y) {
  return bfloat16::from_bits(kspec_half::BFloat16::nextafter(x.to_bits(), y.to_bits(), float(x) < float(y)));
}
// floor(x / y) computed in float (CuPy's helper of floor_divide and remainder).
template <typename = void>
__device__ __forceinline__ bfloat16 _floor_divide(bfloat16 x, bfloat16 y) { return bfloat16(floorf(float(x) / float(y))); }
