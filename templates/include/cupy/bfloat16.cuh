// CuPy's <cupy/bfloat16.cuh> for kspec: the class bfloat16, CuPy's C type of bfloat16 values, over CUDA's
// __nv_bfloat16. It converts implicitly from float and __nv_bfloat16 and to float (arithmetic and
// comparisons compute in float, as CuPy's do), explicitly from the other arithmetic types and float16;
// assigning any value that converts explicitly works too. Members to_bits() / from_bits(), iszero / isnan
// / isinf / isfinite / signbit; functions copysign, nextafter, min, max, fmin, fmax, _floor_divide and the
// predicates (what it shares with float16 is kspec/half_class.cuh).
//
// kspec's own kernels spell bfloat16 as __nv_bfloat16 (the C type of kspec's bfloat16 dtype), which
// converts to bfloat16 implicitly; a bfloat16 converts back with __nv_bfloat16(float(x)).
#pragma once

#include <cupy/carray.cuh>
#include <cuda_bf16.h>
#include <kspec/half_bits.cuh>
#include <kspec/half_class.cuh>

class bfloat16 {
 private:
  __nv_bfloat16 data_;

 public:
  bfloat16() = default;  // trivial, so that bfloat16 can live in __shared__ memory
  __device__ bfloat16(const __nv_bfloat16& v) : data_(v) {}
  __device__ bfloat16(float v) : data_(__float2bfloat16(v)) {}
  explicit __device__ bfloat16(double v) : data_(__double2bfloat16(v)) {}
  template <typename T, typename = typename cupy::type_traits::enable_if<cupy::type_traits::is_same<T, float16>::value>::type>
  explicit __device__ bfloat16(T v) : data_(__float2bfloat16(static_cast<float>(v))) {}

  __device__ operator float() const { return __bfloat162float(data_); }

  __device__ unsigned short to_bits() const { return __bfloat16_as_ushort(data_); }
  __device__ static bfloat16 from_bits(unsigned short v) { return bfloat16(__ushort_as_bfloat16(v)); }

  KSPEC_HALF_CLASS_MEMBERS(bfloat16, kspec_half::BFloat16, __float2bfloat16)
};

KSPEC_HALF_CLASS_FUNCTIONS(bfloat16, kspec_half::BFloat16)

// floor(x / y) computed in float (CuPy's helper of floor_divide and remainder).
template <typename = void>
__device__ __forceinline__ bfloat16 _floor_divide(bfloat16 x, bfloat16 y) { return bfloat16(floorf(float(x) / float(y))); }
KSPEC_HALF_MIXED_OPERATORS(__nv_bfloat16)  // __nv_bfloat16 with a built-in arithmetic value: computed in float (kspec/half_class.cuh)
