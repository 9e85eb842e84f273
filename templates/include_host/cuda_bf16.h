// kspec's CPU device: CUDA's <cuda_bf16.h> for the host compiler. __nv_bfloat16 / nv_bfloat16 and
// __nv_bfloat162 with the GPU's conversions and arithmetic (see cuda_fp16.h; the API is shared through
// kspec_host/types_half_api.h). Like CUDA's, it includes cuda_fp16.h.
#pragma once

#include <cuda_fp16.h>

#define KH_T __nv_bfloat16
#define KH_T2 __nv_bfloat162
#define KH_FMT kspec_host::bf16_format
#define KH_N bfloat16
#define KH_N2 bfloat162
#define KH_RAW __nv_bfloat16_raw
#define KH_RAW2 __nv_bfloat162_raw
#include <kspec_host/types_half_api.h>
#undef KH_T
#undef KH_T2
#undef KH_FMT
#undef KH_N
#undef KH_N2
#undef KH_RAW
#undef KH_RAW2

typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;

__device__ __forceinline__ __nv_bfloat162 make_bfloat162(__nv_bfloat16 x, __nv_bfloat16 y) { return __nv_bfloat162(x, y); }

#ifndef CUDART_INF_BF16
#define CUDART_INF_BF16 __ushort_as_bfloat16((unsigned short)0x7F80U)
#define CUDART_NAN_BF16 __ushort_as_bfloat16((unsigned short)0x7FFFU)
#define CUDART_MIN_DENORM_BF16 __ushort_as_bfloat16((unsigned short)0x0001U)
#define CUDART_MAX_NORMAL_BF16 __ushort_as_bfloat16((unsigned short)0x7F7FU)
#define CUDART_NEG_ZERO_BF16 __ushort_as_bfloat16((unsigned short)0x8000U)
#define CUDART_ZERO_BF16 __ushort_as_bfloat16((unsigned short)0x0000U)
#define CUDART_ONE_BF16 __ushort_as_bfloat16((unsigned short)0x3F80U)
#endif
