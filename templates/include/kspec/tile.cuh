// kspec device header: the shared-memory tiles of the tiled elementwise path (elementwise.cu.j2, `tiled`).
//
// A block step covers tiles of KSPEC_TILE_ELEMENTS elements of the loop's two innermost dims, W along dim 0 by
// KSPEC_TILE_ELEMENTS / W along dim 1 (W = 32, or 16 / 8 / 4 / 64 where dim 0 / dim 1 is that short), with
// KSPEC_TILE_WARPS warps: each thread handles KSPEC_TILE_SLOTS elements of a tile per phase. Every operand goes
// through a tile; one whose smallest stride is along dim 1 (a transposed view) is read with its lanes along
// dim 1 and used with the lanes along dim 0, so that every global access of a warp is to consecutive addresses.
// kspec/render/_variants.py and kspec/kernels/_plan.py hold the same numbers.
#pragma once

#define KSPEC_TILE 32
#define KSPEC_TILE_WARPS 8
#define KSPEC_TILE_ELEMENTS 1024
#define KSPEC_TILE_SLOTS (KSPEC_TILE_ELEMENTS / (32 * KSPEC_TILE_WARPS))
// A dim 2 of at least a step's tiles that an operand interleaves (its stride along dim 2 under this many bytes): a
// block step stacks tiles of consecutive planes at one position (elementwise.cu.j2's `_planes`;
// kspec/render/_variants.py's TILE_STACK_BYTES)
#define KSPEC_TILE_STACK_BYTES 32

