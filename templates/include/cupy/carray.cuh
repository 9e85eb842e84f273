// CuPy's <cupy/carray.cuh> for kspec: the names CuPy's kernels use without declaring them.
//
// kspec's CuPy-style constructors (ElementwiseKernel, ReductionKernel) include this header, atomics.cuh and
// math_constants.h in every kernel, as CuPy prepends its own; raw modules and spec files get them by
// including them (spec files: `cupy_headers = true`). Written for kspec from CuPy's documented behaviour:
//  * cupy::type_traits (conditional, enable_if, is_same), M_PI, CUPY_FOR(i, n); with CUPY_JIT_MODE defined
//    (code from CuPy's JIT transpiler), STD (std through <cupy/cuda_workaround.h>), cupy::as_tuple and Dim
//    (cupy/jit_mode.cuh);
//  * CArray<T, ndim, c_contiguous, use_32bit_indexing>: an array view with C-order shape and byte strides,
//    indexed by flat C-order index or by an index array; made from a pointer + shape (+ strides), from
//    initializer lists, or from a kspec raw parameter (kspec::RawView, whose ndim must equal `ndim`);
//  * CIndexer<ndim>: size(), set(i) (flat C-order index -> coordinates), get() (the coordinates);
//  * _floor_divide for int, long long, unsigned, unsigned long long, float and double (x / y rounded
//    down; 0 for an integer division by zero, as CuPy's).
// Every function is a template, instantiated only where a kernel uses it: NVRTC compiles each unused
// non-template inline function anyway (about 0.2 ms each), and these headers are in every kernel of the
// constructors. The overloads below are templates with an unused defaulted parameter, so their overload
// resolution (conversions included) is that of plain functions.
#pragma once

#if !defined(__CUDACC_RTC__)
#include <initializer_list>  // NVRTC declares std::initializer_list itself; a host compiler needs the header
#endif

#include <kspec/array.cuh>
#include <kspec/select.cuh>

namespace cupy {
namespace type_traits {

using ::kspec::conditional;  // kspec/select.cuh, shared with kspec's std:: names
using ::kspec::enable_if;

template <class T, class U>
struct is_same {
  enum : bool { value = false };  // an enumerator: no device global (kspec/select.cuh)
};
template <class T>
struct is_same<T, T> {
  enum : bool { value = true };
};

}  // namespace type_traits
}  // namespace cupy

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

// CuPy's 16-bit float classes (cupy/float16.cuh, cupy/bfloat16.cuh), declared here so that templates
// such as atomics.cuh's atomicAdd can name them before they are defined.
class float16;
class bfloat16;

// Code CuPy's own JIT transpiler emits (-DCUPY_JIT_MODE): STD, cupy::as_tuple and Dim (cupy/jit_mode.cuh).
#if defined(CUPY_JIT_MODE)
#include <cupy/jit_mode.cuh>
#endif

// A grid-stride loop over 0 <= i < n.
#define CUPY_FOR(i, n)                                                                   \
  for (ptrdiff_t i = static_cast<ptrdiff_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<ptrdiff_t>(blockDim.x) * gridDim.x)

namespace kspec_cupy {

// On the CPU device, a fault when an initializer list does not hold n values (CuPy asserts it).
template <typename Int>
__device__ __forceinline__ void check_length(const std::initializer_list<Int>& list, int n) {
#if defined(KSPEC_HOST)
  if (static_cast<int>(list.size()) != n) kspec_host::fault_index(static_cast<long long>(list.size()), n);
#else
  (void)list;
  (void)n;
#endif
}

// On the CPU device, a fault when index i is outside [0, n).
template <typename = void>
__device__ __forceinline__ void check_index(long long i, long long n) {
#if defined(KSPEC_HOST)
  if (i < 0 || i >= n) kspec_host::fault_index(i, n);
#else
  (void)i;
  (void)n;
#endif
}

}  // namespace kspec_cupy

template <typename T, int _ndim, bool _c_contiguous = false, bool _use_32bit_indexing = false>
class CArray {
 public:
  static const int ndim = _ndim;
  static const bool c_contiguous = _c_contiguous;
  // The type of offset arithmetic: int when the caller promises every offset fits in 32 bits.
  typedef typename cupy::type_traits::conditional<_use_32bit_indexing, int, ptrdiff_t>::type index_t;

