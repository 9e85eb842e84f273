// CuPy's <cupy/atomics.cuh> for kspec: the atomic overloads CuPy's kernels count on beyond CUDA's own.
//  * atomicAdd(float16*, float16) and atomicAdd(bfloat16*, bfloat16) for CuPy's 16-bit classes
//    (cupy/float16.cuh, cupy/bfloat16.cuh; CUDA's own overloads take __half* and __nv_bfloat16*);
//  * atomicAdd(long long*, long long);
//  * atomicMax / atomicMin on float and double, with fmax / fmin's rule for NaN (a NaN operand loses).
// Each returns the value the address held before, as CUDA's atomics do. kspec's CuPy-style constructors
// include this header in every kernel, as CuPy does. (CUDA 13 targets sm_75 and newer, which have
// atomicAdd(double*) natively: CuPy's fallback for older GPUs has no use here.)
#pragma once

#include <cupy/carray.cuh>

// A 16-bit value lives in the aligned 32-bit word around it: compare-and-swap that word, changing only
// its half. A template, so that float16 and bfloat16 need only be defined where it is used.
template <typename T, typename = typename cupy::type_traits::enable_if<cupy::type_traits::is_same<T, float16>::value ||
                                                                       cupy::type_traits::is_same<T, bfloat16>::value>::type>
__device__ T atomicAdd(T* address, T val) {
  const unsigned long long where = reinterpret_cast<unsigned long long>(address);
  unsigned int* word = reinterpret_cast<unsigned int*>(where & ~3ull);
  const unsigned int shift = (where & 2ull) ? 16u : 0u;
  unsigned int old = *word;
  unsigned int assumed;
  do {
    assumed = old;
    const T sum = T(T::from_bits(static_cast<unsigned short>(assumed >> shift)) + val);
    const unsigned int next =
        (assumed & ~(0xffffu << shift)) | (static_cast<unsigned int>(sum.to_bits()) << shift);
    old = atomicCAS(word, assumed, next);
  } while (old != assumed);
  return T::from_bits(static_cast<unsigned short>(old >> shift));
}

// Templates with an unused defaulted parameter: instantiated only where used (see cupy/carray.cuh), with
// the overload resolution of plain functions.

#if !defined(KSPEC_HOST)  // kspec's CPU device has atomicAdd on every integer type already
template <typename = void>
__device__ __forceinline__ long long atomicAdd(long long* address, long long val) {
  // two's complement: the unsigned sum has the signed sum's bits
  return static_cast<long long>(
      atomicAdd(reinterpret_cast<unsigned long long*>(address), static_cast<unsigned long long>(val)));
}
#endif

namespace kspec_cupy {

// *address = pick(*address, val) by compare-and-swap on the value's bits; returns the old value. No store
// when the value would not change: the first read is volatile (not from a stale L1 line), so a value that
// already wins is the current one.
template <typename = void>
__device__ __forceinline__ float atomic_pick(float* address, float val, bool maximum) {
  int* bits = reinterpret_cast<int*>(address);
  int old = *static_cast<volatile int*>(bits);
  for (;;) {
    const float current = __int_as_float(old);
    const int next = __float_as_int(maximum ? fmaxf(val, current) : fminf(val, current));
    if (next == old) return current;
    const int seen = atomicCAS(bits, old, next);
    if (seen == old) return current;
    old = seen;
  }
}

template <typename = void>
__device__ __forceinline__ double atomic_pick(double* address, double val, bool maximum) {
  unsigned long long* bits = reinterpret_cast<unsigned long long*>(address);
  unsigned long long old = *static_cast<volatile unsigned long long*>(bits);
  for (;;) {
    const double current = __longlong_as_double(static_cast<long long>(old));
    const unsigned long long next =
        static_cast<unsigned long long>(__double_as_longlong(maximum ? fmax(val, current) : fmin(val, current)));
    if (next == old) return current;
    const unsigned long long seen = atomicCAS(bits, old, next);
    if (seen == old) return current;
    old = seen;
  }
}

}  // namespace kspec_cupy

template <typename = void>
__device__ __forceinline__ float atomicMax(float* address, float val) {
  return kspec_cupy::atomic_pick(address, val, true);
}
template <typename = void>
__device__ __forceinline__ double atomicMax(double* address, double val) {
  return kspec_cupy::atomic_pick(address, val, true);
}
template <typename = void>
__device__ __forceinline__ float atomicMin(float* address, float val) {
  return kspec_cupy::atomic_pick(address, val, false);
}
template <typename = void>
__device__ __forceinline__ double atomicMin(double* address, double val) {
  return kspec_cupy::atomic_pick(address, val, false);
}
