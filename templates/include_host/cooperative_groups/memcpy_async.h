// kspec's CPU device: cooperative_groups::memcpy_async as a plain copy shared out among the group's threads
// (each copies one contiguous part), and wait / wait_prior as the group's sync, after which every thread
// sees the whole copy, as after the GPU's wait.
#pragma once

#include <cooperative_groups.h>

#include <cstddef>
#include <cstring>

namespace cooperative_groups {

// count: a size_t, or a cuda::aligned_size_t<N> (which converts to one).
template <typename Group, typename Count>
inline void memcpy_async(const Group& group, void* dst, const void* src, const Count& count) {
  const std::size_t bytes = static_cast<std::size_t>(count);
  const std::size_t threads = group.size();
  const std::size_t part = (bytes + threads - 1) / threads;
  const std::size_t begin = part * group.thread_rank();
  if (begin < bytes) {
    std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin,
                begin + part < bytes ? part : bytes - begin);
  }
}
template <typename Group, typename T>
inline void memcpy_async(const Group& group, T* dst, std::size_t dst_count, const T* src, std::size_t src_count) {
  memcpy_async(group, static_cast<void*>(dst), static_cast<const void*>(src),
               (dst_count < src_count ? dst_count : src_count) * sizeof(T));
}

template <typename Group> inline void wait(const Group& group) { group.sync(); }
template <unsigned int Stage, typename Group> inline void wait_prior(const Group& group) { group.sync(); }

}  // namespace cooperative_groups
