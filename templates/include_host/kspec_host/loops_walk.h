// kspec's CPU device: index helpers of the host loop kernels (templates/host/*.cpp.j2).
#pragma once

#include <kspec/indexer.cuh>

#ifndef KSPEC_HOST_LANES
// Elements an elementwise loop handles per step of its contiguous path: a constant trip count lets g++ -O2
// (whose "very cheap" vectorizer refuses loops that need a scalar epilogue) vectorize the step.
#define KSPEC_HOST_LANES 16
#endif
#ifndef KSPEC_HOST_REDUCE_LANES
// Independent accumulators of a reduction row: lane k takes elements k, k + LANES, ...; g++ keeps them in
// vector registers, so a row costs about one vector operation per LANES / (vector width) elements.
#define KSPEC_HOST_REDUCE_LANES 32
#endif

#ifndef KSPEC_HOST_COLS
// Most outputs a `cols` reduction tile accumulates together (their accumulators stay in the L1 cache).
#define KSPEC_HOST_COLS 2048
#endif

namespace kspec_host {

// Whether n elements at a and n elements at b are disjoint or the same elements (element i of one is element
// i of the other): then a contiguous loop has no dependence between iterations and may be vectorized.
template <typename A, typename B, typename IndexT>
inline bool apart_or_same(const A* a, const B* b, IndexT n) {
  const char* pa = reinterpret_cast<const char*>(a);
  const char* pb = reinterpret_cast<const char*>(b);
  if (pa == pb && sizeof(A) == sizeof(B)) return true;
  return pa + static_cast<long long>(n) * sizeof(A) <= pb || pb + static_cast<long long>(n) * sizeof(B) <= pa;
}

// Walks consecutive flat C-order indices of a shape stored innermost first (kspec/indexer.cuh) and keeps
// the byte offsets of N arrays: one unravel at the start, then a carry per row instead of a division per
// element. `run(left)` is how many indices remain in the current innermost row (at most `left`);
// `advance(count)` moves past `count` of them (count <= run).
template <typename IndexT, int CAP, int N>
struct Walk {
  const IndexT* extent;
  int ndim;  // >= 1
  const IndexT* stride[N > 0 ? N : 1];
  IndexT offset[N > 0 ? N : 1];
  IndexT coord[CAP];

  void start(IndexT index) {
    for (int a = 0; a < N; ++a) offset[a] = 0;
    for (int d = 0; d < ndim; ++d) {
      IndexT c = index;
      if (d + 1 < ndim) {
        const IndexT q = index / extent[d];
        c = index - q * extent[d];
        index = q;
      }
      coord[d] = c;
      for (int a = 0; a < N; ++a) offset[a] += c * stride[a][d];
    }
  }
  IndexT run(IndexT left) const {
    const IndexT in_row = extent[0] - coord[0];
    return in_row < left ? in_row : left;
  }
  void advance(IndexT count) {
    coord[0] += count;
    for (int a = 0; a < N; ++a) offset[a] += count * stride[a][0];
    for (int d = 0; d + 1 < ndim && coord[d] == extent[d]; ++d) {
      coord[d] = 0;
      ++coord[d + 1];
      for (int a = 0; a < N; ++a) offset[a] += stride[a][d + 1] - extent[d] * stride[a][d];
    }
  }
};

}  // namespace kspec_host
