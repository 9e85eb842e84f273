// kspec's CPU device: CUDA's <cuda_fp16.h> for the host compiler. __half / half and __half2 with the GPU's
// conversions (round to nearest even, exact widening, saturating integer conversions) and arithmetic
// (computed in float, rounded once). The API is shared with cuda_bf16.h (kspec_host/types_half_api.h).
#pragma once

#include <kspec_host/types_bits.h>
#include <kspec_host/vector_types.h>

#define KH_T __half
#define KH_T2 __half2
#define KH_FMT kspec_host::half_format
#define KH_N half
#define KH_N2 half2
#define KH_RAW __half_raw
#define KH_RAW2 __half2_raw
#include <kspec_host/types_half_api.h>
#undef KH_T
#undef KH_T2
#undef KH_FMT
#undef KH_N
#undef KH_N2
#undef KH_RAW
#undef KH_RAW2

typedef __half half;
typedef __half2 half2;

__device__ __forceinline__ __half2 make_half2(__half x, __half y) { return __half2(x, y); }

#ifndef CUDART_INF_FP16
#define CUDART_INF_FP16 __ushort_as_half((unsigned short)0x7C00U)
#define CUDART_NAN_FP16 __ushort_as_half((unsigned short)0x7FFFU)
#define CUDART_MIN_DENORM_FP16 __ushort_as_half((unsigned short)0x0001U)
#define CUDART_MAX_NORMAL_FP16 __ushort_as_half((unsigned short)0x7BFFU)
#define CUDART_NEG_ZERO_FP16 __ushort_as_half((unsigned short)0x8000U)
#define CUDART_ZERO_FP16 __ushort_as_half((unsigned short)0x0000U)
#define CUDART_ONE_FP16 __ushort_as_half((unsigned short)0x3C00U)
#endif
