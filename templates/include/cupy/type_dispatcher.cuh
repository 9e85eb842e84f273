// CuPy's <cupy/type_dispatcher.cuh> for kspec: CuPy's dtype ids (CUPY_TYPE_*) and dtype_dispatcher, which
// calls a functor's `template <typename T> operator()` with the C type of a dtype id. CuPy's runs on the
// host (its thrust routines); kspec compiles device code only, so here it is __host__ __device__ and can
// pick a type inside a kernel. The C types are kspec's: long long for int64 (CuPy's int64_t), __half for
// float16, complex<float> / complex<double> (kspec/complex.cuh) for the complex dtypes. An unknown id is
// __trap() on the device (CuPy: std::runtime_error on the host).
//
// It includes complex (kspec/complex.cuh) and cuda_fp16.h: ~25 ms of NVRTC time together.
#pragma once

#include <cupy/complex.cuh>
#include <cuda_fp16.h>
#if !defined(__CUDA_ARCH__) && !defined(KSPEC_HOST)
#include <stdexcept>
#endif

#define CUPY_TYPE_INT8 0
#define CUPY_TYPE_UINT8 1
#define CUPY_TYPE_INT16 2
#define CUPY_TYPE_UINT16 3
#define CUPY_TYPE_INT32 4
#define CUPY_TYPE_UINT32 5
#define CUPY_TYPE_INT64 6
#define CUPY_TYPE_UINT64 7
#define CUPY_TYPE_FLOAT16 8
#define CUPY_TYPE_FLOAT32 9
#define CUPY_TYPE_FLOAT64 10
#define CUPY_TYPE_COMPLEX64 11
#define CUPY_TYPE_COMPLEX128 12
#define CUPY_TYPE_BOOL 13

template <class Functor, typename... Args>
__host__ __device__ void dtype_dispatcher(int dtype_id, Functor f, Args&&... args) {
  switch (dtype_id) {
    case CUPY_TYPE_INT8: return f.template operator()<signed char>(static_cast<Args&&>(args)...);
    case CUPY_TYPE_UINT8: return f.template operator()<unsigned char>(static_cast<Args&&>(args)...);
    case CUPY_TYPE_INT16: return f.template operator()<short>(static_cast<Args&&>(args)...);
    case CUPY_TYPE_UINT16: return f.template operator()<unsigned short>(static_cast<Args&&>(args)...);
    case CUPY_TYPE_INT32: return f.template operator()<int>(static_cast<Args&&>(args)...);
    case CUPY_TYPE_UINT32: return f.template operator()<unsigned int>(static_cast<Args&&>(args)...);
    case CUPY_TYPE_INT64: return f.template operator()<long long>(static_cast<Args&&>(args)...);
    case CUPY_TYPE_UINT64: return f.template operator()<unsigned long long>(static_cast<Args&&>(args)...);
    case CUPY_TYPE_FLOAT16: return f.template operator()<__half>(static_cast<Args&&>(args)...);
    case CUPY_TYPE_FLOAT32: return f.template operator()<float>(static_cast<Args&&>(args)...);
    case CUPY_TYPE_FLOAT64: return f.template operator()<double>(static_cast<Args&&>(args)...);
    case CUPY_TYPE_COMPLEX64: return f.template operator()<complex<float>>(static_cast<Args&&>(args)...);
    case CUPY_TYPE_COMPLEX128: return f.template operator()<complex<double>>(static_cast<Args&&>(args)...);
    case CUPY_TYPE_BOOL: return f.template operator()<bool>(static_cast<Args&&>(args)...);
    default:
#if defined(__CUDA_ARCH__) || defined(KSPEC_HOST)
      __trap();
#else
      throw std::runtime_error("Unsupported dtype ID");
#endif
  }
}
