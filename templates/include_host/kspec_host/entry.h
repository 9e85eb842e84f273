// The C ABI between kspec's host driver (kspec/runtime, through ctypes) and a host module's entries, and
// the unpacking of CUDA-style kernelParams into a call. The host compiler appends one `kspec_entry_<hash>`
// per name expression; each calls run_entry, which picks how to run the function by its return type:
// a loop_kernel (kspec's host templates) is called once and parallelises itself; a void function is a
// CUDA kernel and runs as a grid (kspec_host/runtime.h).
#pragma once

#include <signal.h>  // sigaction, sigaltstack (POSIX)

#include <atomic>
#include <csetjmp>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
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
// program sees). While kernel code runs, its OS thread has a recovery point (sigsetjmp): the module's
// handler jumps back to it, and the launch reports fault_signal. A signal on a thread that runs no kernel
// code goes to the handler installed before (Python's faulthandler, or the default action). Each host
// module has its own copy of all this, and the handlers chain: a module's handler passes on what is not its.

struct signal_record {
  int signal;
  void* address;
};
inline sigjmp_buf*& recovery_point() {
  static thread_local sigjmp_buf* point = nullptr;
  return point;
}
inline signal_record& last_signal() {
  static thread_local signal_record record{0, nullptr};
  return record;
}
// Recovery points open in this module, on any thread: the handler reads no thread-local state (which a
// foreign thread may not have allocated yet) while there are none.
inline std::atomic<int>& open_recovery_points() {
  static std::atomic<int> count{0};
  return count;
}
constexpr int handled_signals[3] = {SIGSEGV, SIGBUS, SIGFPE};
inline struct sigaction* previous_actions() {
  static struct sigaction actions[3];
  return actions;
}

inline void on_signal(int sig, siginfo_t* info, void* context) {
  if (open_recovery_points().load(std::memory_order_relaxed) > 0) {
    sigjmp_buf* point = recovery_point();
    if (point != nullptr) {
      last_signal() = signal_record{sig, info != nullptr ? info->si_addr : nullptr};
      siglongjmp(*point, 1);
    }
  }
  for (int i = 0; i < 3; ++i) {
    if (handled_signals[i] != sig) continue;
    struct sigaction& before = previous_actions()[i];
    if ((before.sa_flags & SA_SIGINFO) && before.sa_sigaction != nullptr) {
      before.sa_sigaction(sig, info, context);
      return;
    }
    if (!(before.sa_flags & SA_SIGINFO) && before.sa_handler != SIG_DFL && before.sa_handler != SIG_IGN) {
      before.sa_handler(sig);
      return;
    }
    // the default action (an ignored SIGSEGV would fault forever): the instruction faults again under it
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    sigaction(sig, &fallback, nullptr);
    return;
  }
}

inline void install_signal_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = &on_signal;
    sigemptyset(&action.sa_mask);
    // SA_ONSTACK: a fiber's stack overflow faults on its guard page, with no stack left to handle it on;
    // SA_NODEFER: the handler leaves by siglongjmp, which would leave the signal blocked on this thread.
    action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    for (int i = 0; i < 3; ++i) sigaction(handled_signals[i], &action, &previous_actions()[i]);
  });
}

// An alternate signal stack for this OS thread (kept for the thread's life), unless it has one already.
inline void ensure_alternate_stack() {
  struct alternate {
    void* memory = nullptr;
    bool checked = false;
    ~alternate() {
      if (memory == nullptr) return;
      stack_t off{};
      off.ss_flags = SS_DISABLE;
      sigaltstack(&off, nullptr);
      std::free(memory);
    }
  };
  static thread_local alternate stack;
  if (stack.checked) return;
  stack.checked = true;
  stack_t current{};
  if (sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE)) return;  // e.g. faulthandler's
  const std::size_t size = 64 * 1024;
  void* memory = std::malloc(size);
  if (memory == nullptr) return;
  stack_t mine{};
  mine.ss_sp = memory;
  mine.ss_size = size;
  if (sigaltstack(&mine, nullptr) == 0) {
    stack.memory = memory;
  } else {
    std::free(memory);
  }
}

// Runs f() with a recovery point on this thread: true, or false after a hardware fault inside it
// (last_signal() says which, and where). Objects f had on its stack are abandoned, not destroyed.
template <typename F>
inline bool guarded(F&& f) {
  install_signal_handlers();
  ensure_alternate_stack();
  sigjmp_buf point;
  sigjmp_buf* const outer = recovery_point();
  open_recovery_points().fetch_add(1, std::memory_order_relaxed);
  struct restore {
    sigjmp_buf* outer;
    ~restore() {
      recovery_point() = outer;
      open_recovery_points().fetch_sub(1, std::memory_order_relaxed);
    }
  };
  if (sigsetjmp(point, 0) != 0) {  // 0: no signal mask to save (SA_NODEFER leaves nothing blocked)
    recovery_point() = outer;
    open_recovery_points().fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  {
    restore on_exit{outer};  // also when f throws a fault of its own
    recovery_point() = &point;
    f();
  }
  return true;
}

// "SIGSEGV (invalid memory access) at address 0x..." for the last signal on this thread.
inline void describe_signal(char* text, std::size_t size) {
  const signal_record record = last_signal();
  const char* what = record.signal == SIGSEGV ? "SIGSEGV (invalid memory access)"
                     : record.signal == SIGBUS ? "SIGBUS (misaligned or unbacked memory access)"
                     : record.signal == SIGFPE ? "SIGFPE (arithmetic fault: integer division by zero or overflow)"
                                               : "a signal";
  std::snprintf(text, size, "%s at address %p", what, record.address);
}

// A fault (code fault_signal) for the last signal on this thread: its message starts "kernel 'NAME': ".
inline fault signal_fault(const char* kernel, const char* where) {
  fault f;
  f.code = fault_signal;
  char what[256];
  describe_signal(what, sizeof what);
  std::snprintf(f.message, sizeof f.message, "kernel '%s': %s%s", kernel, what, where);
  f.signal = last_signal().signal;
  f.address = reinterpret_cast<unsigned long long>(last_signal().address);
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
