// kspec device header: loop and index arithmetic of generated elementwise and reduction kernels.
//
// These structs are kernel parameters that the launcher packs byte for byte from Python; their exact
// layouts are written down in kspec/render/_abi.py (a test compiles static_asserts of every offset).
//
// Conventions:
//  * Dimensions are stored INNERMOST FIRST: extent[0] and stride[0] describe the last, fastest-varying
//    axis of the C-order shape. Unravelling a flat index then walks the arrays from index 0 upwards, so
//    a fully unrolled loop touches them with compile-time indices only (no copy to local memory, even
//    when the number of dims is a runtime value).
//  * Strides are in BYTES, as CuPy and the CUDA Array Interface give them. Negative strides (reversed
//    views) and zero strides (broadcast operands) are fine.
//  * IndexT is int or long long. The launcher picks the int variants only when every flat index and
//    every byte offset of the launch fits in a signed 32-bit int; 32-bit division is several times
//    cheaper than 64-bit division, which is what the strided paths spend their time on.
#pragma once

#ifndef KSPEC_MAX_NDIM
#define KSPEC_MAX_NDIM 16
#endif

// Elements a thread of the strided elementwise path loads before it runs the body on any of them.
#ifndef KSPEC_EW_UNROLL
#define KSPEC_EW_UNROLL 4
#endif