 private:
  T* data_;
  ptrdiff_t size_;
  ptrdiff_t shape_[_ndim];    // C order
  ptrdiff_t strides_[_ndim];  // bytes, C order

  template <typename Int1, typename Int2>
  __device__ void set_layout(const Int1* shape, const Int2* strides) {
    size_ = 1;
    for (int d = 0; d < _ndim; ++d) {
      shape_[d] = static_cast<ptrdiff_t>(shape[d]);
      strides_[d] = static_cast<ptrdiff_t>(strides[d]);
      size_ *= shape_[d];
    }
  }

  __device__ const T* element(index_t byte_offset) const {
    return reinterpret_cast<const T*>(reinterpret_cast<const char*>(data_) + byte_offset);
  }

  template <typename Int>
  __device__ void set_contiguous_layout(const Int* shape) {
    size_ = 1;
    for (int d = _ndim - 1; d >= 0; --d) {
      shape_[d] = static_cast<ptrdiff_t>(shape[d]);
      strides_[d] = size_ * static_cast<ptrdiff_t>(sizeof(T));
      size_ *= shape_[d];
    }
  }

 public:
  __device__ CArray() : data_(nullptr), size_(1), shape_(), strides_() {}

  // CArray<T, 3> a(data, shape, strides): strides in bytes.
  template <typename Int1, typename Int2>
  __device__ CArray(T* data, const Int1* shape, const Int2* strides) : data_(data) {
    set_layout(shape, strides);
  }

  // CArray<T, 3, true> a(data, shape): C-contiguous arrays only.
  template <typename Int, typename U = T>
  __device__ CArray(typename cupy::type_traits::enable_if<_c_contiguous, U>::type* data, const Int* shape)
      : data_(data) {
    set_contiguous_layout(shape);
  }

  // CArray<T, 3, true> a(data, {2, 3, 4}): C-contiguous arrays only.
  template <typename Int, typename U = T>
  __device__ CArray(typename cupy::type_traits::enable_if<_c_contiguous, U>::type* data,
                    std::initializer_list<Int> shape)
      : data_(data) {
    kspec_cupy::check_length(shape, _ndim);
    set_contiguous_layout(shape.begin());
  }

  // CArray<T, 2> a(data, {2, 3}, {24, 8}).
  template <typename Int1, typename Int2>
  __device__ CArray(T* data, std::initializer_list<Int1> shape, std::initializer_list<Int2> strides)
      : data_(data) {
    kspec_cupy::check_length(shape, _ndim);
    kspec_cupy::check_length(strides, _ndim);
    set_layout(shape.begin(), strides.begin());
  }

  // From a kspec `raw` parameter (kspec::RawView or RankedView): CArray<T, 2> a(x), or a raw argument passed
  // where a function takes `const CArray<T, 2>&` or a CArray by value. The view's ndim must be `ndim`.
  template <int CAP>
  __device__ CArray(const kspec::ViewFields<T, CAP>& view) : data_(view.data()) {
#if defined(KSPEC_HOST)
    if (view.ndim_ != _ndim) kspec_host::fault_index(view.ndim_, _ndim);
#endif
    set_layout(view.shape(), view.strides());
  }

  __device__ ptrdiff_t size() const { return size_; }
  __device__ const ptrdiff_t* shape() const { return shape_; }
  __device__ const ptrdiff_t* strides() const { return strides_; }
  __device__ T* data() const { return data_; }

  // Element i in C order over the array's shape, strides honoured.
  __device__ const T& operator[](ptrdiff_t i) const {
    kspec_cupy::check_index(i, size_);
    if (_c_contiguous) return data_[i];
    index_t rem = static_cast<index_t>(i);
    index_t offset = 0;
    for (int d = _ndim - 1; d > 0; --d) {  // innermost axis first; axis 0 takes what is left
      const index_t extent = static_cast<index_t>(shape_[d]);
      const index_t q = rem / extent;
      offset += (rem - q * extent) * static_cast<index_t>(strides_[d]);
      rem = q;
    }
    offset += rem * static_cast<index_t>(strides_[0]);
    return *element(offset);
  }
  __device__ T& operator[](ptrdiff_t i) { return const_cast<T&>(static_cast<const CArray&>(*this)[i]); }

