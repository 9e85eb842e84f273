// kspec's CPU device: CUDA's bit-cast and integer intrinsics (see kspec_host/math.h).
#pragma once

#include <kspec_host/types_bits.h>

// ------------------------------------------------------------------------------------------------ bit casts
__device__ __forceinline__ float __int_as_float(int x) { return kspec_host::bit_cast<float>(x); }
__device__ __forceinline__ int __float_as_int(float x) { return kspec_host::bit_cast<int>(x); }
__device__ __forceinline__ float __uint_as_float(unsigned int x) { return kspec_host::bit_cast<float>(x); }
__device__ __forceinline__ unsigned int __float_as_uint(float x) { return kspec_host::bit_cast<unsigned int>(x); }
__device__ __forceinline__ double __longlong_as_double(long long x) { return kspec_host::bit_cast<double>(x); }
__device__ __forceinline__ long long __double_as_longlong(double x) { return kspec_host::bit_cast<long long>(x); }
__device__ __forceinline__ int __double2hiint(double x) { return static_cast<int>(kspec_host::bit_cast<unsigned long long>(x) >> 32); }
__device__ __forceinline__ int __double2loint(double x) { return static_cast<int>(kspec_host::bit_cast<unsigned long long>(x)); }
__device__ __forceinline__ double __hiloint2double(int hi, int lo) {
  return kspec_host::bit_cast<double>((static_cast<unsigned long long>(static_cast<unsigned int>(hi)) << 32) |
                                      static_cast<unsigned int>(lo));
}

// ------------------------------------------------------------------------------------------------ bit counts
__device__ __forceinline__ int __popc(unsigned int x) { return __builtin_popcount(x); }
__device__ __forceinline__ int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
__device__ __forceinline__ int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned int>(x)); }
__device__ __forceinline__ int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
__device__ __forceinline__ int __ffs(int x) { return __builtin_ffs(x); }
__device__ __forceinline__ int __ffsll(long long x) { return __builtin_ffsll(x); }
__device__ __forceinline__ unsigned int __brev(unsigned int x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  return __builtin_bswap32(x);
}
__device__ __forceinline__ unsigned long long __brevll(unsigned long long x) {
  return (static_cast<unsigned long long>(__brev(static_cast<unsigned int>(x))) << 32) | __brev(static_cast<unsigned int>(x >> 32));
}
// Byte i of the result is byte (s >> 4i) & 7 of the 8-byte value (y:x).
__device__ __forceinline__ unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
  const unsigned long long v = (static_cast<unsigned long long>(y) << 32) | x;
  unsigned int r = 0;
  for (int i = 0; i < 4; ++i) r |= static_cast<unsigned int>((v >> (8 * ((s >> (4 * i)) & 7u))) & 0xffu) << (8 * i);
  return r;
}
__device__ __forceinline__ unsigned int __funnelshift_l(unsigned int lo, unsigned int hi, unsigned int shift) {
  const unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
  return static_cast<unsigned int>((v << (shift & 31u)) >> 32);
}
__device__ __forceinline__ unsigned int __funnelshift_lc(unsigned int lo, unsigned int hi, unsigned int shift) {
  const unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
  return static_cast<unsigned int>((v << (shift < 32u ? shift : 32u)) >> 32);
}
__device__ __forceinline__ unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int shift) {
  const unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
  return static_cast<unsigned int>(v >> (shift & 31u));
}
__device__ __forceinline__ unsigned int __funnelshift_rc(unsigned int lo, unsigned int hi, unsigned int shift) {
  const unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
  return static_cast<unsigned int>(v >> (shift < 32u ? shift : 32u));
}

// ------------------------------------------------------------------------------------------------ integer arithmetic
__device__ __forceinline__ int __mul24(int x, int y) {
  const int x24 = static_cast<int>(static_cast<unsigned int>(x) << 8) >> 8;  // low 24 bits, sign-extended
  const int y24 = static_cast<int>(static_cast<unsigned int>(y) << 8) >> 8;
  return static_cast<int>(static_cast<unsigned int>(x24) * static_cast<unsigned int>(y24));
}
__device__ __forceinline__ unsigned int __umul24(unsigned int x, unsigned int y) { return (x & 0xffffffu) * (y & 0xffffffu); }
__device__ __forceinline__ int __mulhi(int x, int y) { return static_cast<int>((static_cast<long long>(x) * y) >> 32); }
__device__ __forceinline__ unsigned int __umulhi(unsigned int x, unsigned int y) {
  return static_cast<unsigned int>((static_cast<unsigned long long>(x) * y) >> 32);
}
__device__ __forceinline__ long long __mul64hi(long long x, long long y) { return static_cast<long long>((static_cast<__int128>(x) * y) >> 64); }
__device__ __forceinline__ unsigned long long __umul64hi(unsigned long long x, unsigned long long y) {
  return static_cast<unsigned long long>((static_cast<unsigned __int128>(x) * y) >> 64);
}
__device__ __forceinline__ unsigned int __sad(int x, int y, unsigned int z) {
  return z + static_cast<unsigned int>(x > y ? static_cast<long long>(x) - y : static_cast<long long>(y) - x);
}
__device__ __forceinline__ unsigned int __usad(unsigned int x, unsigned int y, unsigned int z) { return z + (x > y ? x - y : y - x); }
// Averages without overflow: (x + y) >> 1 and (x + y + 1) >> 1 in 33 bits.
__device__ __forceinline__ int __hadd(int x, int y) { return static_cast<int>((static_cast<long long>(x) + y) >> 1); }
__device__ __forceinline__ int __rhadd(int x, int y) { return static_cast<int>((static_cast<long long>(x) + y + 1) >> 1); }
__device__ __forceinline__ unsigned int __uhadd(unsigned int x, unsigned int y) {
  return static_cast<unsigned int>((static_cast<unsigned long long>(x) + y) >> 1);
}
__device__ __forceinline__ unsigned int __urhadd(unsigned int x, unsigned int y) {
  return static_cast<unsigned int>((static_cast<unsigned long long>(x) + y + 1) >> 1);
}

// The read-only and cache-hinted loads and stores (__ldg, __stcs...) are the execution model's
// (kspec_host/exec_warp.h): plain memory accesses on the host.
