// CuPy's type for an unstructured void dtype (NumPy's V3: a blob of N bytes), under CuPy's name: a kernel given
// such an array sees elements of cupy::UnstructuredVoid<N>, compared bytewise and assigned from any value whose
// bytes it takes (as many as fit, the rest zero), as NumPy assigns to a void scalar.
#pragma once

#include <cupy/carray.cuh>

namespace cupy {

template <size_t N>
class UnstructuredVoid {
 public:
  char data[N];

  UnstructuredVoid() = default;

  template <typename Other>
  __host__ __device__ explicit UnstructuredVoid(const Other& other) {
    *this = other;
  }

  __host__ __device__ bool operator==(const UnstructuredVoid& other) const {
    for (size_t b = 0; b < N; ++b) {
      if (data[b] != other.data[b]) return false;
    }
    return true;
  }
  __host__ __device__ bool operator!=(const UnstructuredVoid& other) const { return !(*this == other); }

  template <typename Other>
  __host__ __device__ UnstructuredVoid& operator=(const Other& other) {
    const char* bytes = reinterpret_cast<const char*>(&other);
    const size_t copied = N < sizeof(Other) ? N : sizeof(Other);
    for (size_t b = 0; b < copied; ++b) data[b] = bytes[b];
    for (size_t b = copied; b < N; ++b) data[b] = 0;
    return *this;
  }
};

}  // namespace cupy