namespace kspec {

// The geometry of a tile W elements wide along dim 0: its height along dim 1, and the elements of a stored row.
// Thread slot p (= (warp + k * KSPEC_TILE_WARPS) * 32 + lane for its k-th element) sits at (p % W, p / W) when
// the lanes run along dim 0, at (p / H, p % H) when they run along dim 1. A row holds W elements and padding
// so that a warp's 32 accesses fall in different banks either way (odd rows of 4-byte words for W <= 32; for
// W = 64 the 16 rows a warp reads along dim 1 two columns at a time need a row of 2 mod 32 words). Tiles 8 or 4
// wide are not padded (a padded row would make them the largest tile, and every module's shared memory grows
// with its largest): their columns are swizzled instead, column d0 of row d1 stored at d0 ^ ((d1 / (32 / W)) % W),
// so that the 32 rows a warp writes along dim 1 and the 32 / W rows of W it reads along dim 0 each hit 32 banks.
// (Enumerators here and in TileLanes, not static data members: no device global, see kspec/select.cuh.)
template <int W>
struct TileShape {
  enum : int {
    width = W,
    height = KSPEC_TILE_ELEMENTS / W,
    row = W == 64 ? W + 2 : W <= 8 ? W : W + 1,
    size = height * row,
    swizzle_rows = W <= 8 ? 32 / W : 1  // rows that share a swizzle (W <= 8; 1 keeps wider tiles' code free of 32 / W)
  };
  static_assert(W == 4 || W == 8 || W == 16 || W == 32 || W == 64, "tiles are 4, 8, 16, 32 or 64 elements wide");
};

// One tile's storage. Raw bytes because a __shared__ variable cannot have a constructor (complex<T> has one).
template <typename T, int W>
struct alignas(alignof(T)) Tile {
  unsigned char bytes[sizeof(T) * TileShape<W>::size];
  // element (d0, d1) of the tile
  __device__ __forceinline__ T& at(int d0, int d1) {
    if (W <= 8) d0 ^= (d1 / TileShape<W>::swizzle_rows) & (W - 1);
    return reinterpret_cast<T*>(bytes)[d1 * TileShape<W>::row + d0];
  }
};

// Where a thread's elements sit in a block step, for an operand whose lanes run along dim 0 (STAGED false) or
// along dim 1: its k-th element of tile j is (x0 + k K0 + j j0, x1 + k K1 + j j1) of the step (j0, j1: StepTiles).
// All compile-time but the thread's slot p0 and the step's direction, so the loops below fold to a few offsets.
template <int W, int SPAN, bool STAGED>
struct TileLanes {
  enum : int {
    H = TileShape<W>::height,
    P = 32 * KSPEC_TILE_WARPS,  // slots per pass of the block
    K0 = STAGED ? P / H : 0,
    K1 = STAGED ? 0 : P / W
  };
  static __device__ __forceinline__ int x0(int p0) { return STAGED ? p0 / H : p0 % W; }
  static __device__ __forceinline__ int x1(int p0) { return STAGED ? p0 % H : p0 / W; }
};

// Whether a block step's SPAN tiles sit side by side along dim 1 of a loop whose two inner dims are (e0, e1): tiles
// narrower than 32 do, wider ones along dim 0, unless the other way pads the plane a quarter less or more (H200:
// float32 (550, 318, 96) permuted (0, 2, 1), 32 x 32 tiles two to a step, 1.24 -> 1.36 of a copy turned along dim 1;
// the margin is kspec/render/_variants.py's SHAPED_TILE_GAIN, whose tiled_step decides the same way). The padded
// planes stay under 2**45: the tiled entry's planes hold fewer than 2**31 elements.
template <int W, int SPAN, typename IndexT>
__device__ __forceinline__ bool step_along_dim1(IndexT e0, IndexT e1) {
  constexpr unsigned long long H = TileShape<W>::height, A = SPAN * W, B = SPAN * H;
  const unsigned long long n0 = static_cast<unsigned long long>(e0), n1 = static_cast<unsigned long long>(e1);
  const unsigned long long along0 = (n0 + A - 1) / A * A * ((n1 + H - 1) / H * H);
  const unsigned long long along1 = (n0 + W - 1) / W * W * ((n1 + B - 1) / B * B);
  return W < 32 ? 4 * along1 <= 5 * along0 : 4 * along0 > 5 * along1;
}

// The tiles of a block step: tile j starts `step` bytes after tile j - 1 in an operand, its elements j * j0
// (j * j1) further along dim 0 (dim 1) than the first tile's, and only the first `count` tiles are in the loop.
// Side by side in a plane (j0 = W or j1 = H: step_along_dim1; count SPAN), or consecutive planes (j0 = j1 = 0,
// step the operand's stride along dim 2: stacked).
template <typename IndexT>
struct StepTiles {
  IndexT step;
  int j0, j1, count;
};

// Calls visit(slot, offset) for each of a thread's elements of an operand below (n0, n1): slot its index in the
// thread's values, offset its byte offset (`base` the step's first element's). Predicates, not branches: every
// load of a step stays in flight together.
template <int W, int SPAN, bool STAGED, typename IndexT, typename Visit>
__device__ __forceinline__ void for_step(IndexT base, IndexT s0, IndexT s1, StepTiles<IndexT> tiles, IndexT n0,
                                         IndexT n1, int p0, Visit visit) {
  using L = TileLanes<W, SPAN, STAGED>;
  const IndexT m0 = n0 - L::x0(p0), m1 = n1 - L::x1(p0);
  const IndexT a = base + L::x0(p0) * s0 + L::x1(p0) * s1;
#pragma unroll
  for (int j = 0; j < SPAN; ++j)
#pragma unroll
    for (int k = 0; k < KSPEC_TILE_SLOTS; ++k)
      if (j < tiles.count && k * L::K0 + j * tiles.j0 < m0 && k * L::K1 + j * tiles.j1 < m1)
        visit(j * KSPEC_TILE_SLOTS + k, a + j * tiles.step + k * (L::K0 * s0 + L::K1 * s1));
}

// A thread's elements of an operand into `values`, and back.
template <int W, int SPAN, bool STAGED, typename T, typename IndexT>
__device__ __forceinline__ void load_step(T (&values)[SPAN * KSPEC_TILE_SLOTS], T* ptr, IndexT base, IndexT s0,
                                          IndexT s1, StepTiles<IndexT> tiles, IndexT n0, IndexT n1, int p0) {
  for_step<W, SPAN, STAGED>(base, s0, s1, tiles, n0, n1, p0, [&](int slot, IndexT offset) { values[slot] = *at(ptr, offset); });
}

template <int W, int SPAN, bool STAGED, typename T, typename IndexT>
__device__ __forceinline__ void store_step(const T (&values)[SPAN * KSPEC_TILE_SLOTS], T* ptr, IndexT base, IndexT s0,
                                           IndexT s1, StepTiles<IndexT> tiles, IndexT n0, IndexT n1, int p0) {
  for_step<W, SPAN, STAGED>(base, s0, s1, tiles, n0, n1, p0, [&](int slot, IndexT offset) { *at(ptr, offset) = values[slot]; });
}

// A thread's values into the step's tiles (element (d0, d1) of tile j at its row d1, column d0), and back.
template <int W, int SPAN, bool STAGED, typename T>
__device__ __forceinline__ void to_tiles(Tile<T, W> (&tiles)[SPAN], const T (&values)[SPAN * KSPEC_TILE_SLOTS], int p0) {
  using L = TileLanes<W, SPAN, STAGED>;
#pragma unroll
  for (int j = 0; j < SPAN; ++j)
#pragma unroll
    for (int k = 0; k < KSPEC_TILE_SLOTS; ++k)
      tiles[j].at(L::x0(p0) + k * L::K0, L::x1(p0) + k * L::K1) = values[j * KSPEC_TILE_SLOTS + k];
}

template <int W, int SPAN, bool STAGED, typename T>
__device__ __forceinline__ void from_tiles(T (&values)[SPAN * KSPEC_TILE_SLOTS], Tile<T, W> (&tiles)[SPAN], int p0) {
  using L = TileLanes<W, SPAN, STAGED>;
#pragma unroll
  for (int j = 0; j < SPAN; ++j)
#pragma unroll
    for (int k = 0; k < KSPEC_TILE_SLOTS; ++k)
      values[j * KSPEC_TILE_SLOTS + k] = tiles[j].at(L::x0(p0) + k * L::K0, L::x1(p0) + k * L::K1);
}

// |v| for an index type (strides may be negative).
template <typename IndexT>
__device__ __forceinline__ IndexT magnitude(IndexT v) {
  return v < 0 ? -v : v;
}

}  // namespace kspec
