// kspec device header: accumulators and the warp / block combine steps of generated reductions.
// Everything is templated on the kernel's reduce functor `Op` (reduce_expr over `a` and `b`), so the
// same code serves any reduce type, including a struct from the kernel's preamble.
#pragma once

namespace kspec {

// A running reduction. With an identity, the value starts at it; without one (identity None) a flag
// says whether any element has been seen, so the first element seeds the value.
template <typename T, bool HAS_IDENTITY>
struct Acc {
  T value;
  bool has;
};

template <typename T>
struct Acc<T, true> {
  T value;
};

template <typename T, typename Op>
__device__ __forceinline__ void push(Acc<T, true>& acc, const T& x, const Op& op) {
  acc.value = op(acc.value, x);
}

template <typename T, typename Op>
__device__ __forceinline__ void push(Acc<T, false>& acc, const T& x, const Op& op) {
  acc.value = acc.has ? op(acc.value, x) : x;
  acc.has = true;
}

template <typename T, typename Op>
__device__ __forceinline__ void merge(Acc<T, true>& acc, const Acc<T, true>& other, const Op& op) {
  acc.value = op(acc.value, other.value);
}

template <typename T, typename Op>
__device__ __forceinline__ void merge(Acc<T, false>& acc, const Acc<T, false>& other, const Op& op) {
  if (other.has) push(acc, other.value, op);
}

// Uninitialised, suitably aligned shared-memory room for N values of T: a __shared__ variable cannot
// have a constructor, and complex<T> has one.
template <typename T, int N>
struct alignas(alignof(T)) Storage {
  unsigned char bytes[sizeof(T) * N];
  __device__ __forceinline__ T* get() { return reinterpret_cast<T*>(bytes); }
};

// A warp shuffle of any trivially copyable T (a struct, complex<double>, an Acc), moved as 32-bit words;
// `shuffle` moves one word.
template <typename T, typename Shuffle>
__device__ __forceinline__ T shfl_words(const T& value, const Shuffle& shuffle) {
  constexpr int kWords = (sizeof(T) + 3) / 4;
  int words[kWords];
  memcpy(words, &value, sizeof(T));
#pragma unroll
  for (int w = 0; w < kWords; ++w) words[w] = shuffle(words[w]);
  T out;
  memcpy(&out, words, sizeof(T));
  return out;
}

template <typename T>
__device__ __forceinline__ T shfl_xor(const T& value, int lane_mask) {
  return shfl_words(value, [lane_mask](int word) { return __shfl_xor_sync(0xffffffffu, word, lane_mask); });
}

template <typename T>
__device__ __forceinline__ T shfl_down(const T& value, int delta) {
  return shfl_words(value, [delta](int word) { return __shfl_down_sync(0xffffffffu, word, delta); });
}

// Combine within aligned groups of `width` consecutive lanes (a power of two, 1..32) by a butterfly:
// afterwards every lane holds its group's total. All 32 lanes of the warp must call it.
template <typename A, typename Op>
__device__ __forceinline__ void warp_combine(A& acc, int width, const Op& op) {
  for (int mask = width >> 1; mask > 0; mask >>= 1) {
    const A other = shfl_xor(acc, mask);
    merge(acc, other, op);
  }
}

// Combine the lanes that are `from` apart (lanes l, l + from, l + 2 * from, ...; `from` a power of two
// <= 32): afterwards every lane holds the total of the lanes congruent to it modulo `from`. All 32 lanes
// of the warp must call it.
template <typename A, typename Op>
__device__ __forceinline__ void warp_combine_strided(A& acc, int from, const Op& op) {
  for (int mask = from; mask < 32; mask <<= 1) {
    const A other = shfl_xor(acc, mask);
    merge(acc, other, op);
  }
}

// Which of its VEC accumulators a lane holds totals of after warp_scatter_strided: outputs first .. first + count - 1
// of its column; of the lanes holding the same ones, those below `writers` write them.
struct ScatterPart {
  int first, count, writers;
};

// Combine VEC accumulators a lane over the lanes that are `from` apart (as warp_combine_strided) by halving: each round
// a lane keeps half of its values and trades the other half with its partner's (VEC / 2 + VEC / 4 + ... shuffles
// rather than VEC per round), then plain butterfly rounds on the last one. The lanes of a column end with
// different outputs' totals (ScatterPart), so that they write them side by side. All 32 lanes must call it.
template <int VEC, typename A, typename Op>
__device__ __forceinline__ ScatterPart warp_scatter_strided(A (&acc)[VEC], int from, const Op& op) {
  const int lane = threadIdx.x & 31;
  int first = 0, count = VEC, mask = from;
#pragma unroll
  for (int half = VEC / 2; half >= 1; half /= 2) {
    if (mask < 32) {
      const bool upper = (lane & mask) != 0;
#pragma unroll
      for (int i = 0; i < half; ++i) {  // the upper lane keeps the upper half: it swaps its halves first
        const A low = acc[i];
        acc[i] = upper ? acc[i + half] : low;
        acc[i + half] = upper ? low : acc[i + half];
      }
#pragma unroll
      for (int i = 0; i < half; ++i) merge(acc[i], shfl_xor(acc[i + half], mask), op);
      first += upper ? half : 0;
      count = half;
      mask <<= 1;
    }
  }
  const int writers = mask < 32 ? mask : 32;
  for (; mask < 32; mask <<= 1) merge(acc[0], shfl_xor(acc[0], mask), op);
  return ScatterPart{first, count, writers};
}

// Combine the columns of a warp seen as `share` rows of `width` lanes (width * share <= 32; width any 1..32,
// lanes past width * share hold nothing of theirs): lane c ends with the total of lanes c, c + width, ...,
// c + (share - 1) * width, for c < width (other lanes hold partial totals). A tree over the rows with shifts
// down, since a width that is not a power of two has no butterfly. All 32 lanes of the warp must call it.
template <typename A, typename Op>
__device__ __forceinline__ void warp_combine_columns(A& acc, int width, int share, const Op& op) {
  const int row = (threadIdx.x & 31) / width;
  int span = 1;
  while (span < share) span <<= 1;
  for (int step = span >> 1; step > 0; step >>= 1) {
    const A other = shfl_down(acc, step * width);
    if (row + step < share) merge(acc, other, op);
  }
}

// Combine over the whole block (blockDim.x a multiple of 32): warps first, then warp 0 over the warps'
// totals. Thread 0 ends with the block's total. Every thread of the block must call it; `smem` holds 32
// accumulators and may be reused right after the call returns (it ends with a barrier).
template <typename A, typename Op>
__device__ __forceinline__ void block_combine(A& acc, A* smem, const A& empty, const Op& op) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int nwarps = blockDim.x >> 5;
  warp_combine(acc, 32, op);
  if (lane == 0) smem[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = lane < nwarps ? smem[lane] : empty;
    warp_combine(acc, 32, op);
  }
  __syncthreads();
}

