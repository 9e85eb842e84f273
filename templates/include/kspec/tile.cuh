// kspec device header: the shared-memory tiles of the tiled elementwise path (elementwise.cu.j2, `tiled`).
//
// A block covers a KSPEC_TILE x KSPEC_TILE tile of the loop's two innermost dims with KSPEC_TILE_WARPS
// warps; each thread handles KSPEC_TILE / KSPEC_TILE_WARPS elements per phase. An operand whose smallest
// stride is along dim 1 (a transposed view) goes through a tile: read with the lanes along dim 1, used with
// the lanes along dim 0, so that every global access of the warp is to consecutive addresses.
// kspec/render/_abi.py and kspec/kernels/_plan.py hold the same numbers.
#pragma once

#define KSPEC_TILE 32
#define KSPEC_TILE_WARPS 8

namespace kspec {

// KSPEC_TILE rows of KSPEC_TILE + 1 elements: the padding element shifts each row by one bank, so reading a
// column (lane l at row l) hits 32 different banks. Raw bytes because a __shared__ variable cannot have a
// constructor (complex<T> has one).
template <typename T>
struct alignas(alignof(T)) Tile {
  unsigned char bytes[sizeof(T) * KSPEC_TILE * (KSPEC_TILE + 1)];
  __device__ __forceinline__ T& at(int row, int col) {
    return reinterpret_cast<T*>(bytes)[row * (KSPEC_TILE + 1) + col];
  }
};

// |v| for an index type (strides may be negative).
template <typename IndexT>
__device__ __forceinline__ IndexT magnitude(IndexT v) {
  return v < 0 ? -v : v;
}

}  // namespace kspec
