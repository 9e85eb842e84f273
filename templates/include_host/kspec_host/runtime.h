// kspec's CPU device: the execution model of CUDA kernels on the host (helper EXEC's part of the prelude).
// run_entry's grid overload runs a `void` kernel over its grid: blocks in parallel on launch->threads OS
// workers that take block numbers from an atomic counter; within a block, either each thread runs to
// completion in turn (UsesSync=false: the source has no block or warp synchronisation) or the threads run
// as fibers that meet at __syncthreads() and warp operations (UsesSync=true). __shared__ variables are
// static thread_local: a worker runs one block at a time, and its fibers share them.
#pragma once

#include <kspec_host/entry.h>
#include <kspec_host/exec_state.h>
#include <kspec_host/exec_fiber.h>
#include <kspec_host/exec_block.h>
#include <kspec_host/exec_warp.h>
#include <kspec_host/exec_atomics.h>

#include <atomic>
#include <cstdlib>
#include <exception>
#include <thread>
#include <utility>
#include <vector>

#define __shared__ static thread_local

namespace kspec_host {
namespace exec {

// What all workers of one launch share.
struct grid_job {
  const kspec_host_launch* launch;
  const char* name;
  unsigned long long blocks;
  std::atomic<unsigned long long> next{0};
  std::atomic<bool> stop{false};
  std::atomic<bool> reported{false};
  kspec_host_fault* out;

  void fail(int code, const char* message) {
    fault f;
    f.code = code;
    std::snprintf(f.message, sizeof f.message, "%s", message);
    fail(f);
  }
  void fail(const fault& f) {
    stop.store(true, std::memory_order_relaxed);
    if (!reported.exchange(true)) report(out, f);
  }
};

// Dynamic shared memory of one worker, 64-byte aligned, kept between launches on this OS thread.
inline unsigned char* dynamic_shared_memory(unsigned long long bytes) {
  struct buffer {
    unsigned char* data = nullptr;
    unsigned long long size = 0;
    ~buffer() { std::free(data); }
  };
  static thread_local buffer memory;
  if (bytes > memory.size) {
    std::free(memory.data);
    memory.data = static_cast<unsigned char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
    memory.size = memory.data ? bytes : 0;
    if (!memory.data) throw std::bad_alloc();
  }
  return memory.data;
}

template <typename... A>
struct kernel_call {
  void (*fn)(A...);
  void** params;
  static void run(void* self) {
    auto* call = static_cast<kernel_call*>(self);
    call_unpacked(call->fn, call->params, std::index_sequence_for<A...>{});
  }
};

template <bool UsesSync, typename... A>
inline void grid_worker(grid_job& job, void (*fn)(A...), void** params) {
  const kspec_host_launch& launch = *job.launch;
  current_launch() = job.launch;
  current_kernel() = job.name;
  in_grid() = true;
  gridDim = dim3(launch.grid[0], launch.grid[1], launch.grid[2]);
  blockDim = dim3(launch.block[0], launch.block[1], launch.block[2]);
  const unsigned threads = threads_per_block();
  kernel_call<A...> call{fn, params};
  block fibers;
  const bool as_fibers = UsesSync && threads > 1;
  if (as_fibers) {
    fibers.stacks = stacks().take();
    fibers.body = &kernel_call<A...>::run;
    fibers.body_data = &call;
  }
  try {
    dynamic_shared_pointer() = dynamic_shared_memory(launch.shared_bytes ? launch.shared_bytes : 16);
    const bool finished = guarded([&] {
      for (;;) {
        if (job.stop.load(std::memory_order_relaxed)) break;
        const unsigned long long b = job.next.fetch_add(1, std::memory_order_relaxed);
        if (b >= job.blocks) break;
        blockIdx = uint3{static_cast<unsigned>(b % launch.grid[0]),
                         static_cast<unsigned>(b / launch.grid[0] % launch.grid[1]),
                         static_cast<unsigned>(b / launch.grid[0] / launch.grid[1])};
        if (as_fibers) {
          run_fibers(fibers);
          continue;
        }
        for (unsigned z = 0; z < blockDim.z; ++z)
          for (unsigned y = 0; y < blockDim.y; ++y)
            for (unsigned x = 0; x < blockDim.x; ++x) {
              threadIdx = uint3{x, y, z};
              call_unpacked(fn, params, std::index_sequence_for<A...>{});
            }
      }
    });
    if (!finished) {  // a hardware fault: blockIdx / threadIdx still name the thread that took it
      current_block() = nullptr;  // run_fibers' own reset was jumped over
      char where[160];
      where_now(where, sizeof where);
      job.fail(signal_fault(job.name, where));
    }
  } catch (const fault& f) {
    job.fail(f);
  } catch (const std::exception& e) {
    char text[2048];
    std::snprintf(text, sizeof text, "kernel '%s': C++ exception: %s", job.name, e.what());
    job.fail(fault_exception, text);
  } catch (...) {
    char text[512];
    std::snprintf(text, sizeof text, "kernel '%s': unknown C++ exception", job.name);
    job.fail(fault_exception, text);
  }
  stacks().give(std::move(fibers.stacks));
  in_grid() = false;
}

// Below this many thread runs a launch stays on the calling thread (starting workers costs more).
constexpr unsigned long long inline_work = 1u << 14;

}  // namespace exec

// A CUDA kernel: runs its grid (see the top of this file). Returns 0, or the fault code with `out` filled.
template <bool UsesSync, typename... A>
inline int run_entry(void (*fn)(A...), const char* name, void** params, const kspec_host_launch* launch,
                     kspec_host_fault* out) {
  out->code = 0;
  out->message[0] = '\0';
  exec::grid_job job;
  job.launch = launch;
  job.name = name;
  job.out = out;
  job.blocks = 1ULL * launch->grid[0] * launch->grid[1] * launch->grid[2];
  const unsigned long long threads = 1ULL * launch->block[0] * launch->block[1] * launch->block[2];
  if (!job.blocks || !threads) return 0;
  unsigned long long workers = launch->threads > 1 ? static_cast<unsigned long long>(launch->threads) : 1ULL;
  if (workers > job.blocks) workers = job.blocks;
  if (job.blocks * threads < exec::inline_work) workers = 1;
  std::vector<std::thread> pool;
  try {
    for (unsigned long long w = 1; w < workers; ++w)
      pool.emplace_back([&job, fn, params] { exec::grid_worker<UsesSync>(job, fn, params); });
  } catch (const std::exception& e) {
    job.stop = true;
    for (std::thread& t : pool) t.join();
    char text[512];
    std::snprintf(text, sizeof text, "kernel '%s': could not start worker threads: %s", name, e.what());
    return report(out, fault_exception, text);
  }
  const kspec_host_launch* outer_launch = current_launch();
  const char* outer_kernel = current_kernel();
  exec::grid_worker<UsesSync>(job, fn, params);
  for (std::thread& t : pool) t.join();
  current_launch() = outer_launch;
  current_kernel() = outer_kernel;
  return out->code;
}

}  // namespace kspec_host
