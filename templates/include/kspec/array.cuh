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

// The fields and the shared members of a `raw` parameter's view (CuPy's raw CArray), with room for CAP dims:
// RawView (any rank up to KSPEC_MAX_NDIM) and RankedView (a rank fixed by the specialization). shape()/strides()
// are in C order and strides in bytes, as CuPy gives them, so code that computes with y.strides() behaves the
// same. A view is shallow: indexing a const view yields a writable T&. Layouts: kspec/render/_layout.py.
template <typename T, int CAP>
struct ViewFields {
  T* ptr_;
  ptrdiff_t size_;                      // number of elements
  union {                               // CuPy code reads `a.ndim` (a CArray data member), kspec's `a.ndim()`:
    int ndim_;                          // the field the launcher writes (kspec/render/_layout.py)
    DynamicRank ndim;                   // the same int, read either way (RankedView hides it with its constant)
  };
  int c_contiguous_;                    // 1 when element i (C order) is ptr_[i]
  ptrdiff_t shape_[CAP];                // C order
  ptrdiff_t strides_[CAP];              // bytes, C order

  __device__ __forceinline__ ptrdiff_t size() const { return size_; }
  __device__ __forceinline__ const ptrdiff_t* shape() const { return shape_; }
  __device__ __forceinline__ const ptrdiff_t* strides() const { return strides_; }
  __device__ __forceinline__ T* data() const { return ptr_; }

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
  // a runtime-rank loop (`_ind.get()`, kspec::LoopIndex) has KSPEC_MAX_NDIM entries. Entries past CAP are
  // such zeros and add nothing.
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
    for (int d = 0; d < N; ++d) {
      if (d < CAP) offset += static_cast<ptrdiff_t>(idx[d]) * strides_[d];
    }
    return *at(ptr_, offset);
  }
};

// A `raw` parameter of any rank (spec files, whose binaries serve every layout): strides past ndim() are 0.
template <typename T>
struct RawView : ViewFields<T, KSPEC_MAX_NDIM> {
  using ViewFields<T, KSPEC_MAX_NDIM>::operator[];  // the n-d index

  // Element `i` in C order over the view's own shape (not the kernel's loop shape), strides honoured.
  __device__ __forceinline__ T& operator[](ptrdiff_t i) const {
#if defined(KSPEC_HOST)
    if (i < 0 || i >= this->size_) kspec_host::fault_index(i, this->size_);
#endif
    if (this->c_contiguous_) return this->ptr_[i];
    return *at(this->ptr_, this->unravel_offset(i, this->ndim_));
  }
};

// A `raw` parameter whose rank and C-contiguity the kernel's specialization fixed: the CuPy-style
// constructors' kernels, which CuPy too compiles per rank and contiguity of each array (its
// `CArray<T, ndim, c_contiguous>`). Why: RawView's flat index keeps a runtime-rank loop of 64-bit divisions in
// every kernel that indexes it, even when never taken (on an H100, a cupyx.scipy.ndimage filter went from 28
// to 44 registers and 1.5x CuPy's time). Here a contiguous view is `ptr_[i]` and any other unravels over NDIM
// dims known at compile time. Its shape and strides hold NDIM entries, not KSPEC_MAX_NDIM, as CuPy's CArray:
// with the larger parameter NVRTC 13 kept ndimage.zoom's bounds arithmetic inside its tap loops (20 integer
// remainders per element instead of 8, 148 vs 86 us on an H100).
template <typename T, int NDIM, bool C_CONTIGUOUS>
struct RankedView : ViewFields<T, (NDIM > 0 ? NDIM : 1)> {
  using ViewFields<T, (NDIM > 0 ? NDIM : 1)>::operator[];  // the n-d index

  static constexpr StaticRank<NDIM> ndim{};  // hides the field: a constant, as CuPy's CArray::ndim

  __device__ __forceinline__ T& operator[](ptrdiff_t i) const {
#if defined(KSPEC_HOST)
    if (i < 0 || i >= this->size_) kspec_host::fault_index(i, this->size_);
#endif
    if (C_CONTIGUOUS) return this->ptr_[i];
    return *at(this->ptr_, this->unravel_offset(i, NDIM));
  }

  // Where code takes a RawView<T> (kspec's helpers, a preamble written for spec files).
  __device__ __forceinline__ operator RawView<T>() const {
    RawView<T> view;
    view.ptr_ = this->ptr_;
    view.size_ = this->size_;
    view.ndim_ = NDIM;
    view.c_contiguous_ = this->c_contiguous_;
#pragma unroll
    for (int d = 0; d < KSPEC_MAX_NDIM; ++d) {
      view.shape_[d] = d < NDIM ? this->shape_[d] : 0;
      view.strides_[d] = d < NDIM ? this->strides_[d] : 0;
    }
    return view;
  }
};

// N consecutive elements moved by one load or store. The contiguous fast paths use it only after checking
// that every operand is 16-byte aligned; N is chosen so that the largest element type moves 16 bytes.
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