// Programmatic dependent launch (sm_90 and later; a no-op elsewhere and for a launch without the attribute):
// a primary kernel lets the next kernel of its stream start early; that kernel waits for the primary's
// completion and memory before reading what it wrote. The split's second launch is not held behind the
// first one's tail and launch latency that way (benchmarks/NOTES.md, v16).
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void wait_for_dependencies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace kspec

// The slab entry (templates/reduction/slab.cu.j2): its block, the blocks per SM its launch bounds ask for (half
// for reduce types wider than 4 bytes or several inputs), and the most bytes of accumulators per thread (VEC
// of them, in static shared memory for the combine). kspec/render/_abi.py says the same.
#define KSPEC_SLAB_BLOCK 256
#define KSPEC_SLAB_MIN_BLOCKS 8
#define KSPEC_SLAB_ACC_BYTES 32
// Partials a slab_final lane loads before it pushes them (SPLIT_MAX_CHUNKS / warps per block of the planner).
#define KSPEC_SLAB_FINAL_LOADS 4

// Blocks of the `cols` reduction have at most this many warps: their partial results live in static
// shared memory (32 * KSPEC_COLS_MAX_WARPS accumulators). An accumulator wider than
// KSPEC_COLS_WIDE_ACC bytes (an opaque reduce type) gets KSPEC_COLS_WIDE_WARPS warps, so a large struct
// cannot push the module past the static shared-memory limit. kspec/render/_abi.py says the same.
#ifndef KSPEC_COLS_MAX_WARPS
#define KSPEC_COLS_MAX_WARPS 32
#endif
#define KSPEC_COLS_WIDE_ACC 24
#define KSPEC_COLS_WIDE_WARPS 8
// Vectorised cols lanes merge as many of their VEC outputs at once as this many bytes of shared memory hold (at most
// 16 warps a block): float sums of 4 or 8 outputs (float32, float16 inputs) in 8-16 KB behind one barrier, wider
// accumulators and 1-byte inputs in groups (int8 inputs with double sums: 4 groups of 4 outputs).
#define KSPEC_COLS_VEC_SMEM 16384
// A one-dim cols reduction whose rows are this short or shorter (and not split) gives each warp a tile of its
// own: a row of 8 split over a block's warps left 1-warp blocks, 32 resident per SM, half the threads an SM holds.
#define KSPEC_COLS_SHORT_ROWS 32