  // Element at an index array: idx[d] along axis d.
  template <typename Int>
  __device__ const T& operator[](const Int (&idx)[_ndim]) const {
    index_t offset = 0;
    for (int d = 0; d < _ndim; ++d) {
      kspec_cupy::check_index(static_cast<long long>(idx[d]), shape_[d]);
      offset += static_cast<index_t>(idx[d]) * static_cast<index_t>(strides_[d]);
    }
    return *element(offset);
  }
  template <typename Int>
  __device__ T& operator[](const Int (&idx)[_ndim]) {
    return const_cast<T&>(static_cast<const CArray&>(*this)[idx]);
  }

  // Element at a braced index: a[{i, j}].
  template <typename Int>
  __device__ const T& operator[](std::initializer_list<Int> idx) const {
    kspec_cupy::check_length(idx, _ndim);
    index_t offset = 0;
    const Int* p = idx.begin();
    for (int d = 0; d < _ndim; ++d) {
      kspec_cupy::check_index(static_cast<long long>(p[d]), shape_[d]);
      offset += static_cast<index_t>(p[d]) * static_cast<index_t>(strides_[d]);
    }
    return *element(offset);
  }
  template <typename Int>
  __device__ T& operator[](std::initializer_list<Int> idx) {
    return const_cast<T&>(static_cast<const CArray&>(*this)[idx]);
  }
};

// A 0-dim array: one element, whatever the index.
template <typename T, bool _c_contiguous, bool _use_32bit_indexing>
class CArray<T, 0, _c_contiguous, _use_32bit_indexing> {
 public:
  static const int ndim = 0;
  static const bool c_contiguous = true;
  typedef typename cupy::type_traits::conditional<_use_32bit_indexing, int, ptrdiff_t>::type index_t;

 private:
  T* data_;
  ptrdiff_t size_;

 public:
  __device__ CArray() : data_(nullptr), size_(1) {}
  __device__ explicit CArray(T* data) : data_(data), size_(1) {}
  template <typename Int>
  __device__ CArray(T* data, Int size) : data_(data), size_(static_cast<ptrdiff_t>(size)) {}
  // The n-dim constructors' forms, with nothing to read.
  template <typename Int1, typename Int2>
  __device__ CArray(T* data, const Int1*, const Int2*) : data_(data), size_(1) {}
  __device__ CArray(T* data, std::initializer_list<int>, std::initializer_list<int>) : data_(data), size_(1) {}
  template <int CAP>
  __device__ CArray(const kspec::ViewFields<T, CAP>& view) : data_(view.data()), size_(1) {
#if defined(KSPEC_HOST)
    if (view.ndim_ != 0) kspec_host::fault_index(view.ndim_, 0);
#endif
  }

  __device__ ptrdiff_t size() const { return size_; }
  __device__ const ptrdiff_t* shape() const { return nullptr; }
  __device__ const ptrdiff_t* strides() const { return nullptr; }
  __device__ T* data() const { return data_; }

  template <typename U>
  __device__ T& operator[](const U&) {
    return *data_;
  }
  template <typename U>
  __device__ const T& operator[](const U&) const {
    return *data_;
  }
};

// The coordinates of a flat C-order index over a shape: set(i), then get()[d] along axis d.
template <int _ndim, bool _use_32bit_indexing = false>
class CIndexer {
 public:
  static const int ndim = _ndim;

 private:
  ptrdiff_t size_;
  ptrdiff_t shape_[_ndim];
  ptrdiff_t index_[_ndim];

  template <typename Int1, typename Int2>
  __device__ void set_shape(const Int1* shape, const Int2* index) {
    size_ = 1;
    for (int d = 0; d < _ndim; ++d) {
      shape_[d] = static_cast<ptrdiff_t>(shape[d]);
      index_[d] = index == nullptr ? 0 : static_cast<ptrdiff_t>(index[d]);
      size_ *= shape_[d];
    }
  }