namespace kspec {

// How many dims a struct stores: NDIM > 0 is a compile-time rank, NDIM == 0 a runtime rank (<= 16).
// (Enumerators, not static data members: no device global, see kspec/select.cuh.)
template <int NDIM>
struct Capacity {
  enum : int { value = NDIM > 0 ? NDIM : KSPEC_MAX_NDIM };
  // How far loops over the dims unroll: fully for a static rank; not at all for a runtime rank, which
  // is the rare case (more than 4 dims after merging) and would otherwise cost NVRTC a lot of code.
  enum : int { unroll = NDIM > 0 ? NDIM : 1 };
};

// A rank that reads both ways: CuPy's CArray and CIndexer have `ndim` as a static data member (`a.ndim - 1`,
// `int idx[a.ndim]`), kspec's views had ndim(). StaticRank is a compile-time rank (empty: a constant
// expression wherever it is used), DynamicRank a runtime one, laid out as a plain int where it is a field.
template <int N>
struct StaticRank {
  __host__ __device__ __forceinline__ constexpr operator int() const { return N; }
  __host__ __device__ __forceinline__ constexpr int operator()() const { return N; }
};

struct DynamicRank {
  int value;
  __host__ __device__ __forceinline__ constexpr operator int() const { return value; }
  __host__ __device__ __forceinline__ constexpr int operator()() const { return value; }
};

// `_ind` of elementwise kernels, `_in_ind` / `_out_ind` of reductions: CuPy code calls `.size()`, which is a
// ptrdiff_t as in CuPy, so that the code's mixed comparisons and overload calls resolve as they do there.
template <typename IndexT>
struct LoopSize {
  IndexT n;
  __device__ __forceinline__ ptrdiff_t size() const { return n; }
};

// The iteration shape of the strided elementwise path.
template <int NDIM, typename IndexT>
struct Shape {
  IndexT size;          // product of the extents: the loop size
  IndexT extent[NDIM];  // innermost first
  __device__ __forceinline__ int dims() const { return NDIM; }
};

template <typename IndexT>
struct Shape<0, IndexT> {
  IndexT size;
  IndexT extent[KSPEC_MAX_NDIM];
  int ndim;  // 1..KSPEC_MAX_NDIM
  __device__ __forceinline__ int dims() const { return ndim; }
};

// One array operand of a strided path: base pointer plus byte strides over the iteration dims.
template <typename T, int NDIM, typename IndexT>
struct StridedArray {
  T* ptr;
  IndexT stride[Capacity<NDIM>::value];  // bytes, innermost first
};

// The iteration shape of a reduction: kept dims (one output each) outside, reduced dims inside.
template <int RNDIM, typename IndexT>
struct ReduceShape {
  IndexT out_size;                               // number of outputs: product of kept_extent
  IndexT red_size;                               // elements reduced into each output: product of red_extent
  IndexT kept_extent[KSPEC_MAX_NDIM];            // innermost first
  IndexT red_extent[Capacity<RNDIM>::value];     // innermost first
  int kept_ndim;                                 // 0 for a full reduction
  int red_ndim;                                  // 1..; must equal RNDIM when RNDIM > 0
  __device__ __forceinline__ int red_dims() const { return RNDIM > 0 ? RNDIM : red_ndim; }
};

// A non-raw input of a reduction: byte strides over the kept dims and over the reduced dims.
template <typename T, int RNDIM, typename IndexT>
struct ReduceArray {
  T* ptr;
  IndexT kept_stride[KSPEC_MAX_NDIM];          // bytes, innermost first
  IndexT red_stride[Capacity<RNDIM>::value];   // bytes, innermost first
};

// Where the split (two-pass) reduction keeps its per-chunk partial results: nchunks values of the
// reduce type per output, output-major (partial s of output o at index o * nchunks + s).
template <typename IndexT>
struct SplitWorkspace {
  void* ptr;
  IndexT nchunks;  // chunks per row (== gridDim.x of the partial pass)
  IndexT chunk;    // elements per chunk; every chunk is non-empty: (nchunks - 1) * chunk < red_size
};

// Division by a divisor fixed for a whole loop, with a multiply and a shift instead of a division per
// element (Granlund and Montgomery's round-up method): with l = ceil(log2 d), shift = 31 + l and
// mul = ceil(2^shift / d) (< 2^32), n / d == (n * mul) >> shift for every 0 <= n < 2^31. Set up once per
// thread; a 64-bit division per element held reductions over two reduced dims at 0.2 of copy.
struct FastDiv {
  unsigned int d, mul, shift;
  __device__ __forceinline__ explicit FastDiv(unsigned int divisor) : d(divisor) {
    const unsigned int l = divisor <= 1u ? 0u : 32u - static_cast<unsigned int>(__clz(divisor - 1u));
    shift = 31u + l;
    mul = static_cast<unsigned int>(((1ull << shift) + divisor - 1u) / divisor);
  }
  __device__ __forceinline__ unsigned int div(unsigned int n) const {
    return static_cast<unsigned int>((static_cast<unsigned long long>(n) * mul) >> shift);
  }
};

// Address `byte_offset` bytes away from `p`.
template <typename T, typename IndexT>
__device__ __forceinline__ T* at(T* p, IndexT byte_offset) {
  return reinterpret_cast<T*>(reinterpret_cast<char*>(p) + byte_offset);
}

// A thread's first index of a grid-stride loop, clamped to `end` so that the product of a large
// blockIdx and blockDim never wraps a 32-bit IndexT.
template <typename IndexT>
__device__ __forceinline__ IndexT first_index(unsigned long long start, IndexT end) {
  return start < static_cast<unsigned long long>(end) ? static_cast<IndexT>(start) : end;
}

// The next index of a grid-stride loop without overflow: `i + step` could pass INT_MAX when the
// loop ends near it, so step to `end` instead of past it.
template <typename IndexT>
__device__ __forceinline__ IndexT next_index(IndexT i, IndexT step, IndexT end) {
  return end - i > step ? i + step : end;
}

// The global thread number and the thread count of a 1-D grid, as 64-bit values.
__device__ __forceinline__ unsigned long long global_thread() {
  return static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
}

template <typename IndexT>
__device__ __forceinline__ IndexT grid_threads() {
  return static_cast<IndexT>(static_cast<unsigned long long>(gridDim.x) * blockDim.x);
}

// The unsigned type of an index type's width: the walk's splits divide non-negative values.
template <typename IndexT> struct UnsignedOf;
template <> struct UnsignedOf<int> { typedef unsigned int type; };
template <> struct UnsignedOf<long long> { typedef unsigned long long type; };
template <> struct UnsignedOf<unsigned int> { typedef unsigned int type; };

// n / d for launch-wide 0 <= n and 0 < d (a loop's chunks, a block's run of them): a shift where d is a power of
// two (the planner's blocks are), else an unsigned division, which skips the signed one's fix-ups.
__device__ __forceinline__ unsigned int quotient(unsigned int n, unsigned int d) {
  return (d & (d - 1u)) == 0u ? n >> (31 - __clz(d)) : n / d;
}
__device__ __forceinline__ unsigned long long quotient(unsigned long long n, unsigned long long d) {
  return (d & (d - 1ull)) == 0ull ? n >> (63 - __clzll(d)) : n / d;
}
template <typename IndexT>
__device__ __forceinline__ IndexT quotient(IndexT n, IndexT d) {
  typedef typename UnsignedOf<IndexT>::type U;
  return static_cast<IndexT>(quotient(static_cast<U>(n), static_cast<U>(d)));
}

// A thread's element coordinates in a loop of fixed steps (the strided elementwise entry: blockDim within a
// chunk, the grid's threads over vectors), moved on without a division: the step's own coordinates are added dim
// by dim with a carry (a coordinate plus the step's stays below twice the extent, so one subtraction wraps it). A
// division per dim and element held that entry under CuPy's thread-per-element kernel on 3- and 4-dim layouts
// (benchmarks/NOTES.md v29). D dims: the static rank, or 4 for a runtime rank of at most 4 (coordinates 0 above
// it). CoordT holds the coordinates: IndexT, or 32 bits in a 64-bit launch whose dims allow it (WalkCoord and
// walk_fits below: arrays past 2**31 bytes walked as CuPy's 32-bit indexer walks them, with 64-bit offsets), where
// 64-bit coordinates doubled the walk's arithmetic. Only the coordinates live in registers: an operand's offset
// comes from them and its strides (parameters, constant memory), which keeps the entry at 32 registers (40 in
// 64 bits). Never moved past the loop's end, so the outermost dim never wraps.
template <int D, typename IndexT, typename CoordT = IndexT>
struct GridWalk {
  CoordT c[D];  // the element's coordinates, innermost first
  CoordT s[D];  // the step's
  // The step's coordinates and the first element's, split together in unsigned arithmetic (both are at least 0):
  // each dim's two divisions share one reciprocal of the extent, and an unsigned division skips the signs' fix-ups.
  // Signed and one split at a time, the splits took ~140 of the ~450 instructions a thread of a block per chunk
  // issues for 4 elements (float32, 4 dims: SASS; 1.20x on float32 transposes of 3-6 channels, benchmarks/NOTES.md
  // v72).
  // SplitT: the width they are split in (CoordT, or IndexT where the loop has more elements than CoordT counts).
  template <typename SplitT>
  __device__ __forceinline__ GridWalk(SplitT step, SplitT first, const IndexT* extent, int rank) {
    typedef typename UnsignedOf<SplitT>::type U;
    U rs = static_cast<U>(step), rf = static_cast<U>(first);
#pragma unroll
    for (int d = 0; d < D; ++d) {
      if (d < rank - 1) {
        const U e = static_cast<U>(extent[d]);
        const U qs = rs / e, qf = rf / e;  // one basic block: ptxas computes 1 / e once
        s[d] = static_cast<CoordT>(rs - qs * e);
        c[d] = static_cast<CoordT>(rf - qf * e);
        rs = qs;
        rf = qf;
      } else {  // the outermost dim takes what remains; dims above the rank hold 0
        s[d] = d < rank ? static_cast<CoordT>(rs) : 0;
        c[d] = d < rank ? static_cast<CoordT>(rf) : 0;
        rs = rf = 0;
      }
    }
  }
  // Moves to the next element.
  __device__ __forceinline__ void advance(const IndexT* extent, int rank) {
    CoordT carry = 0;
#pragma unroll
    for (int d = 0; d < D; ++d) {
      const CoordT v = c[d] + s[d] + carry;
      const CoordT e = static_cast<CoordT>(extent[d]);
      carry = d < rank - 1 && v >= e ? 1 : 0;
      c[d] = carry ? v - e : v;
    }
  }
  // The element's byte offset in an operand of these strides.
  __device__ __forceinline__ IndexT offset(const IndexT* stride) const {
    IndexT o = 0;
#pragma unroll
    for (int d = 0; d < D; ++d) o += static_cast<IndexT>(c[d]) * stride[d];  // 0 above the rank, whatever the stride holds
    return o;
  }
};

// The walk's coordinates in a launch of IndexT: a 64-bit launch walks in 32 bits, where walk_fits says it may.
template <typename IndexT> struct WalkCoord { typedef IndexT type; };
template <> struct WalkCoord<long long> { typedef unsigned int type; };

// Whether a loop's walk fits WalkCoord: every coordinate under 2**32, each wrapping dim under 2**31 (a coordinate
// plus the step's, below twice the extent, stays under 2**32; only extent-1 dims kept by reduce_dims=False leave one
// dim that large), and, where the first element and the step are split in WalkCoord (`narrow_split`), at most 2**32
// elements. D bounds the rank. kspec/kernels/planning/_plan.py (`walks`) decides the chunks' grid by the same test.
template <int D, typename IndexT>
__device__ __forceinline__ bool walk_fits(IndexT size, const IndexT* extent, int rank, bool narrow_split) {
  if (sizeof(IndexT) == 4) return true;
  if (narrow_split && static_cast<unsigned long long>(size) > 0xffffffffull) return false;
  bool fits = true;
#pragma unroll
  for (int d = 0; d < D; ++d) {
    const unsigned long long e = static_cast<unsigned long long>(extent[d]);
    fits &= d >= rank || e <= (d == rank - 1 ? 0xffffffffull : 0x7fffffffull);
  }
  return fits;
}

}  // namespace kspec
