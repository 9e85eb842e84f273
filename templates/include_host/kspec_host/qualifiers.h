// CUDA's declaration specifiers on the host. __device__/__constant__ variables and functions become plain
// namespace-scope definitions (one translation unit per module, so no ODR clash; variables keep their
// unmangled names for RawModule.get_global). __shared__ is handled by the runtime (kspec_host/runtime.h).
#pragma once

#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __grid_constant__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __cluster_dims__(...)
#ifndef __restrict__
#define __restrict__ __restrict
#endif
