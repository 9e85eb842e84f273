// kspec's CPU device, execution model (1/5): CUDA's built-in variables on the host and the per-OS-thread
// state the grid runner sets (which block and thread run now), dynamic shared memory, and faults raised by
// device code (out-of-bounds index, __trap, a failing assert), which name the kernel, block and thread.
#pragma once

#include <kspec_host/entry.h>

#include <cstdint>
#include <cstdio>

#ifndef KSPEC_HOST_UINT3  // kspec_host/vector_types.h defines it when it comes first (the prelude's order)
#define KSPEC_HOST_UINT3 1
struct uint3 {
  unsigned int x, y, z;
};
#endif
#ifndef KSPEC_HOST_DIM3
#define KSPEC_HOST_DIM3 1
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};
#endif

// The coordinates of the CUDA thread running now on this OS thread: the scheduler writes them before it
// runs (or resumes) a thread. One OS worker runs one block at a time, so blockIdx changes per block.
inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;
constexpr int warpSize = 32;

namespace kspec_host {

// True while this OS thread runs a grid (a void kernel); loop kernels leave it false and may set
// current_element() to the element they work on, which faults then name instead of a block and thread.
inline bool& in_grid() {
  static thread_local bool value = false;
  return value;
}
inline long long& current_element() {
  static thread_local long long value = -1;
  return value;
}

// The block's dynamic shared memory (extern __shared__ arrays are rewritten to point here).
inline unsigned char*& dynamic_shared_pointer() {
  static thread_local unsigned char* pointer = nullptr;
  return pointer;
}
inline unsigned char* dynamic_shared() { return dynamic_shared_pointer(); }

inline unsigned int linear_thread_id() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
inline unsigned int lane_id() { return linear_thread_id() % 32u; }
inline unsigned int threads_per_block() { return blockDim.x * blockDim.y * blockDim.z; }

// "(block (x, y, z), thread (x, y, z))", or "(element N)" / "" in a loop kernel.
inline void where_now(char* text, std::size_t size) {
  if (in_grid()) {
    std::snprintf(text, size, " (block (%u, %u, %u), thread (%u, %u, %u))", blockIdx.x, blockIdx.y, blockIdx.z,
                  threadIdx.x, threadIdx.y, threadIdx.z);
  } else if (current_element() >= 0) {
    std::snprintf(text, size, " (element %lld)", current_element());
  } else {
    text[0] = '\0';
  }
}

// Throws a fault whose message is "kernel 'NAME': <what> (block ..., thread ...)".
[[noreturn]] inline void raise_fault(int code, const char* what) {
  fault f;
  f.code = code;
  char where[160];
  where_now(where, sizeof where);
  std::snprintf(f.message, sizeof f.message, "kernel '%s': %s%s", current_kernel(), what, where);
  throw f;
}

[[noreturn]] inline void fault_index(long long index, long long size) {
  char what[160];
  std::snprintf(what, sizeof what, "index %lld is out of bounds for size %lld", index, size);
  raise_fault(fault_bounds, what);
}

[[noreturn]] inline void assert_fail(const char* expression, const char* file, unsigned line, const char* function) {
  char what[1024];
  std::snprintf(what, sizeof what, "assertion '%s' failed (%s:%u, in %s)", expression, file, line, function);
  raise_fault(fault_trap, what);
}

}  // namespace kspec_host

[[noreturn]] inline void __trap() { kspec_host::raise_fault(kspec_host::fault_trap, "__trap() was called"); }
[[noreturn]] inline void __brkpt() { kspec_host::raise_fault(kspec_host::fault_trap, "__brkpt() was called"); }

// Device assert: a failing assert is a fault (code 2), never an abort of the process.
#include <assert.h>
