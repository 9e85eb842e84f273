// kspec's CPU device, execution model (3/5): one block's threads as fibers, and the barriers between them.
// A round resumes every runnable thread once; each runs until it waits (at __syncthreads, or at a warp
// operation) or returns. When none can run: waiting warp operations complete first (each warp's waiters
// together), else, when every live thread waits at the block barrier, that barrier opens. Threads that
// returned no longer count, as on the GPU.
#pragma once

#include <kspec_host/exec_fiber.h>
#include <kspec_host/exec_state.h>

#include <cstring>
#include <exception>
#include <vector>

namespace kspec_host {
namespace exec {

enum fiber_state : unsigned char { runnable, at_block_barrier, at_warp_barrier, finished };

struct fiber {
  context ctx;
  uint3 index;
  fiber_state state;
  int predicate;         // this thread's argument to __syncthreads_count/_and/_or
  unsigned warp_epoch;   // the warp operation this thread waits at (its warp's epoch on arrival)
};

// Values that a warp's threads exchange. Two buffers, alternating by epoch: a thread reads the buffer of
// its operation after the warp's next operation may already have started writing the other one.
struct warp_exchange {
  alignas(16) unsigned char value[2][32][32];
  unsigned tag[2][32];   // the epoch that lane's value belongs to: the lane took part iff it matches
  unsigned epoch = 1;
  unsigned waiting = 0;
};

struct block {
  std::vector<fiber> fibers;
  std::vector<warp_exchange> warps;
  std::vector<stack> stacks;
  context scheduler;
  unsigned current = 0;  // the fiber running now
  unsigned live = 0;
  unsigned at_barrier = 0;
  int barrier_count = 0;  // how many predicates were true at the barrier that opened last
  int barrier_size = 0;   // and how many threads it held
  void (*body)(void*) = nullptr;  // runs the kernel for the current thread
  void* body_data = nullptr;
  bool failed = false;
  fault failure;
};

// The block this OS thread runs as fibers; null in the one-thread-at-a-time path.
inline block*& current_block() {
  static thread_local block* value = nullptr;
  return value;
}

[[noreturn]] inline void unsupported_without_fibers(const char* what) {
  char text[512];
  std::snprintf(text, sizeof text,
                "%s was reached in a block of %u threads, but the source scan found no block or warp "
                "synchronisation in this kernel, so its threads do not run together",
                what, threads_per_block());
  raise_fault(fault_unsupported, text);
}

// Leaves the running fiber (which waits or has returned) for the next runnable one of this round, or for
// the scheduler at the end of the round: one switch per thread and barrier, not two.
inline void switch_from(block& b, context& from) {
  if (!b.failed) {
    const unsigned n = static_cast<unsigned>(b.fibers.size());
    for (unsigned i = b.current + 1; i < n; ++i) {
      fiber& next = b.fibers[i];
      if (next.state != runnable) continue;
      b.current = i;
      threadIdx = next.index;
      switch_context(from, next.ctx);
      return;
    }
  }
  switch_context(from, b.scheduler);
}

inline void yield_to_scheduler(block& b) {
  const unsigned me = b.current;
  switch_from(b, b.fibers[me].ctx);
  // resumed: whoever switched here set b.current and threadIdx to this fiber
}

inline void fiber_main(void* data) {
  block& b = *static_cast<block*>(data);
  try {
    b.body(b.body_data);
  } catch (const fault& f) {
    if (!b.failed) {
      b.failed = true;
      b.failure = f;
    }
  } catch (const std::exception& e) {
    if (!b.failed) {
      b.failed = true;
      b.failure.code = fault_exception;
      std::snprintf(b.failure.message, sizeof b.failure.message, "kernel '%s': C++ exception: %s", current_kernel(),
                    e.what());
    }
  } catch (...) {
    if (!b.failed) {
      b.failed = true;
      b.failure.code = fault_exception;
      std::snprintf(b.failure.message, sizeof b.failure.message, "kernel '%s': unknown C++ exception",
                    current_kernel());
    }
  }
  fiber& me = b.fibers[b.current];
  me.state = finished;
  --b.live;
  switch_from(b, me.ctx);
  __builtin_unreachable();
}

// Opens what can open once no thread can run; false when nothing waits (all threads returned).
inline bool open_barriers(block& b) {
  bool opened = false;
  const unsigned n = static_cast<unsigned>(b.fibers.size());
  for (unsigned w = 0; w < b.warps.size(); ++w) {
    warp_exchange& warp = b.warps[w];
    if (!warp.waiting) continue;
    const unsigned end = (w + 1) * 32 < n ? (w + 1) * 32 : n;
    for (unsigned t = w * 32; t < end; ++t)
      if (b.fibers[t].state == at_warp_barrier) b.fibers[t].state = runnable;
    warp.waiting = 0;
    ++warp.epoch;
    opened = true;
  }
  if (opened || !b.at_barrier) return opened;
  int count = 0;
  for (fiber& f : b.fibers) {
    if (f.state == at_block_barrier) {
      count += f.predicate != 0;
      f.state = runnable;
    }
  }
  b.barrier_count = count;
  b.barrier_size = static_cast<int>(b.at_barrier);
  b.at_barrier = 0;
  return true;
}

// Runs the block's threads (blockDim) as fibers; throws the first fault one of them raised.
inline void run_fibers(block& b) {
  const unsigned n = threads_per_block();
  while (b.stacks.size() < n) b.stacks.push_back(map_stack());
  b.fibers.resize(n);
  b.warps.resize((n + 31) / 32);
  for (warp_exchange& w : b.warps) {
    w.waiting = 0;
    std::memset(w.tag, 0, sizeof w.tag);
    w.epoch = 1;
  }
  unsigned t = 0;
  for (unsigned z = 0; z < blockDim.z; ++z)
    for (unsigned y = 0; y < blockDim.y; ++y)
      for (unsigned x = 0; x < blockDim.x; ++x, ++t) {
        fiber& f = b.fibers[t];
        f.index = uint3{x, y, z};
        f.state = runnable;
        f.predicate = 0;
        // stagger the stack tops so that the threads' top frames do not all fall in the same cache sets
        make_context(f.ctx, b.stacks[t].base, b.stacks[t].size - (t % 61) * 64, &fiber_main, &b);
      }
  b.live = n;
  b.at_barrier = 0;
  b.failed = false;
  current_block() = &b;
  struct leave {
    ~leave() { current_block() = nullptr; }
  } restore;
  for (;;) {
    for (unsigned i = 0; i < n; ++i) {
      fiber& f = b.fibers[i];
      if (f.state != runnable) continue;
      b.current = i;
      threadIdx = f.index;
      switch_context(b.scheduler, f.ctx);  // runs this round's runnable fibers, from i on
      break;
    }
    if (b.failed) throw b.failure;
    if (!b.live) return;
    if (!open_barriers(b)) return;
  }
}

// -- block barriers -------------------------------------------------------------------------------------

inline int block_barrier(const char* what, int predicate) {
  block* b = current_block();
  if (!b) {
    if (threads_per_block() > 1) unsupported_without_fibers(what);
    return predicate != 0;
  }
  fiber& me = b->fibers[b->current];
  me.state = at_block_barrier;
  me.predicate = predicate;
  ++b->at_barrier;
  yield_to_scheduler(*b);
  return b->barrier_count;
}

// -- warp operations ------------------------------------------------------------------------------------

// This thread's part of a warp operation: publish `size` bytes, wait for the warp, then read any lane's
// bytes with lane_value (null when that lane did not take part).
struct warp_operation {
  warp_exchange* warp = nullptr;  // null: a lone thread (a block of one thread)
  unsigned epoch = 0;
  unsigned lane = 0;
  unsigned lanes = 1;  // threads in this warp (the last warp of a block may be partial)
  const void* own = nullptr;

