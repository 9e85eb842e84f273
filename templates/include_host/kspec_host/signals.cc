// kspec's CPU device: hardware faults (SIGSEGV, SIGBUS, SIGFPE) in kernel code become errors, not a dead
// process. A support library, built once by the host compiler and loaded by the runtime
// (kspec/runtime/host/_signals.py); host modules reach it through the function pointers of each launch
// (kspec_host_launch in entry.h), so that no module includes <signal.h> (its POSIX names would clash with
// names in device code) and one handler serves every module.
//
// While kernel code runs, its OS thread has a recovery point (sigsetjmp). The handler, on an alternate
// signal stack (a fiber's stack overflow leaves no stack to run on), jumps back to it; guarded() returns the
// signal's number. A signal on a thread with no recovery point goes to the handler installed before this one
// (Python's faulthandler, or the default action).
#include <signal.h>
#include <setjmp.h>
#include <ucontext.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#define KSPEC_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

thread_local sigjmp_buf* recovery = nullptr;
thread_local int last_signal = 0;
thread_local void* last_address = nullptr;
thread_local int last_access = 0;  // 1 read, 2 write, 0 unknown (what the CPU says of a page fault)
// A SIGSEGV the kernel raised itself (SI_KERNEL): on x86-64 a general-protection fault, an access to a
// non-canonical address (beyond the 47-bit address space, e.g. 2**40 floats past a high mapping). The CPU
// does not report that address: si_addr is 0, and describe() reports kUnknownAddress.
thread_local bool address_unknown = false;
constexpr unsigned long long kUnknownAddress = ~0ULL;
// Recovery points open on any thread: while there are none the handler reads no thread-local state (which a
// foreign thread may not have allocated yet) and passes the signal on at once.
std::atomic<int> open_points{0};

constexpr int kSignals[3] = {SIGSEGV, SIGBUS, SIGFPE};
struct sigaction previous[3];

void pass_on(int sig, siginfo_t* info, void* context) {
  for (int i = 0; i < 3; ++i) {
    if (kSignals[i] != sig) continue;
    struct sigaction& before = previous[i];
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

// Whether a SIGSEGV was a read or a write: x86-64's page-fault error code has the write bit (1 << 1); other
// CPUs do not say it in the signal context that portably, and the message then says neither.
int access_of(int sig, const siginfo_t* info, void* context) {
#if defined(__x86_64__) && defined(REG_ERR)
  // only a page fault's error code has the write bit (SEGV_MAPERR, SEGV_ACCERR; not SI_KERNEL's #GP)
  if (sig == SIGSEGV && context != nullptr && info != nullptr &&
      (info->si_code == SEGV_MAPERR || info->si_code == SEGV_ACCERR)) {
    const auto error = static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_ERR];
    return (error & 2) ? 2 : 1;
  }
#else
  (void)sig;
  (void)info;
  (void)context;
#endif
  return 0;
}

void on_signal(int sig, siginfo_t* info, void* context) {
  if (open_points.load(std::memory_order_relaxed) > 0 && recovery != nullptr) {
    last_signal = sig;
    last_address = info != nullptr ? info->si_addr : nullptr;
    last_access = access_of(sig, info, context);
    address_unknown = sig == SIGSEGV && info != nullptr && info->si_code == SI_KERNEL;
    siglongjmp(*recovery, 1);
  }
  pass_on(sig, info, context);
}

void install() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = &on_signal;
    sigemptyset(&action.sa_mask);
    // SA_NODEFER: the handler leaves by siglongjmp, which would leave the signal blocked on this thread.
    action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &action, &previous[i]);
  });
}

// An alternate signal stack for this OS thread, kept for its life, unless it has one (faulthandler's).
void ensure_alternate_stack() {
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
  if (sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE)) return;
  const size_t size = 64 * 1024;
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

struct restore {
  sigjmp_buf* outer;
  ~restore() {  // also when body throws (a kspec fault is a C++ exception)
    recovery = outer;
    open_points.fetch_sub(1, std::memory_order_relaxed);
  }
};

}  // namespace

// body(data) under a recovery point: 0, or the number of the signal a hardware fault inside it raised.
KSPEC_EXPORT int kspec_host_guarded(void (*body)(void*), void* data) {
  install();
  ensure_alternate_stack();
  sigjmp_buf point;
  sigjmp_buf* const outer = recovery;
  open_points.fetch_add(1, std::memory_order_relaxed);
  if (sigsetjmp(point, 0) != 0) {  // 0: no mask to save (SA_NODEFER left nothing blocked)
    recovery = outer;
    open_points.fetch_sub(1, std::memory_order_relaxed);
    return last_signal;
  }
  restore on_exit{outer};
  recovery = &point;
  body(data);
  return 0;
}

// The last hardware fault on this thread: its signal, address and "SIGSEGV (...) writing address 0x..." in text.
KSPEC_EXPORT void kspec_host_describe(int* signal, unsigned long long* address, char* text, unsigned long long size) {
  *signal = last_signal;
  *address = address_unknown ? kUnknownAddress : reinterpret_cast<unsigned long long>(last_address);
  const char* what = last_signal == SIGSEGV ? "SIGSEGV (invalid memory access)"
                     : last_signal == SIGBUS ? "SIGBUS (misaligned or unbacked memory access)"
                     : last_signal == SIGFPE ? "SIGFPE (arithmetic fault: integer division by zero or overflow)"
                                             : "a signal";
  const char* how = last_access == 2 ? "writing" : last_access == 1 ? "reading" : "at";
  if (address_unknown) {
    std::snprintf(text, size, "%s at an address the CPU does not report (a general-protection fault: a "
                  "non-canonical address, terabytes outside the address space)", what);
    return;
  }
  std::snprintf(text, size, "%s %s address %p", what, how, last_address);
}
