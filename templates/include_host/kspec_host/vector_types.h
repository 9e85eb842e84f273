// kspec's CPU device: CUDA's built-in vector types (float2, int4, uchar4, double2...) with CUDA's sizes and
// alignments, and their make_* functions. uint3 is defined once, by whichever of this header and the
// execution model's (kspec_host/exec_state.h, which owns dim3) comes first: KSPEC_HOST_UINT3 says it exists.
#pragma once

struct alignas(1) char1 { signed char x; };
__host__ __device__ inline char1 make_char1(signed char x) { char1 v = {x}; return v; }
struct alignas(2) char2 { signed char x; signed char y; };
__host__ __device__ inline char2 make_char2(signed char x, signed char y) { char2 v = {x, y}; return v; }
struct char3 { signed char x; signed char y; signed char z; };
__host__ __device__ inline char3 make_char3(signed char x, signed char y, signed char z) { char3 v = {x, y, z}; return v; }
struct alignas(4) char4 { signed char x; signed char y; signed char z; signed char w; };
__host__ __device__ inline char4 make_char4(signed char x, signed char y, signed char z, signed char w) { char4 v = {x, y, z, w}; return v; }
struct alignas(1) uchar1 { unsigned char x; };
__host__ __device__ inline uchar1 make_uchar1(unsigned char x) { uchar1 v = {x}; return v; }
struct alignas(2) uchar2 { unsigned char x; unsigned char y; };
__host__ __device__ inline uchar2 make_uchar2(unsigned char x, unsigned char y) { uchar2 v = {x, y}; return v; }
struct uchar3 { unsigned char x; unsigned char y; unsigned char z; };
__host__ __device__ inline uchar3 make_uchar3(unsigned char x, unsigned char y, unsigned char z) { uchar3 v = {x, y, z}; return v; }
struct alignas(4) uchar4 { unsigned char x; unsigned char y; unsigned char z; unsigned char w; };
__host__ __device__ inline uchar4 make_uchar4(unsigned char x, unsigned char y, unsigned char z, unsigned char w) { uchar4 v = {x, y, z, w}; return v; }
struct alignas(2) short1 { short x; };
__host__ __device__ inline short1 make_short1(short x) { short1 v = {x}; return v; }
struct alignas(4) short2 { short x; short y; };
__host__ __device__ inline short2 make_short2(short x, short y) { short2 v = {x, y}; return v; }
struct short3 { short x; short y; short z; };
__host__ __device__ inline short3 make_short3(short x, short y, short z) { short3 v = {x, y, z}; return v; }
struct alignas(8) short4 { short x; short y; short z; short w; };
__host__ __device__ inline short4 make_short4(short x, short y, short z, short w) { short4 v = {x, y, z, w}; return v; }
struct alignas(2) ushort1 { unsigned short x; };
__host__ __device__ inline ushort1 make_ushort1(unsigned short x) { ushort1 v = {x}; return v; }
struct alignas(4) ushort2 { unsigned short x; unsigned short y; };
__host__ __device__ inline ushort2 make_ushort2(unsigned short x, unsigned short y) { ushort2 v = {x, y}; return v; }
struct ushort3 { unsigned short x; unsigned short y; unsigned short z; };
__host__ __device__ inline ushort3 make_ushort3(unsigned short x, unsigned short y, unsigned short z) { ushort3 v = {x, y, z}; return v; }
struct alignas(8) ushort4 { unsigned short x; unsigned short y; unsigned short z; unsigned short w; };
__host__ __device__ inline ushort4 make_ushort4(unsigned short x, unsigned short y, unsigned short z, unsigned short w) { ushort4 v = {x, y, z, w}; return v; }
struct alignas(4) int1 { int x; };
__host__ __device__ inline int1 make_int1(int x) { int1 v = {x}; return v; }
struct alignas(8) int2 { int x; int y; };
__host__ __device__ inline int2 make_int2(int x, int y) { int2 v = {x, y}; return v; }
struct int3 { int x; int y; int z; };
__host__ __device__ inline int3 make_int3(int x, int y, int z) { int3 v = {x, y, z}; return v; }
struct alignas(16) int4 { int x; int y; int z; int w; };
__host__ __device__ inline int4 make_int4(int x, int y, int z, int w) { int4 v = {x, y, z, w}; return v; }
struct alignas(4) uint1 { unsigned int x; };
__host__ __device__ inline uint1 make_uint1(unsigned int x) { uint1 v = {x}; return v; }
struct alignas(8) uint2 { unsigned int x; unsigned int y; };
__host__ __device__ inline uint2 make_uint2(unsigned int x, unsigned int y) { uint2 v = {x, y}; return v; }
#ifndef KSPEC_HOST_UINT3
#define KSPEC_HOST_UINT3 1
struct uint3 { unsigned int x; unsigned int y; unsigned int z; };
#endif
__host__ __device__ inline uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) { uint3 v = {x, y, z}; return v; }
struct alignas(16) uint4 { unsigned int x; unsigned int y; unsigned int z; unsigned int w; };
__host__ __device__ inline uint4 make_uint4(unsigned int x, unsigned int y, unsigned int z, unsigned int w) { uint4 v = {x, y, z, w}; return v; }
struct alignas(8) long1 { long x; };
__host__ __device__ inline long1 make_long1(long x) { long1 v = {x}; return v; }
struct alignas(16) long2 { long x; long y; };
__host__ __device__ inline long2 make_long2(long x, long y) { long2 v = {x, y}; return v; }
struct long3 { long x; long y; long z; };
__host__ __device__ inline long3 make_long3(long x, long y, long z) { long3 v = {x, y, z}; return v; }
struct alignas(16) long4 { long x; long y; long z; long w; };
__host__ __device__ inline long4 make_long4(long x, long y, long z, long w) { long4 v = {x, y, z, w}; return v; }
struct alignas(8) ulong1 { unsigned long x; };
__host__ __device__ inline ulong1 make_ulong1(unsigned long x) { ulong1 v = {x}; return v; }
struct alignas(16) ulong2 { unsigned long x; unsigned long y; };
__host__ __device__ inline ulong2 make_ulong2(unsigned long x, unsigned long y) { ulong2 v = {x, y}; return v; }
struct ulong3 { unsigned long x; unsigned long y; unsigned long z; };
__host__ __device__ inline ulong3 make_ulong3(unsigned long x, unsigned long y, unsigned long z) { ulong3 v = {x, y, z}; return v; }
struct alignas(16) ulong4 { unsigned long x; unsigned long y; unsigned long z; unsigned long w; };
__host__ __device__ inline ulong4 make_ulong4(unsigned long x, unsigned long y, unsigned long z, unsigned long w) { ulong4 v = {x, y, z, w}; return v; }
struct alignas(8) longlong1 { long long x; };
__host__ __device__ inline longlong1 make_longlong1(long long x) { longlong1 v = {x}; return v; }
struct alignas(16) longlong2 { long long x; long long y; };
__host__ __device__ inline longlong2 make_longlong2(long long x, long long y) { longlong2 v = {x, y}; return v; }
struct longlong3 { long long x; long long y; long long z; };
__host__ __device__ inline longlong3 make_longlong3(long long x, long long y, long long z) { longlong3 v = {x, y, z}; return v; }
struct alignas(16) longlong4 { long long x; long long y; long long z; long long w; };
__host__ __device__ inline longlong4 make_longlong4(long long x, long long y, long long z, long long w) { longlong4 v = {x, y, z, w}; return v; }
struct alignas(8) ulonglong1 { unsigned long long x; };
__host__ __device__ inline ulonglong1 make_ulonglong1(unsigned long long x) { ulonglong1 v = {x}; return v; }
struct alignas(16) ulonglong2 { unsigned long long x; unsigned long long y; };
__host__ __device__ inline ulonglong2 make_ulonglong2(unsigned long long x, unsigned long long y) { ulonglong2 v = {x, y}; return v; }
struct ulonglong3 { unsigned long long x; unsigned long long y; unsigned long long z; };
__host__ __device__ inline ulonglong3 make_ulonglong3(unsigned long long x, unsigned long long y, unsigned long long z) { ulonglong3 v = {x, y, z}; return v; }
struct alignas(16) ulonglong4 { unsigned long long x; unsigned long long y; unsigned long long z; unsigned long long w; };
__host__ __device__ inline ulonglong4 make_ulonglong4(unsigned long long x, unsigned long long y, unsigned long long z, unsigned long long w) { ulonglong4 v = {x, y, z, w}; return v; }
struct alignas(4) float1 { float x; };
__host__ __device__ inline float1 make_float1(float x) { float1 v = {x}; return v; }
struct alignas(8) float2 { float x; float y; };
__host__ __device__ inline float2 make_float2(float x, float y) { float2 v = {x, y}; return v; }
struct float3 { float x; float y; float z; };
__host__ __device__ inline float3 make_float3(float x, float y, float z) { float3 v = {x, y, z}; return v; }
struct alignas(16) float4 { float x; float y; float z; float w; };
__host__ __device__ inline float4 make_float4(float x, float y, float z, float w) { float4 v = {x, y, z, w}; return v; }
struct alignas(8) double1 { double x; };
__host__ __device__ inline double1 make_double1(double x) { double1 v = {x}; return v; }
struct alignas(16) double2 { double x; double y; };
__host__ __device__ inline double2 make_double2(double x, double y) { double2 v = {x, y}; return v; }
struct double3 { double x; double y; double z; };
__host__ __device__ inline double3 make_double3(double x, double y, double z) { double3 v = {x, y, z}; return v; }
struct alignas(16) double4 { double x; double y; double z; double w; };
__host__ __device__ inline double4 make_double4(double x, double y, double z, double w) { double4 v = {x, y, z, w}; return v; }
