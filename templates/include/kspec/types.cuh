// kspec device header: the heavy type headers, each only when the rendered kernel asks for it.
// A plain float32 kernel includes nothing here and compiles in tens of milliseconds; cuda_fp16.h /
// cuda_bf16.h cost ~70 ms and kspec/complex.cuh ~10 ms (CCCL's <cuda/std/complex>, its type before, cost
// ~1.7 s), so the renderer defines KSPEC_NEED_FP16 / KSPEC_NEED_BF16 / KSPEC_NEED_COMPLEX only for kernels
// whose types need them.
#pragma once

#if defined(KSPEC_NEED_FP16)
#include <cuda_fp16.h>
#endif

#if defined(KSPEC_NEED_BF16)
#include <cuda_bf16.h>
#endif

#if defined(KSPEC_NEED_COMPLEX)
#include <kspec/complex.cuh>
#endif

#if defined(KSPEC_NEED_VOID)
#include <cupy/unstructured_void.cuh>
#endif
