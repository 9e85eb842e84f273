// kspec device header: CuPy's indexer inside an elementwise body, for the modules whose body uses it
// (templates/elementwise_indexed.cu.j2; kspec/render/_analysis.py decides): `_ind` with CuPy's n-d index, and the
// `_raw_<name>` views of non-raw array operands. Other modules do not include it (kspec/render/_render.py).
#pragma once

#include <kspec/indexer.cuh>
#include <kspec/array.cuh>

namespace kspec {

// `_ind` of an elementwise kernel whose body uses CuPy's n-d indexer (templates/elementwise_indexed.cu.j2): CuPy's
// CIndexer over the loop, whose shape is `shape_` (the dims CuPy's kernel sees). get() is the n-d index, in C
// order, of the element set() last (the loop sets each element's before its body runs): an array that indexes a
// RawView (`x[_ind.get()]`) or is read as `_ind.get()[d]`. With a runtime rank it has KSPEC_MAX_NDIM entries,
// zeros past the loop's rank (RawView accepts such an index).
template <int NDIM, typename IndexT>
struct LoopIndex {
  const Shape<NDIM, IndexT>& shape_;
  const DynamicRank ndim;  // `_ind.ndim`, a data member in CuPy's CIndexer (`_ind.ndim()` reads too)
  ptrdiff_t index_[Capacity<NDIM>::value];

  __device__ __forceinline__ explicit LoopIndex(const Shape<NDIM, IndexT>& shape) : shape_(shape), ndim{shape.dims()} {
#pragma unroll
    for (int d = 0; d < Capacity<NDIM>::value; ++d) index_[d] = 0;
  }

  __device__ __forceinline__ ptrdiff_t size() const { return shape_.size; }
  __device__ __forceinline__ const ptrdiff_t (&get() const)[Capacity<NDIM>::value] { return index_; }

  // Unravel flat index i (C order) over the loop's shape, innermost dim first; the outermost coordinate is
  // what remains. A 64-bit entry whose loop has fewer than 2**32 elements (its operands past 2**31 bytes: an
  // ndimage volume of 4 GiB) divides in 32 bits, as CuPy's CIndexer<_, true> does (NVVM's own check already took
  // most 64-bit divisions there: 3% on ndimage's correlate over such a volume, H200). The branch is the same for
  // every thread of a launch.
  __device__ __forceinline__ void set(ptrdiff_t i) {
    if (sizeof(IndexT) == 4 || static_cast<unsigned long long>(shape_.size) <= 0xffffffffull) {
      unravel(static_cast<unsigned int>(i));  // unsigned: no fix-ups of the signs
    } else {
      unravel(static_cast<unsigned long long>(i));
    }
  }

  template <typename U>
  __device__ __forceinline__ void unravel(U rem) {
    const int n = shape_.dims();
#pragma unroll
    for (int d = 0; d < Capacity<NDIM>::value; ++d) {
      if (d >= n) break;
      if (d == n - 1) {
        index_[0] = static_cast<ptrdiff_t>(rem);
        break;
      }
      const U extent = static_cast<U>(shape_.extent[d]);
      const U q = rem / extent;
      index_[n - 1 - d] = static_cast<ptrdiff_t>(rem - q * extent);
      rem = q;
    }
  }

  // Byte offset of the current element in an operand with these byte strides over the loop (innermost first).
  __device__ __forceinline__ IndexT offset(const IndexT (&stride)[Capacity<NDIM>::value]) const {
    const int n = shape_.dims();
    IndexT off = 0;
#pragma unroll
    for (int d = 0; d < Capacity<NDIM>::value; ++d) {
      if (d >= n) break;
      off += static_cast<IndexT>(index_[n - 1 - d]) * stride[d];
    }
    return off;
  }
};

// Whether an operand is C-contiguous over the loop (each dim's byte stride the item size times the extents inside
// it; dims of extent 1 take any): an element's offset is then its flat index times the item size. Launch-wide
// values only, so every thread of a launch gets the same answer.
template <typename T, int NDIM, typename IndexT>
__device__ __forceinline__ bool dense_over(const StridedArray<T, NDIM, IndexT>& array, const Shape<NDIM, IndexT>& shape) {
  const int n = shape.dims();
  ptrdiff_t dense = sizeof(T);  // 64-bit: a broadcast operand's extents may multiply past what IndexT holds
  bool c_contiguous = true;
#pragma unroll
  for (int d = 0; d < Capacity<NDIM>::value; ++d) {  // innermost first
    if (d >= n) break;
    if (shape.extent[d] != 1 && array.stride[d] != dense) c_contiguous = false;
    dense *= shape.extent[d];
  }
  return c_contiguous;
}

// `_raw_<name>` of a non-raw array operand of an elementwise kernel that names it (CuPy's CArray of the operand):
// the operand over the loop's shape, in C order, with its byte strides over the loop (0 along broadcast axes).
// Built once per thread from the strided entry's parameters; entries past the loop's rank are 0. `Dense`: the
// planner launched the dense entry, having checked that every operand is C-contiguous over the loop, so the
// view says so without testing each dim again in every thread.
template <bool Dense = false, typename T, int NDIM, typename IndexT>
__device__ __forceinline__ RawView<T> loop_view(const StridedArray<T, NDIM, IndexT>& array, const Shape<NDIM, IndexT>& shape) {
  RawView<T> view;
  const int n = shape.dims();
  view.ptr_ = array.ptr;
  view.size_ = shape.size;
  view.ndim_ = n;
#pragma unroll
  for (int d = 0; d < KSPEC_MAX_NDIM; ++d) {
    view.shape_[d] = 0;
    view.strides_[d] = 0;
  }
#pragma unroll
  for (int d = 0; d < Capacity<NDIM>::value; ++d) {  // innermost first: C axis n - 1 - d
    if (d >= n) break;
    view.shape_[n - 1 - d] = shape.extent[d];
    view.strides_[n - 1 - d] = array.stride[d];
  }
  view.c_contiguous_ = (Dense || dense_over(array, shape)) ? 1 : 0;
  return view;
}

}  // namespace kspec