  const void* lane_value(unsigned source) const {
    if (!warp) return source == lane ? own : nullptr;
    if (source >= lanes) return nullptr;
    const unsigned buffer = epoch & 1u;
    return warp->tag[buffer][source] == epoch ? warp->value[buffer][source] : nullptr;
  }
};

inline warp_operation warp_exchange_bytes(const char* what, const void* data, std::size_t size) {
  warp_operation op;
  op.own = data;
  block* b = current_block();
  if (!b) {
    if (threads_per_block() > 1) unsupported_without_fibers(what);
    return op;
  }
  const unsigned t = b->current;
  warp_exchange& warp = b->warps[t / 32];
  const unsigned buffer = warp.epoch & 1u;
  op.warp = &warp;
  op.epoch = warp.epoch;
  op.lane = t % 32;
  const unsigned n = static_cast<unsigned>(b->fibers.size());
  op.lanes = n - t / 32 * 32 < 32 ? n - t / 32 * 32 : 32;
  std::memcpy(warp.value[buffer][op.lane], data, size);
  warp.tag[buffer][op.lane] = op.epoch;
  ++warp.waiting;
  fiber& me = b->fibers[t];
  me.state = at_warp_barrier;
  me.warp_epoch = op.epoch;
  yield_to_scheduler(*b);
  return op;
}

}  // namespace exec
}  // namespace kspec_host
