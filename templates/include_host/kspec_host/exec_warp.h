// kspec's CPU device, execution model (4/5): CUDA's synchronisation and warp intrinsics. A warp is 32
// consecutive linear thread ids of a block; warp operations exchange values through the block scheduler
// (kspec_host/exec_block.h). Lanes that returned, or that wait elsewhere, do not take part: a shuffle
// from such a lane gives the caller's own value, a vote does not count it.
#pragma once

#include <kspec_host/exec_block.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <type_traits>

inline void __syncthreads() { kspec_host::exec::block_barrier("__syncthreads()", 0); }
inline int __syncthreads_count(int predicate) {
  return kspec_host::exec::block_barrier("__syncthreads_count()", predicate != 0);
}
inline int __syncthreads_and(int predicate) {
  const int count = kspec_host::exec::block_barrier("__syncthreads_and()", predicate != 0);
  const kspec_host::exec::block* b = kspec_host::exec::current_block();
  return count == (b ? b->barrier_size : 1);
}
inline int __syncthreads_or(int predicate) {
  return kspec_host::exec::block_barrier("__syncthreads_or()", predicate != 0) != 0;
}

inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __nanosleep(unsigned int) {}

inline long long clock64() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace kspec_host {
namespace exec {

template <typename T>
inline T lane_or_own(const warp_operation& op, int source, const T& own) {
  if (source < 0 || source >= 32) return own;
  const void* bytes = op.lane_value(static_cast<unsigned>(source));
  if (!bytes) return own;
  T value;
  std::memcpy(static_cast<void*>(&value), bytes, sizeof(T));
  return value;
}

template <typename T>
inline warp_operation publish(const char* what, const T& value) {
  static_assert(sizeof(T) <= 32, "kspec's CPU device shuffles values of up to 32 bytes");
  static_assert(std::is_trivially_copyable<T>::value, "shuffled values must be trivially copyable");
  return warp_exchange_bytes(what, &value, sizeof(T));
}

// Lanes that took part in `op`, within `mask`.
inline unsigned participants(const warp_operation& op, unsigned mask) {
  unsigned bits = 0;
  for (unsigned l = 0; l < 32; ++l)
    if (op.lane_value(l)) bits |= 1u << l;
  return bits & mask;
}

}  // namespace exec
}  // namespace kspec_host

inline void __syncwarp(unsigned mask = 0xffffffffu) {
  const char nothing = 0;
  kspec_host::exec::publish("__syncwarp()", nothing);
  (void)mask;
}

// The lanes that reach this call together (a warp operation of its own): in a divergent branch, the
// branch's lanes, as on the GPU.
inline unsigned __activemask() {
  const char nothing = 0;
  const auto op = kspec_host::exec::publish("__activemask()", nothing);
  return op.warp ? kspec_host::exec::participants(op, 0xffffffffu) : 1u << op.lane;
}


template <typename T>
inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32) {
  (void)mask;
  const auto op = kspec_host::exec::publish("__shfl_sync()", var);
  const int lane = static_cast<int>(op.lane);
  const int source = (lane & ~(width - 1)) + (src_lane & (width - 1));
  return kspec_host::exec::lane_or_own(op, source, var);
}
template <typename T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  (void)mask;
  const auto op = kspec_host::exec::publish("__shfl_up_sync()", var);
  const int lane = static_cast<int>(op.lane);
  if ((lane & (width - 1)) < static_cast<int>(delta)) return var;
  return kspec_host::exec::lane_or_own(op, lane - static_cast<int>(delta), var);
}
template <typename T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  (void)mask;
  const auto op = kspec_host::exec::publish("__shfl_down_sync()", var);
  const int lane = static_cast<int>(op.lane);
  if ((lane & (width - 1)) + static_cast<int>(delta) >= width) return var;
  return kspec_host::exec::lane_or_own(op, lane + static_cast<int>(delta), var);
}
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32) {
  (void)mask;
  const auto op = kspec_host::exec::publish("__shfl_xor_sync()", var);
  const int lane = static_cast<int>(op.lane);
  const int source = lane ^ lane_mask;
  // a lane may read from its own or an earlier group of `width` lanes, not a later one
  if (source / width > lane / width) return var;
  return kspec_host::exec::lane_or_own(op, source, var);
}

inline unsigned __ballot_sync(unsigned mask, int predicate) {
  const int own = predicate != 0;
  const auto op = kspec_host::exec::publish("__ballot_sync()", own);
  unsigned bits = 0;
  for (unsigned l = 0; l < 32; ++l) {
    const void* vote = op.lane_value(l);
    int value = 0;
    if (vote) std::memcpy(&value, vote, sizeof value);
    if (value) bits |= 1u << l;
  }
  return bits & mask;
}
inline int __any_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) != 0; }
inline int __all_sync(unsigned mask, int predicate) {
  const int own = predicate != 0;
  const auto op = kspec_host::exec::publish("__all_sync()", own);
  const unsigned taking_part = op.warp ? kspec_host::exec::participants(op, mask) : 1u;
  for (unsigned l = 0; l < 32; ++l)
    if ((taking_part >> l & 1u) && !kspec_host::exec::lane_or_own(op, static_cast<int>(l), own)) return 0;
  return 1;
}
inline unsigned __uni_sync(unsigned mask, int predicate) {
  return __all_sync(mask, predicate) || !__any_sync(mask, predicate);
}

