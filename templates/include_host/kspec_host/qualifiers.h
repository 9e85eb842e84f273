// CUDA's declaration specifiers on the host. __device__/__constant__ variables and functions become plain
// namespace-scope definitions (one translation unit per module, so no ODR clash; variables keep their
// unmangled names for RawModule.get_global). __shared__ is handled by the runtime (kspec_host/runtime.h).
#pragma once

#define __global__
// Exported: RawModule.get_global finds __device__ / __constant__ variables by name in the shared object
// (built with -fvisibility=hidden). Harmless on functions.
#define __device__ __attribute__((visibility("default")))
#define __host__
#define __constant__ __attribute__((visibility("default")))
#define __managed__ __attribute__((visibility("default")))
#define __grid_constant__
#define __forceinline__ inline __attribute__((always_inline))
// Empty, not __attribute__((noinline)): libstdc++ 13 spells its own attribute __attribute__((__noinline__)),
// which that expansion would break; a hint to keep a call out of line changes no result.
#define __noinline__
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __cluster_dims__(...)
#ifndef __restrict__
#define __restrict__ __restrict
#endif
