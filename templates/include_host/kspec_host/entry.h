// The C ABI between kspec's host driver (kspec/runtime, through ctypes) and a host module's entries, and
// the unpacking of CUDA-style kernelParams into a call. The host compiler appends one `kspec_entry_<hash>`
// per name expression; each calls run_entry, which picks how to run the function by its return type:
// a loop_kernel (kspec's host templates) is called once and parallelises itself; a void function is a
// CUDA kernel and runs as a grid (kspec_host/runtime.h).
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <exception>
#include <tuple>
#include <type_traits>
#include <utility>

extern "C" {
struct kspec_host_launch {
  unsigned grid[3];
  unsigned block[3];
  unsigned long long shared_bytes;
  int threads;  // host worker threads this launch may use (>= 1)
};
struct kspec_host_fault {
  int code;  // 0 ok, 1 index out of bounds, 2 trap/assert, 3 unsupported at run time, 4 C++ exception
  char message[2048];
};
}

namespace kspec_host {

// The return type of host loop kernels: run_entry calls them once instead of running a grid.
struct loop_kernel {};

enum fault_code { fault_none = 0, fault_bounds = 1, fault_trap = 2, fault_unsupported = 3, fault_exception = 4 };

// What a fault throws inside device code; caught by the runner, never crosses into Python.
struct fault {
  int code;
  char message[2048];
};

// The launch being run by this OS thread (loop kernels read grid/block from it; the grid runner sets it on
// every worker).
inline const kspec_host_launch*& current_launch() {
  static thread_local const kspec_host_launch* launch = nullptr;
  return launch;
}
inline const char*& current_kernel() {
  static thread_local const char* name = "";
  return name;
}

template <typename T>
using param_t = std::remove_cv_t<std::remove_reference_t<T>>;

// A parameter's bytes, copied to storage aligned for its type: the packer's slots are only 8-byte aligned
// (kspec/runtime/_packer.py), and complex<double> or double2 want 16 (a GPU driver copies them the same way).
template <typename T>
struct param_copy {
  alignas(T) unsigned char bytes[sizeof(T)];
  explicit param_copy(const void* from) { std::memcpy(bytes, from, sizeof(T)); }
  T& get() { return *reinterpret_cast<T*>(bytes); }
};

template <typename R, typename... A, std::size_t... I>
inline R call_unpacked(R (*fn)(A...), void** params, std::index_sequence<I...>) {
  return fn(param_copy<param_t<A>>(params[I]).get()...);
}

// The byte size of each parameter, after their count: what the host driver answers for cuFuncGetParamInfo,
// so that a RawKernel call with the wrong argument types is refused before it runs (as on a GPU).
template <typename R, typename... A>
struct param_sizes_of {
  static constexpr unsigned long long value[] = {sizeof...(A), sizeof(param_t<A>)...};
};
template <typename R, typename... A>
constexpr const unsigned long long* param_sizes(R (*)(A...)) {
  return param_sizes_of<R, A...>::value;
}

inline int report(kspec_host_fault* out, int code, const char* message) {
  out->code = code;
  std::snprintf(out->message, sizeof out->message, "%s", message);
  return code;
}

// A loop kernel: one call on this thread; faults raised inside (by any worker of parallel_for) come back
// as a thrown kspec_host::fault.
template <bool UsesSync, typename... A>
inline int run_entry(loop_kernel (*fn)(A...), const char* name, void** params, const kspec_host_launch* launch,
                     kspec_host_fault* out) {
  current_launch() = launch;
  current_kernel() = name;
  out->code = 0;
  out->message[0] = '\0';
  try {
    call_unpacked(fn, params, std::index_sequence_for<A...>{});
  } catch (const fault& f) {
    return report(out, f.code, f.message);
  } catch (const std::exception& e) {
    char text[2048];
    std::snprintf(text, sizeof text, "kernel '%s': C++ exception: %s", name, e.what());
    return report(out, fault_exception, text);
  }
  return 0;
}

}  // namespace kspec_host
