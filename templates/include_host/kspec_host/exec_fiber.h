// kspec's CPU device, execution model (2/5): fibers, the user-space threads that run a block's CUDA threads
// when the kernel synchronises (__syncthreads, warp shuffles...). A switch saves the callee-saved registers,
// the stack pointer and the floating-point control words, in a few instructions of x86-64 or aarch64
// assembly (glibc's swapcontext makes a system call per switch; it is the fallback on other machines, or with
// -DKSPEC_HOST_FIBER_UCONTEXT). Stacks are mmap'd once, with a guard page, and reused by later blocks.
#pragma once

#include <sys/mman.h>  // (not unistd.h: its many POSIX names would clash with names in device code)

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#if !defined(KSPEC_HOST_FIBER_UCONTEXT) && !defined(__x86_64__) && !defined(__aarch64__)
#define KSPEC_HOST_FIBER_UCONTEXT 1
#endif
#ifdef KSPEC_HOST_FIBER_UCONTEXT
#include <ucontext.h>
#endif

#ifndef KSPEC_HOST_FIBER_STACK
#define KSPEC_HOST_FIBER_STACK (256u * 1024u)
#endif

namespace kspec_host {
namespace exec {

using fiber_entry = void (*)(void*);

#ifndef KSPEC_HOST_FIBER_UCONTEXT
extern "C" void kspec_host_fiber_switch(void** save_sp, void* load_sp);
extern "C" void kspec_host_fiber_start();

// A suspended context: its stack pointer, pointing at the saved registers.
struct context {
  void* sp = nullptr;
};
inline void switch_context(context& from, context& to) { kspec_host_fiber_switch(&from.sp, to.sp); }

#if defined(__x86_64__)
// Saved frame, from the stack pointer up: mxcsr + x87 control word (8 bytes), r15 r14 r13 r12 rbx rbp, the
// return address. A new fiber "returns" into kspec_host_fiber_start with its entry in rbx and argument in r12.
asm(R"(
  .text
  .p2align 4
  .hidden kspec_host_fiber_switch
  .globl kspec_host_fiber_switch
  .type kspec_host_fiber_switch, @function
kspec_host_fiber_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size kspec_host_fiber_switch, .-kspec_host_fiber_switch

  .p2align 4
  .hidden kspec_host_fiber_start
  .globl kspec_host_fiber_start
  .type kspec_host_fiber_start, @function
kspec_host_fiber_start:
  .cfi_startproc
  .cfi_undefined rip
  movq %r12, %rdi
  callq *%rbx
  ud2
  .cfi_endproc
  .size kspec_host_fiber_start, .-kspec_host_fiber_start
)");

inline void make_context(context& c, char* stack, std::size_t size, fiber_entry entry, void* arg) {
  auto top = reinterpret_cast<std::uintptr_t>(stack + size) & ~std::uintptr_t(15);
  auto* frame = reinterpret_cast<std::uint64_t*>(top) - 8;  // 8 words: control, 6 registers, return
  std::uint32_t mxcsr;
  std::uint16_t x87;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(x87));
  frame[0] = std::uint64_t(mxcsr) | (std::uint64_t(x87) << 32);
  frame[1] = 0;                                          // r15
  frame[2] = 0;                                          // r14
  frame[3] = 0;                                          // r13
  frame[4] = reinterpret_cast<std::uint64_t>(arg);       // r12
  frame[5] = reinterpret_cast<std::uint64_t>(entry);     // rbx
  frame[6] = 0;                                          // rbp
  frame[7] = reinterpret_cast<std::uint64_t>(&kspec_host_fiber_start);
  c.sp = frame;  // after the ret, rsp == top (16-byte aligned), as a call site leaves it
}
#else  // __aarch64__
// Saved frame (176 bytes): x19..x30 (12 words), d8..d15 (8 words), fpcr and padding (2 words).
asm(R"(
  .text
  .p2align 4
  .hidden kspec_host_fiber_switch
  .globl kspec_host_fiber_switch
  .type kspec_host_fiber_switch, %function
kspec_host_fiber_switch:
  sub sp, sp, #176
  stp x19, x20, [sp, #0]
  stp x21, x22, [sp, #16]
  stp x23, x24, [sp, #32]
  stp x25, x26, [sp, #48]
  stp x27, x28, [sp, #64]
  stp x29, x30, [sp, #80]
  stp d8, d9, [sp, #96]
  stp d10, d11, [sp, #112]
  stp d12, d13, [sp, #128]
  stp d14, d15, [sp, #144]
  mrs x9, fpcr
  str x9, [sp, #160]
  mov x9, sp
  str x9, [x0]
  mov sp, x1
  ldp x19, x20, [sp, #0]
  ldp x21, x22, [sp, #16]
  ldp x23, x24, [sp, #32]
  ldp x25, x26, [sp, #48]
  ldp x27, x28, [sp, #64]
  ldp x29, x30, [sp, #80]
  ldp d8, d9, [sp, #96]
  ldp d10, d11, [sp, #112]
  ldp d12, d13, [sp, #128]
  ldp d14, d15, [sp, #144]
  ldr x9, [sp, #160]
  msr fpcr, x9
  add sp, sp, #176
  ret
  .size kspec_host_fiber_switch, .-kspec_host_fiber_switch

  .p2align 4
  .hidden kspec_host_fiber_start
  .globl kspec_host_fiber_start
  .type kspec_host_fiber_start, %function
kspec_host_fiber_start:
  .cfi_startproc
  .cfi_undefined x30
  mov x0, x20
  blr x19
  brk #0
  .cfi_endproc
  .size kspec_host_fiber_start, .-kspec_host_fiber_start
)");

inline void make_context(context& c, char* stack, std::size_t size, fiber_entry entry, void* arg) {
  auto top = reinterpret_cast<std::uintptr_t>(stack + size) & ~std::uintptr_t(15);
  auto* frame = reinterpret_cast<std::uint64_t*>(top - 176);
  for (int k = 0; k < 22; ++k) frame[k] = 0;
  frame[0] = reinterpret_cast<std::uint64_t>(entry);  // x19
  frame[1] = reinterpret_cast<std::uint64_t>(arg);    // x20
  frame[11] = reinterpret_cast<std::uint64_t>(&kspec_host_fiber_start);  // x30: where ret goes
  std::uint64_t fpcr;
  asm volatile("mrs %0, fpcr" : "=r"(fpcr));
  frame[20] = fpcr;
  c.sp = frame;
}
#endif

#else  // KSPEC_HOST_FIBER_UCONTEXT
struct context {
  ucontext_t uc;
  fiber_entry entry = nullptr;
  void* arg = nullptr;
};
inline void switch_context(context& from, context& to) { swapcontext(&from.uc, &to.uc); }

inline void ucontext_trampoline(unsigned hi, unsigned lo) {
  auto* c = reinterpret_cast<context*>((std::uintptr_t(hi) << 32) | std::uintptr_t(lo));
  c->entry(c->arg);
}
// The context must stay where it is while the fiber runs (it lives in the block's fiber table).
inline void make_context(context& c, char* stack, std::size_t size, fiber_entry entry, void* arg) {
  c.entry = entry;
  c.arg = arg;
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = size;
  c.uc.uc_link = nullptr;
  auto bits = reinterpret_cast<std::uintptr_t>(&c);
  makecontext(&c.uc, reinterpret_cast<void (*)()>(&ucontext_trampoline), 2, unsigned(bits >> 32),
              unsigned(bits & 0xffffffffu));
}
#endif

// One mmap'd stack with a guard page below it.
struct stack {
  char* base = nullptr;  // usable memory, above the guard page
  std::size_t size = 0;
};

constexpr std::size_t stack_guard = 64 * 1024;  // a multiple of every page size

inline stack map_stack() {
  constexpr std::size_t guard = stack_guard;
  constexpr std::size_t size = (KSPEC_HOST_FIBER_STACK + guard - 1) / guard * guard;
  void* memory = mmap(nullptr, size + guard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED) throw std::bad_alloc();
  mprotect(memory, guard, PROT_NONE);
  return stack{static_cast<char*>(memory) + guard, size};
}

// Stacks outlive a launch: workers borrow sets of them from this pool and give them back.
struct stack_pool {
  std::mutex lock;
  std::vector<std::vector<stack>> free_sets;

  std::vector<stack> take() {
    std::lock_guard<std::mutex> guard(lock);
    if (free_sets.empty()) return {};
    std::vector<stack> set = std::move(free_sets.back());
    free_sets.pop_back();
    return set;
  }
  ~stack_pool() {  // the module is unloaded: no fiber runs any more
    for (std::vector<stack>& set : free_sets)
      for (stack& s : set) munmap(s.base - stack_guard, s.size + stack_guard);
  }
  void give(std::vector<stack>&& set) {
    if (set.empty()) return;
    std::lock_guard<std::mutex> guard(lock);
    free_sets.push_back(std::move(set));
  }
};
inline stack_pool& stacks() {
  static stack_pool pool;
  return pool;
}

}  // namespace exec
}  // namespace kspec_host
