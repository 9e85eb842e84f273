// kspec device header: the part of the C++ standard library that CuPy-style kernels use through std::, for
// NVRTC, which has none. <cupy/cuda_workaround.h> includes it; kspec wrote it instead of taking the names
// from CCCL's libcu++ (<cuda/std/...>), whose headers cost 1.5-2.5 s of NVRTC time per kernel, where
// these cost 0.03-0.05 s. It includes no header from outside kspec, so it needs no CCCL on the
// include path, and it can be included before or after CCCL's headers (see std_lite/utility.cuh).
//
//   std_lite/type_traits.cuh  integral_constant, the category and property traits, decay, common_type,
//                             make_signed / make_unsigned, result_of, underlying_type, declval, _t / _v
//   std_lite/limits.cuh       numeric_limits for bool, the character and integer types, float and double
//   std_lite/utility.cuh      swap, integer_sequence / index_sequence, pair, make_pair (move / forward
//                             are NVRTC's builtins)
//   std_lite/tuple.cuh        tuple, get, make_tuple, tie, ignore, tuple_size / tuple_element
//
// Everything is __host__ __device__ (NVRTC rejects functions without an execution space) and C++11 or later.
// With a host compiler (kspec's CPU device, nvcc) it is the real standard library that std:: names.
#pragma once

#if defined(__CUDACC_RTC__)
#include <kspec/std_lite/type_traits.cuh>
#include <kspec/std_lite/limits.cuh>
#include <kspec/std_lite/utility.cuh>
#include <kspec/std_lite/tuple.cuh>
#else
#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>
#endif
