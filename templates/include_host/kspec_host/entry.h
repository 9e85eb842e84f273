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
  // From kspec_host/signals.cc, a support library the runtime builds and loads once (the one place that
  // includes <signal.h>: its POSIX names would clash with names in device code). guarded runs body(data) so
  // that a hardware fault (SIGSEGV, SIGBUS, SIGFPE) inside it returns the signal's number instead of killing
  // the process; describe says what the last one on this thread was. Null: kernels run unguarded.
  int (*guarded)(void (*body)(void*), void* data);
  void (*describe)(int* signal, unsigned long long* address, char* text, unsigned long long size);
};
struct kspec_host_fault {
  int code;  // 0 ok, 1 index out of bounds, 2 trap/assert, 3 unsupported at run time, 4 C++ exception, 5 signal
  char message[2048];
  int signal;                  // code 5: SIGSEGV, SIGBUS or SIGFPE
  unsigned long long address;  // code 5: the faulting address (si_addr)
};
}

namespace kspec_host {

// The return type of host loop kernels: run_entry calls them once instead of running a grid.
struct loop_kernel {};

enum fault_code {
  fault_none = 0, fault_bounds = 1, fault_trap = 2, fault_unsupported = 3, fault_exception = 4, fault_signal = 5
};

// What a fault throws inside device code; caught by the runner, never crosses into Python.
struct fault {
  int code;
  char message[2048];
  int signal = 0;
  unsigned long long address = 0;
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

inline int report(kspec_host_fault* out, const fault& f) {
  out->signal = f.signal;
  out->address = f.address;
  return report(out, f.code, f.message);
}

// -- hardware faults in kernel code (SIGSEGV, SIGBUS, SIGFPE) -------------------------------------------
// A kernel thread that faults must not kill the Python process (on a GPU the same bug is an error the
// program sees): kernel code runs inside the launch's `guarded` (kspec_host/signals.cc), which turns a fault
// into a return. Objects f had on its stack are abandoned, not destroyed.
template <typename F>
inline bool guarded(F&& f) {
  const kspec_host_launch* launch = current_launch();
  if (launch == nullptr || launch->guarded == nullptr) {
    f();
    return true;
  }
  using body_t = std::remove_reference_t<F>;
  return launch->guarded([](void* data) { (*static_cast<body_t*>(data))(); }, &f) == 0;
}

// A fault (code fault_signal) for the last signal on this thread: its message starts "kernel 'NAME': ".
inline fault signal_fault(const char* kernel, const char* where) {
  fault f;
  f.code = fault_signal;
  char what[256] = "a hardware fault";
  const kspec_host_launch* launch = current_launch();
  if (launch != nullptr && launch->describe != nullptr) launch->describe(&f.signal, &f.address, what, sizeof what);
  std::snprintf(f.message, sizeof f.message, "kernel '%s': %s%s", kernel, what, where);
  return f;
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
    if (!guarded([&] { call_unpacked(fn, params, std::index_sequence_for<A...>{}); }))
      return report(out, signal_fault(name, ""));
  } catch (const fault& f) {
    return report(out, f);
  } catch (const std::exception& e) {
    char text[2048];
    std::snprintf(text, sizeof text, "kernel '%s': C++ exception: %s", name, e.what());
    return report(out, fault_exception, text);
  }
  return 0;
}

}  // namespace kspec_host
