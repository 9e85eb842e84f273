// kspec's CPU device: cooperative groups for device code compiled by the host compiler. Groups are views of
// the running thread (kspec_host/runtime.h sets threadIdx...); their sync() and exchanges are the block and
// warp primitives of the host runtime (threads then run as fibers: the source scan sees the sync). Tiles
// are of consecutive linear thread ids, within one warp. Grid-wide groups cannot run on the host.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

namespace cooperative_groups {

class thread_block {
 public:
  static void sync() { __syncthreads(); }
  static unsigned int thread_rank() { return kspec_host::linear_thread_id(); }
  static unsigned int size() { return kspec_host::threads_per_block(); }
  static unsigned int num_threads() { return size(); }
  static dim3 group_index() { return dim3(blockIdx); }
  static dim3 thread_index() { return dim3(threadIdx); }
  static dim3 group_dim() { return blockDim; }
  static dim3 dim_threads() { return blockDim; }
};
inline thread_block this_thread_block() { return thread_block(); }

// A group of `size` consecutive threads (tiled_partition(parent, size)): within a warp when size <= 32.
class thread_group {
 public:
  explicit thread_group(unsigned int size) : size_(size) {}
  // any group of consecutive threads (the block, a tile) as a thread_group, as CUDA's groups derive from it
  template <typename Group, typename = decltype(std::declval<const Group&>().thread_rank())>
  thread_group(const Group& group) : size_(static_cast<unsigned int>(group.size())) {}
  void sync() const {
    if (size_ <= 32u) __syncwarp(); else __syncthreads();
  }
  unsigned int thread_rank() const { return kspec_host::linear_thread_id() % size_; }
  unsigned int size() const { return size_; }
  unsigned int num_threads() const { return size_; }
  unsigned int meta_group_rank() const { return kspec_host::linear_thread_id() / size_; }
  unsigned int meta_group_size() const { return (kspec_host::threads_per_block() + size_ - 1) / size_; }

 private:
  unsigned int size_;
};

template <unsigned int N>
class thread_block_tile {
  static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0, "thread_block_tile<N>: N is a power of two up to 32");

 public:
  static constexpr unsigned int num_threads_value = N;
  static void sync() { __syncwarp(); }
  static unsigned int thread_rank() { return kspec_host::linear_thread_id() % N; }
  static constexpr unsigned int size() { return N; }
  static constexpr unsigned int num_threads() { return N; }
  static unsigned int meta_group_rank() { return kspec_host::linear_thread_id() / N; }
  static unsigned int meta_group_size() { return (kspec_host::threads_per_block() + N - 1) / N; }

  template <typename T> T shfl(T var, int source_rank) const { return __shfl_sync(0xffffffffu, var, source_rank, N); }
  template <typename T> T shfl_down(T var, unsigned int delta) const { return __shfl_down_sync(0xffffffffu, var, delta, N); }
  template <typename T> T shfl_up(T var, unsigned int delta) const { return __shfl_up_sync(0xffffffffu, var, delta, N); }
  template <typename T> T shfl_xor(T var, unsigned int lane_mask) const {
    return __shfl_xor_sync(0xffffffffu, var, static_cast<int>(lane_mask), N);
  }
  // votes over this tile's lanes (bit k of ballot = the tile's rank k)
  unsigned int ballot(int predicate) const { return in_tile(__ballot_sync(0xffffffffu, predicate)); }
  int any(int predicate) const { return ballot(predicate) != 0u; }
  int all(int predicate) const { return ballot(!predicate) == 0u; }
  template <typename T> unsigned int match_any(T value) const { return in_tile(__match_any_sync(0xffffffffu, value)); }

 private:
  static unsigned int in_tile(unsigned int warp_bits) {
    const unsigned int first = kspec_host::lane_id() / N * N;
    return N == 32 ? warp_bits : (warp_bits >> first) & ((1u << N) - 1u);
  }
};

template <unsigned int N, typename Parent>
inline thread_block_tile<N> tiled_partition(const Parent&) { return thread_block_tile<N>(); }
template <typename Parent>
inline thread_group tiled_partition(const Parent&, unsigned int size) { return thread_group(size); }

// The warp's threads that reach this call together.
class coalesced_group {
 public:
  explicit coalesced_group(unsigned int mask) : mask_(mask) {}
  void sync() const { __syncwarp(mask_); }
  unsigned int size() const { return static_cast<unsigned int>(__builtin_popcount(mask_)); }
  unsigned int num_threads() const { return size(); }
  unsigned int thread_rank() const {
    return static_cast<unsigned int>(__builtin_popcount(mask_ & ((1u << kspec_host::lane_id()) - 1u)));
  }
  template <typename T> T shfl(T var, unsigned int source_rank) const { return __shfl_sync(mask_, var, lane_of(source_rank)); }
  unsigned int ballot(int predicate) const { return compact(__ballot_sync(mask_, predicate)); }
  int any(int predicate) const { return ballot(predicate) != 0u; }
  int all(int predicate) const { return ballot(!predicate) == 0u; }

 private:
  int lane_of(unsigned int rank) const {
    unsigned int bits = mask_;
    for (unsigned int k = 0; k < rank && bits; ++k) bits &= bits - 1u;
    return bits ? __builtin_ctz(bits) : 32;
  }
  unsigned int compact(unsigned int warp_bits) const {
    unsigned int out = 0, k = 0;
    for (unsigned int l = 0; l < 32; ++l)
      if (mask_ >> l & 1u) out |= (warp_bits >> l & 1u) << k++;
    return out;
  }
  unsigned int mask_;
};
inline coalesced_group coalesced_threads() { return coalesced_group(__activemask()); }

template <typename Group> inline void sync(const Group& group) { group.sync(); }
template <typename Group> inline auto thread_rank(const Group& group) { return group.thread_rank(); }
template <typename Group> inline auto group_size(const Group& group) { return group.size(); }

// Grid-wide groups need every block of the grid resident at once; kspec's CPU device runs blocks in turn.
class grid_group {
 public:
  template <bool Available = false> void sync() const {
    static_assert(Available, "kspec's CPU device cannot run cooperative grid synchronisation (grid_group::sync); run the kernel on a GPU");
  }
};
template <bool Available = false>
inline grid_group this_grid() {
  static_assert(Available, "kspec's CPU device cannot run cooperative grid synchronisation (cooperative_groups::this_grid()); run the kernel on a GPU");
  return grid_group();
}

}  // namespace cooperative_groups
