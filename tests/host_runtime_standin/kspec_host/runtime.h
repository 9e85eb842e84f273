// Test-only stand-in for helper EXEC's kspec_host/runtime.h, used by tests/host_loops_support.py only while
// the real one does not define the CUDA built-ins yet. Host loop kernels never run a grid; the kspec device
// headers they include (indexer.cuh, reduce.cuh) merely name these in code the loop kernels do not call.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstring>

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
inline thread_local dim3 threadIdx{0, 0, 0};
inline thread_local dim3 blockIdx{0, 0, 0};
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;
inline void __syncthreads() {}
template <typename T>
inline T __shfl_xor_sync(unsigned, T value, int) {
  return value;
}

namespace kspec_host {
[[noreturn]] inline void fault_index(long long index, long long size) {
  fault f;
  f.code = fault_bounds;
  std::snprintf(f.message, sizeof f.message, "kernel '%s': index %lld out of bounds (size %lld)", current_kernel(), index,
                size);
  throw f;
}
}  // namespace kspec_host