  // Unravel in I: 32-bit division is several times cheaper than 64-bit division.
  template <typename I>
  __device__ void unravel(I rem) {
    for (int d = _ndim - 1; d > 0; --d) {
      const I extent = static_cast<I>(shape_[d]);
      const I q = rem / extent;
      index_[d] = static_cast<ptrdiff_t>(rem - q * extent);
      rem = q;
    }
    index_[0] = static_cast<ptrdiff_t>(rem);
  }

 public:
  __device__ CIndexer() : size_(1), shape_(), index_() {}
  template <typename Int>
  __device__ explicit CIndexer(const Int* shape) {
    set_shape(shape, static_cast<const Int*>(nullptr));
  }
  template <typename Int1, typename Int2>
  __device__ CIndexer(const Int1* shape, const Int2* index) {
    set_shape(shape, index);
  }
  template <typename Int>
  __device__ CIndexer(std::initializer_list<Int> shape) {
    kspec_cupy::check_length(shape, _ndim);
    set_shape(shape.begin(), static_cast<const Int*>(nullptr));
  }
  template <typename Int1, typename Int2>
  __device__ CIndexer(std::initializer_list<Int1> shape, std::initializer_list<Int2> index) {
    kspec_cupy::check_length(shape, _ndim);
    kspec_cupy::check_length(index, _ndim);
    set_shape(shape.begin(), index.begin());
  }

  __device__ ptrdiff_t size() const { return size_; }
  __device__ const ptrdiff_t (&get() const)[_ndim] { return index_; }

  __device__ void set(ptrdiff_t i) {
    if (_ndim == 1) {
      index_[0] = i;
    } else if (_use_32bit_indexing || size_ <= 0x7fffffff) {
      unravel(static_cast<unsigned int>(i));
    } else {
      unravel(static_cast<unsigned long long>(i));
    }
  }
};

template <bool _use_32bit_indexing>
class CIndexer<0, _use_32bit_indexing> {
 public:
  static const int ndim = 0;

 private:
  ptrdiff_t size_;

 public:
  __device__ CIndexer() : size_(1) {}
  template <typename Int>
  __device__ explicit CIndexer(Int size) : size_(static_cast<ptrdiff_t>(size)) {}
  // The n-dim constructors' forms, with nothing to read.
  template <typename Int>
  __device__ explicit CIndexer(const Int*) : size_(1) {}
  template <typename Int1, typename Int2>
  __device__ CIndexer(const Int1*, const Int2*) : size_(1) {}
  __device__ CIndexer(std::initializer_list<int>) : size_(1) {}
  __device__ CIndexer(std::initializer_list<int>, std::initializer_list<int>) : size_(1) {}

  __device__ ptrdiff_t size() const { return size_; }
  __device__ void set(ptrdiff_t) {}
  __device__ const ptrdiff_t* get() const { return nullptr; }
};

// x / y rounded toward negative infinity (CuPy's helper of floor_divide and remainder).
template <typename = void>
__device__ __forceinline__ int _floor_divide(int x, int y) {
  if (y == 0) return 0;
  const int q = x / y;
  return (q * y != x && ((x < 0) != (y < 0))) ? q - 1 : q;
}
template <typename = void>
__device__ __forceinline__ long long _floor_divide(long long x, long long y) {
  if (y == 0) return 0;
  const long long q = x / y;
  return (q * y != x && ((x < 0) != (y < 0))) ? q - 1 : q;
}
template <typename = void>
__device__ __forceinline__ unsigned int _floor_divide(unsigned int x, unsigned int y) {
  return y == 0 ? 0u : x / y;
}
template <typename = void>
__device__ __forceinline__ unsigned long long _floor_divide(unsigned long long x, unsigned long long y) {
  return y == 0 ? 0ull : x / y;
}
template <typename = void>
__device__ __forceinline__ float _floor_divide(float x, float y) {
  return floorf(x / y);
}
template <typename = void>
__device__ __forceinline__ double _floor_divide(double x, double y) {
  return floor(x / y);
}
