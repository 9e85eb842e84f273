// kspec's CPU device: cooperative_groups::reduce over a tile (butterfly shuffles, as on the GPU) and the
// operators it takes.
#pragma once

#include <cooperative_groups.h>

namespace cooperative_groups {

template <typename T> struct plus { T operator()(const T& a, const T& b) const { return a + b; } };
template <typename T> struct less { T operator()(const T& a, const T& b) const { return b < a ? b : a; } };
template <typename T> struct greater { T operator()(const T& a, const T& b) const { return a < b ? b : a; } };
template <typename T> struct bit_and { T operator()(const T& a, const T& b) const { return a & b; } };
template <typename T> struct bit_or { T operator()(const T& a, const T& b) const { return a | b; } };
template <typename T> struct bit_xor { T operator()(const T& a, const T& b) const { return a ^ b; } };

template <unsigned int N, typename T, typename Op>
inline T reduce(const thread_block_tile<N>& tile, T value, Op op) {
  for (unsigned int offset = N / 2; offset > 0; offset /= 2) value = op(value, tile.shfl_xor(value, offset));
  return value;
}

}  // namespace cooperative_groups
