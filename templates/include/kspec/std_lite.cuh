// kspec device header: the part of the C++ standard library that CuPy-style kernels use through std::, for
// NVRTC, which has none, defined in kspec's own namespace `kspec_std`. <cupy/cuda_workaround.h> exports
// from it into std exactly the names CuPy's header exports from CCCL; the rest stays private, so that code
// written for CuPy can define what CuPy leaves out (std::is_same_v...) without a redefinition. kspec wrote it
// instead of taking the names from CCCL's libcu++ (<cuda/std/...>), whose headers cost 1.1-2.5 s of NVRTC
// time per kernel, where these cost 0.03-0.05 s. Of CCCL it includes only its version macro, where CCCL is on
// the include path, and it can be included before or after CCCL's headers (see std_lite/utility.cuh).
//
//   std_lite/type_traits.cuh  integral_constant, the category and property traits, decay, common_type,
//                             make_signed / make_unsigned, result_of, underlying_type, declval, _t / _v
//   std_lite/limits.cuh       numeric_limits for bool, the character and integer types, float and double
//   std_lite/utility.cuh      swap, integer_sequence / index_sequence, pair, make_pair
//   std_lite/tuple.cuh        tuple, get, make_tuple, tie, ignore; ::std::tuple_size / tuple_element
//                             (primary templates, and specializations for kspec_std's pair and tuple)
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
