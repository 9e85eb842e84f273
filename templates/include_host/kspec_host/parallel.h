// kspec's CPU device: how host loop kernels (templates/host/*.cpp.j2) spread a loop over the launch's worker
// threads. `parallel_for(n, grain, body)` calls body(begin, end) on disjoint chunks covering [0, n); the
// caller is one of the workers, the others are std::threads made for this call (a launch is one call, and
// making a thread costs tens of microseconds, which loops smaller than the grain never pay: they run inline).
// A fault (or any exception) in a worker stops the others at their next chunk and is rethrown on the caller
// once every worker has stopped, so run_entry (kspec_host/entry.h) reports it.
#pragma once

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include <kspec_host/entry.h>

namespace kspec_host {

// Worker threads of the launch being run (>= 1): kspec_host_launch::threads.
inline int launch_threads() {
  const kspec_host_launch* launch = current_launch();
  return launch != nullptr && launch->threads > 1 ? launch->threads : 1;
}

// Chunks per worker: a few, so that a worker slowed down (by the OS, or by costlier elements) leaves its
// remaining chunks to the others.
constexpr long long kChunksPerWorker = 4;

// Elements of a simple loop worth a thread of their own (elementwise kernels; reductions divide it by the
// row length).
constexpr long long kLoopGrain = 1LL << 15;

template <typename Body>
void parallel_for(long long n, long long grain, Body&& body) {
  if (n <= 0) return;
  grain = std::max(grain, 1LL);
  const long long workers_wanted = std::min<long long>(launch_threads(), (n + grain - 1) / grain);
  if (workers_wanted <= 1) {
    body(0LL, n);
    return;
  }
  const int workers = static_cast<int>(workers_wanted);
  const long long nchunks = std::min(n, workers * kChunksPerWorker);
  const long long base = n / nchunks, extra = n % nchunks;  // chunk c: base elements, plus one when c < extra
  std::atomic<long long> next{0};
  std::atomic<bool> stop{false};
  std::exception_ptr failure;
  std::mutex failure_lock;
  const kspec_host_launch* launch = current_launch();
  const char* kernel = current_kernel();
  auto work = [&]() {
    current_launch() = launch;
    current_kernel() = kernel;
    try {
      const bool finished = guarded([&] {  // a worker thread's hardware fault is a fault like any other
        for (;;) {
          if (stop.load(std::memory_order_relaxed)) return;
          const long long c = next.fetch_add(1, std::memory_order_relaxed);
          if (c >= nchunks) return;
          const long long begin = c * base + std::min(c, extra);
          body(begin, begin + base + (c < extra ? 1 : 0));
        }
      });
      if (!finished) throw signal_fault(kernel, "");
    } catch (...) {
      stop.store(true);
      std::lock_guard<std::mutex> hold(failure_lock);
      if (!failure) failure = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(workers - 1);
  try {
    for (int w = 1; w < workers; ++w) threads.emplace_back(work);
  } catch (...) {  // no more threads to be had: the ones made (and the caller) do the work
  }
  work();
  for (std::thread& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace kspec_host
