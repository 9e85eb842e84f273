// CuPy's <cupy/float16.cuh> for kspec: the class float16, CuPy's C type of float16 values, over CUDA's
// __half. It converts implicitly from float and to float (arithmetic and comparisons compute in float, as
// CuPy's do), explicitly from the other arithmetic types, __half, __half_raw and bfloat16; assigning any
// value that converts explicitly works too. Members to_bits() / from_bits(), iszero / isnan / isinf /
// isfinite / signbit; functions copysign, nextafter, min, max, fmin, fmax and the predicates (what it shares
// with bfloat16 is kspec/half_class.cuh).
//
// kspec's own kernels spell float16 as __half (the C type of kspec's float16 dtype): a float16 converts to
// it with __half(float(x)) and from it with float16(h).
#pragma once

#include <cupy/carray.cuh>
#include <cuda_fp16.h>
#include <kspec/half_bits.cuh>
#include <kspec/half_class.cuh>

class float16 {
 private:
  __half data_;

 public:
  float16() = default;  // trivial, so that float16 can live in __shared__ memory
  __device__ float16(float v) : data_(__float2half(v)) {}
  explicit __device__ float16(double v) : data_(__double2half(v)) {}
  explicit __device__ float16(const __half& v) : data_(v) {}
  explicit __device__ float16(const __half_raw& v) : data_(v) {}
  template <typename T, typename = typename cupy::type_traits::enable_if<cupy::type_traits::is_same<T, bfloat16>::value>::type>
  explicit __device__ float16(T v) : data_(__float2half(static_cast<float>(v))) {}

  __device__ operator float() const { return __half2float(data_); }

  enum : unsigned short { nan = kspec_half::Binary16::quiet_nan };  // an enumerator: no device global (kspec/select.cuh)

  __device__ unsigned short to_bits() const { return __half_as_ushort(data_); }
  __device__ static float16 from_bits(unsigned short v) { return float16(__ushort_as_half(v)); }

  KSPEC_HALF_CLASS_MEMBERS(float16, kspec_half::Binary16, __float2half)
};

KSPEC_HALF_CLASS_FUNCTIONS(float16, kspec_half::Binary16)
KSPEC_HALF_MIXED_OPERATORS(__half)  // __half with a built-in arithmetic value: computed in float (kspec/half_class.cuh)
