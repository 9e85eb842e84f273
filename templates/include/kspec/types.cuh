// kspec device header: the heavy type headers, each only when the rendered kernel asks for it.
// A plain float32 kernel includes nothing here and compiles in tens of milliseconds; cuda_fp16.h /
// cuda_bf16.h cost ~70 ms and kspec/complex.cuh ~10 ms (CCCL's <cuda/std/complex>, its type before, cost
// ~1.7 s), so the renderer defines KSPEC_NEED_FP16 / KSPEC_NEED_BF16 / KSPEC_NEED_COMPLEX only for kernels
// whose types need them.
#pragma once

// min / max / fmin / fmax of two half values, as CuPy's float16 and bfloat16 classes have them (CUDA gives __half
// none: max(a, b) of two __half matched several float and integer overloads). On float, NaN losing (fmaxf), as
// kspec's half classes do. Templates, compiled only where a kernel calls them.
#define KSPEC_HALF_MIN_MAX(H, TO_F, FROM_F)                                                                    \
  template <typename = void>                                                                                   \
  __device__ __forceinline__ H min(H x, H y) { return FROM_F(fminf(TO_F(x), TO_F(y))); }                       \
  template <typename = void>                                                                                   \
  __device__ __forceinline__ H max(H x, H y) { return FROM_F(fmaxf(TO_F(x), TO_F(y))); }                       \
  template <typename = void>                                                                                   \
  __device__ __forceinline__ H fmin(H x, H y) { return FROM_F(fminf(TO_F(x), TO_F(y))); }                      \
  template <typename = void>                                                                                   \
  __device__ __forceinline__ H fmax(H x, H y) { return FROM_F(fmaxf(TO_F(x), TO_F(y))); }

#if defined(KSPEC_NEED_FP16)
#include <cuda_fp16.h>
KSPEC_HALF_MIN_MAX(__half, __half2float, __float2half_rn)
#endif

#if defined(KSPEC_NEED_BF16)
#include <cuda_bf16.h>
KSPEC_HALF_MIN_MAX(__nv_bfloat16, __bfloat162float, __float2bfloat16_rn)
#endif

#if defined(KSPEC_NEED_COMPLEX)
#include <kspec/complex.cuh>
#endif

#if defined(KSPEC_NEED_VOID)
#include <cupy/unstructured_void.cuh>
#endif