// Loads a reduction thread issues before it pushes any of them (see map_range in reduction/_macros.cu.j2).
#ifndef KSPEC_REDUCE_UNROLL
#define KSPEC_REDUCE_UNROLL 4
#endif
// The runtime-rank cols entry's loads per lane in flight (scalar lanes / vectorised lanes) and the blocks of
// 512 threads its launch bounds keep per SM (templates/reduction/cols.cu.j2 says why).
#ifndef KSPEC_COLS_UNROLL
#define KSPEC_COLS_UNROLL 32
#endif
#ifndef KSPEC_COLS_VEC_UNROLL
#define KSPEC_COLS_VEC_UNROLL 16
#endif
// Vectorised cols tiles whose lanes share rows: each lane walks this many rows at least (short rows widen the tile
// over several runs of outputs), and a segment one warp covers in twice as many loads a lane or fewer is that warp's
// own, the block's warps taking segments of their own rather than splitting one (templates/reduction/cols.cu.j2).
#ifndef KSPEC_COLS_WARP_LOADS
#define KSPEC_COLS_WARP_LOADS 16
#endif
// split_final merges an output's partials in one thread where they are this many or fewer and the outputs this many
// or more (templates/reduction/split_final.cu.j2), rather than in a group of lanes
#ifndef KSPEC_FINAL_OWN_CHUNKS
#define KSPEC_FINAL_OWN_CHUNKS 8
#endif
#ifndef KSPEC_FINAL_OWN_OUTPUTS
#define KSPEC_FINAL_OWN_OUTPUTS 65536
#endif
#ifndef KSPEC_COLS_MIN_BLOCKS
#define KSPEC_COLS_MIN_BLOCKS 2
#endif
// The cols entry's launch bounds (templates/reduction/cols.cu.j2): the runtime-rank instantiation's largest block
// (with KSPEC_COLS_MIN_BLOCKS of them per SM), the one-dim one's and the blocks of it per SM. The planner counts
// the warps an SM holds from them before the entry is loaded (kspec/kernels/planning/_reduction_cols.py).
#ifndef KSPEC_COLS_THREADS
#define KSPEC_COLS_THREADS 512
#endif
#ifndef KSPEC_COLS_ONE_DIM_THREADS
#define KSPEC_COLS_ONE_DIM_THREADS 1024
#endif
#ifndef KSPEC_COLS_ONE_DIM_BLOCKS
#define KSPEC_COLS_ONE_DIM_BLOCKS 2
#endif
