// kspec device header: `raw` parameters (RawView) and the vector type of the contiguous fast paths.
// Layouts are written down in kspec/render/_abi.py.
#pragma once

#include <kspec/indexer.cuh>

#if defined(KSPEC_HOST)
// The CPU device checks every RawView access; the host runtime (kspec_host/runtime.h) defines this and
// reports the kernel, block, thread, index and size.
namespace kspec_host {
[[noreturn]] void fault_index(long long index, long long size);
}
#endif

namespace kspec {

// A `raw` parameter: CuPy's raw CArray, an array view that the kernel body indexes by hand.
// shape()/strides() are in C order and strides in bytes, as CuPy gives them, so code that computes
// with y.strides() behaves the same. The view is shallow: indexing a const view yields a writable T&.
template <typename T>
struct RawView {
  T* ptr_;
  ptrdiff_t size_;                      // number of elements
  int ndim_;
  int c_contiguous_;                    // 1 when element i (C order) is ptr_[i]
  ptrdiff_t shape_[KSPEC_MAX_NDIM];     // C order
  ptrdiff_t strides_[KSPEC_MAX_NDIM];   // bytes, C order

  __device__ __forceinline__ ptrdiff_t size() const { return size_; }
  __device__ __forceinline__ int ndim() const { return ndim_; }
  __device__ __forceinline__ const ptrdiff_t* shape() const { return shape_; }
  __device__ __forceinline__ const ptrdiff_t* strides() const { return strides_; }
  __device__ __forceinline__ T* data() const { return ptr_; }

  // Element `i` in C order over the view's own shape (not the kernel's loop shape), strides honoured.
  __device__ __forceinline__ T& operator[](ptrdiff_t i) const {
#if defined(KSPEC_HOST)
    if (i < 0 || i >= size_) kspec_host::fault_index(i, size_);
#endif
    if (c_contiguous_) return ptr_[i];
    return *at(ptr_, unravel_offset(i, ndim_));
  }

  // Byte offset of flat C-order index i over the first n dims. RankedView passes its static rank, which makes
  // this loop's bounds known at compile time once inlined.
  __device__ __forceinline__ ptrdiff_t unravel_offset(ptrdiff_t i, int n) const {
    ptrdiff_t offset = 0;
    for (int d = n - 1; d > 0; --d) {  // innermost axis first; axis 0 takes what is left
      const ptrdiff_t q = i / shape_[d];
      offset += (i - q * shape_[d]) * strides_[d];
      i = q;
    }
    if (n > 0) offset += i * strides_[0];
    return offset;
  }

  // Element at an n-d index (`idx[d]` along axis d). N is ndim(), or more with zeros past ndim(): the index of
  // a runtime-rank loop (`_ind.get()`, kspec::LoopIndex) has KSPEC_MAX_NDIM entries. Strides past ndim() are 0.
  template <typename I, int N>
  __device__ __forceinline__ T& operator[](const I (&idx)[N]) const {
    ptrdiff_t offset = 0;
#if defined(KSPEC_HOST)
    if (N < ndim_) kspec_host::fault_index(N, ndim_);
    for (int d = 0; d < N; ++d) {
      const long long k = static_cast<long long>(idx[d]);
      const long long extent = d < ndim_ ? shape_[d] : 1;  // past ndim() only 0 is in bounds
      if (k < 0 || k >= extent) kspec_host::fault_index(k, extent);
    }
#endif
#pragma unroll
    for (int d = 0; d < N; ++d) offset += static_cast<ptrdiff_t>(idx[d]) * strides_[d];
    return *at(ptr_, offset);
  }
};

// A `raw` parameter whose rank and C-contiguity the kernel's specialization fixed: the CuPy-style
// constructors' kernels, which CuPy too compiles per rank and contiguity of each array (its
// `CArray<T, ndim, c_contiguous>`). The same bytes as RawView<T> (the launch ABI is unchanged), and it binds
// wherever a RawView<T> is taken. Why: RawView's flat index keeps a runtime-rank loop of 64-bit divisions in
// every kernel that indexes it, even when never taken; measured on an H100, that took a cupyx.scipy.ndimage
// filter from 28 to 44 registers and 1.5x CuPy's time. Here a contiguous view is `ptr_[i]` and any other
// unravels over NDIM dims known at compile time.
template <typename T, int NDIM, bool C_CONTIGUOUS>
struct RankedView : RawView<T> {
  using RawView<T>::operator[];  // the n-d index

  __device__ __forceinline__ int ndim() const { return NDIM; }

  __device__ __forceinline__ T& operator[](ptrdiff_t i) const {
#if defined(KSPEC_HOST)
    if (i < 0 || i >= this->size_) kspec_host::fault_index(i, this->size_);
#endif
    if (C_CONTIGUOUS) return this->ptr_[i];
    return *at(this->ptr_, this->unravel_offset(i, NDIM));
  }
};
static_assert(sizeof(RankedView<char, 2, false>) == sizeof(RawView<char>), "a RankedView travels in a RawView's bytes");

// N consecutive elements moved by one load or store. The contiguous fast paths use it only after checking
// that every operand is 16-byte aligned; N is chosen so that the largest element type moves 16 bytes.
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

// The address of p as an integer, to test alignment.
__device__ __forceinline__ unsigned long long address(const void* p) {
  return reinterpret_cast<unsigned long long>(p);
}

// The N elements starting at p, which must be aligned to sizeof(T) * N bytes.
template <int N, typename T>
__device__ __forceinline__ Vec<T, N> load_vec(const T* p) {
  return *reinterpret_cast<const Vec<T, N>*>(p);
}

// The N elements starting at p, one at a time (p need not be aligned).
template <int N, typename T>
__device__ __forceinline__ Vec<T, N> load_scalars(const T* p) {
  Vec<T, N> out;
#pragma unroll
  for (int e = 0; e < N; ++e) out.v[e] = p[e];
  return out;
}

template <int N, typename T>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, N>& value) {
  *reinterpret_cast<Vec<T, N>*>(p) = value;
}

}  // namespace kspec