namespace kspec_host {
namespace exec {
template <typename T, typename Combine>
inline T warp_reduce(const char* what, unsigned mask, T value, Combine combine) {
  const auto op = publish(what, value);
  if (!op.warp) return value;
  const unsigned taking_part = participants(op, mask);
  T result = value;
  bool first = true;
  for (unsigned l = 0; l < 32; ++l) {
    if (!(taking_part >> l & 1u)) continue;
    const T v = lane_or_own(op, static_cast<int>(l), value);
    result = first ? v : combine(result, v);
    first = false;
  }
  return result;
}
}  // namespace exec
}  // namespace kspec_host

inline unsigned __reduce_add_sync(unsigned mask, unsigned value) {
  return kspec_host::exec::warp_reduce("__reduce_add_sync()", mask, value, [](unsigned a, unsigned b) { return a + b; });
}
inline int __reduce_add_sync(unsigned mask, int value) {
  return static_cast<int>(__reduce_add_sync(mask, static_cast<unsigned>(value)));
}
inline unsigned __reduce_min_sync(unsigned mask, unsigned value) {
  return kspec_host::exec::warp_reduce("__reduce_min_sync()", mask, value, [](unsigned a, unsigned b) { return a < b ? a : b; });
}
inline int __reduce_min_sync(unsigned mask, int value) {
  return kspec_host::exec::warp_reduce("__reduce_min_sync()", mask, value, [](int a, int b) { return a < b ? a : b; });
}
inline unsigned __reduce_max_sync(unsigned mask, unsigned value) {
  return kspec_host::exec::warp_reduce("__reduce_max_sync()", mask, value, [](unsigned a, unsigned b) { return a > b ? a : b; });
}
inline int __reduce_max_sync(unsigned mask, int value) {
  return kspec_host::exec::warp_reduce("__reduce_max_sync()", mask, value, [](int a, int b) { return a > b ? a : b; });
}
inline unsigned __reduce_and_sync(unsigned mask, unsigned value) {
  return kspec_host::exec::warp_reduce("__reduce_and_sync()", mask, value, [](unsigned a, unsigned b) { return a & b; });
}
inline unsigned __reduce_or_sync(unsigned mask, unsigned value) {
  return kspec_host::exec::warp_reduce("__reduce_or_sync()", mask, value, [](unsigned a, unsigned b) { return a | b; });
}
inline unsigned __reduce_xor_sync(unsigned mask, unsigned value) {
  return kspec_host::exec::warp_reduce("__reduce_xor_sync()", mask, value, [](unsigned a, unsigned b) { return a ^ b; });
}

namespace kspec_host {
namespace exec {
// The lanes taking part in a match (within mask), and those among them whose value equals this lane's.
template <typename T>
inline void match(const char* what, unsigned mask, const T& value, unsigned& taking_part, unsigned& same) {
  const auto op = publish(what, value);
  taking_part = op.warp ? participants(op, mask) : (1u << op.lane) & mask;
  same = 0;
  for (unsigned l = 0; l < 32; ++l)
    if ((taking_part >> l & 1u) && std::memcmp(op.lane_value(l), &value, sizeof(T)) == 0) same |= 1u << l;
}
}  // namespace exec
}  // namespace kspec_host

template <typename T>
inline unsigned __match_any_sync(unsigned mask, T value) {
  unsigned taking_part, same;
  kspec_host::exec::match("__match_any_sync()", mask, value, taking_part, same);
  return same;
}
template <typename T>
inline unsigned __match_all_sync(unsigned mask, T value, int* predicate) {
  unsigned taking_part, same;
  kspec_host::exec::match("__match_all_sync()", mask, value, taking_part, same);
  *predicate = same == taking_part;
  return *predicate ? same : 0u;
}

// The pre-CUDA 9 spellings (whole warp).
template <typename T>
inline T __shfl(T var, int src_lane, int width = 32) { return __shfl_sync(0xffffffffu, var, src_lane, width); }
template <typename T>
inline T __shfl_up(T var, unsigned delta, int width = 32) { return __shfl_up_sync(0xffffffffu, var, delta, width); }
template <typename T>
inline T __shfl_down(T var, unsigned delta, int width = 32) { return __shfl_down_sync(0xffffffffu, var, delta, width); }
template <typename T>
inline T __shfl_xor(T var, int lane_mask, int width = 32) { return __shfl_xor_sync(0xffffffffu, var, lane_mask, width); }
inline unsigned __ballot(int predicate) { return __ballot_sync(0xffffffffu, predicate); }
inline int __any(int predicate) { return __any_sync(0xffffffffu, predicate); }
inline int __all(int predicate) { return __all_sync(0xffffffffu, predicate); }

// Cached loads and stores: plain memory accesses on the host.
template <typename T> inline T __ldg(const T* p) { return *p; }
template <typename T> inline T __ldcg(const T* p) { return *p; }
template <typename T> inline T __ldca(const T* p) { return *p; }
template <typename T> inline T __ldcs(const T* p) { return *p; }
template <typename T> inline T __ldlu(const T* p) { return *p; }
template <typename T> inline T __ldcv(const T* p) { return *p; }
template <typename T> inline void __stwb(T* p, T v) { *p = v; }
template <typename T> inline void __stcg(T* p, T v) { *p = v; }
template <typename T> inline void __stcs(T* p, T v) { *p = v; }
template <typename T> inline void __stwt(T* p, T v) { *p = v; }
