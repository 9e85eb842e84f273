// kspec's CPU device: <cuda_runtime.h> for device code compiled by the host compiler. What kernels use from
// it (dim3, the built-in variables, atomics, intrinsics) is already declared by the prelude
// (kspec_host/cuda.h); this header only lets `#include <cuda_runtime.h>` compile.
#pragma once

#include <cstddef>