// N consecutive elements of a read-only load, as the reductions walk them: a Vec, but for 1-byte types (N a
// multiple of 4) kept as 32-bit words and read a byte at a time where used. A Vec<int8, 16> held each byte in a
// register of its own, and the reductions' deep unrolls spilled: a float32 sum of squares of int8 over outer
// axes, 728 bytes in the vectorised cols entry, 36 as words; a uint8 max 300 -> 44 (ptxas through NVRTC 13,
// sm_90). KSPEC_READ_WORDS=0 keeps the Vec (to compare).
#ifndef KSPEC_READ_WORDS
#define KSPEC_READ_WORDS 1
#endif
template <typename T, int N>
struct ReadAsWords {  // not a variable template (the headers compile as C++11 too) nor a static member (a symbol)
  enum { value = KSPEC_READ_WORDS && sizeof(T) == 1 && N % 4 == 0 };
};

template <typename T, int N, bool Words = static_cast<bool>(ReadAsWords<T, N>::value)>
struct ReadVec : Vec<T, N> {};

template <typename T, int N>
struct alignas(N) ReadVec<T, N, true> {
  struct Bytes {
    unsigned int w[N / 4];
    __device__ __forceinline__ T operator[](int e) const {
      return static_cast<T>(static_cast<unsigned char>(w[e >> 2] >> (8 * (e & 3))));
    }
  } v;
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

// load_vec as a ReadVec.
template <int N, typename T>
__device__ __forceinline__ ReadVec<T, N> load_read(const T* p) {
  return *reinterpret_cast<const ReadVec<T, N>*>(p);
}

// The N elements starting at p, one at a time (p need not be aligned).
template <int N, typename T>
__device__ __forceinline__ Vec<T, N> load_scalars(const T* p) {
  Vec<T, N> out;
#pragma unroll
  for (int e = 0; e < N; ++e) out.v[e] = p[e];
  return out;
}

// load_scalars as a ReadVec.
template <int N, typename T>
__device__ __forceinline__ ReadVec<T, N> load_read_scalars(const T* p) {
  ReadVec<T, N> out;
  if constexpr (ReadAsWords<T, N>::value) {
#pragma unroll
    for (int i = 0; i < N / 4; ++i) out.v.w[i] = 0u;
#pragma unroll
    for (int e = 0; e < N; ++e) out.v.w[e >> 2] |= static_cast<unsigned int>(static_cast<unsigned char>(p[e])) << (8 * (e & 3));
  } else {
    static_cast<Vec<T, N>&>(out) = load_scalars<N>(p);
  }
  return out;
}

template <int N, typename T>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, N>& value) {
  *reinterpret_cast<Vec<T, N>*>(p) = value;
}

// The strided elementwise entry's inner vectors: whether an operand of a loop of `ndim` dims moves N elements
// of dim 0 at a time. A dense one (innermost stride = its item size) needs a base and outer strides that keep
// every vector aligned to its size; an input broadcast along dim 0 (stride 0) is one scalar per vector; an output
// must be dense. D bounds ndim (the entry takes runtime ranks up to 4): a test per capacity dim, 16 of them, was
// half a float16 broadcast's instructions where each thread moved 4 vectors (ncu: benchmarks/NOTES.md v69).
template <int N, int D, typename T, int NDIM, typename IndexT>
__device__ __forceinline__ bool inner_vector_ok(const StridedArray<T, NDIM, IndexT>& a, int ndim, bool input) {
  if (a.stride[0] == 0) return input;
  if (a.stride[0] != static_cast<IndexT>(sizeof(T)) || address(a.ptr) % (sizeof(T) * N) != 0) return false;
#pragma unroll
  for (int d = 1; d < D && d < Capacity<NDIM>::value; ++d) {
    if (d < ndim && a.stride[d] % static_cast<IndexT>(sizeof(T) * N) != 0) return false;
  }
  return true;
}

// N elements along dim 0 from p: a vector load where the stride is the item size, else (0: broadcast) one
// element N times. Elements narrower than a word are chosen between the two as whole words: a choice per
// element made a float16 vector's two loads 25 byte moves (ncu: benchmarks/NOTES.md v69).
template <int N, typename T, bool Words = (sizeof(T) < 4 && sizeof(T) * N % 4 == 0)>
struct InnerLoad {
  template <typename IndexT>
  static __device__ __forceinline__ Vec<T, N> load(const T* p, IndexT stride) {
    if (stride != 0) return load_vec<N>(p);
    Vec<T, N> out;
    const T value = *p;
#pragma unroll
    for (int e = 0; e < N; ++e) out.v[e] = value;
    return out;
  }
};

template <int N, typename T>
struct InnerLoad<N, T, true> {
  struct alignas(sizeof(T) * N) Words {
    unsigned int w[sizeof(T) * N / 4];
  };
  template <typename IndexT>
  static __device__ __forceinline__ Vec<T, N> load(const T* p, IndexT stride) {
    Words words;
    if (stride != 0) {
      words = *reinterpret_cast<const Words*>(p);
    } else {  // the element's bits in every slot of a word
      const unsigned int bits = sizeof(T) == 2 ? *reinterpret_cast<const unsigned short*>(p) * 0x10001u
                                               : *reinterpret_cast<const unsigned char*>(p) * 0x1010101u;
#pragma unroll
      for (int i = 0; i < static_cast<int>(sizeof(T) * N / 4); ++i) words.w[i] = bits;
    }
    Vec<T, N> out;
    *reinterpret_cast<Words*>(&out) = words;
    return out;
  }
};

template <int N, typename T, typename IndexT>
__device__ __forceinline__ Vec<T, N> load_inner(const T* p, IndexT stride) {
  return InnerLoad<N, T>::load(p, stride);
}

}  // namespace kspec
