// cupy/carray.cuh's part for code from CuPy's JIT transpiler (cupy.vectorize builds an ElementwiseKernel with
// -DCUPY_JIT_MODE): that code names the standard library as STD:: and builds tuples from index arrays with
// cupy::as_tuple, as CuPy's carray.cuh gives them under CUPY_JIT_MODE. A header of its own to keep carray.cuh
// short; a kspec name, not one of CuPy's headers. carray.cuh includes it, only when CUPY_JIT_MODE is defined,
// at the point where CuPy's carray.cuh declares these names.
#pragma once

#include <cupy/cuda_workaround.h>
namespace STD = std;
namespace cupy {
// as_tuple<ndim, T>::call(ints) -> STD::tuple of ints[0], ..., ints[ndim - 1]
template <int ndim, typename T>
struct as_tuple {
  template <int N, typename... Args>
  struct build {
    using type = typename build<N - 1, T, Args...>::type;
    template <typename Ints>
    __device__ static type call(Ints ints, Args... args) {
      return build<N - 1, T, Args...>::call(ints, ints[N - 1], args...);
    }
  };
  template <typename... Args>
  struct build<0, Args...> {
    using type = STD::tuple<Args...>;
    template <typename Ints>
    __device__ static type call(Ints, Args... args) {
      return STD::make_tuple(args...);
    }
  };
  using type = typename build<ndim>::type;
  template <typename Ints>
  __device__ static type call(Ints ints) {
    return build<ndim>::call(ints);
  }
};
}  // namespace cupy
template <int dim>
struct Dim {
  __device__ Dim() {}
};
