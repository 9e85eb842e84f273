// CuPy's <cupy/cuda_workaround.h> for kspec. CuPy's (v14) includes CCCL's <cuda/std/type_traits>, <limits>,
// <utility> and <tuple> and exports a fixed list of their names into namespace std; code written for CuPy
// defines anything else it uses there itself (cupyx.signal's channelizer: std::is_same_v), so kspec exports
// exactly that list, no more, no less (KSPEC_CUPY_STD_NAMES below, in CuPy's order).
//
// By default the names come from kspec/std_lite.cuh (namespace kspec_std): CCCL's four headers cost ~1.1 s
// of NVRTC time in every kernel that includes this one (all of cupyx.scipy.ndimage's filters do), kspec's
// ~0.03 s. <cuda/std/cstdint> (~0.01 s) is real CCCL: under NVRTC CCCL's headers declare the fixed-width
// integer types globally (uint32_t, int64_t...) with their limit macros (INT32_MAX...), and CuPy kernels use
// them after including only this header (before C++17, which CCCL requires, kspec declares the same names).
// Specializing an exported trait works (`template <> struct std::is_floating_point<float16> : std::true_type
// {};`, as CuPy's ndimage does).
//
// With KSPEC_CUDA_STD defined (kspec's renderer defines it when the kernel's code names cuda::std:
// kspec/render/_analysis.py) the header is CuPy's exactly, for code that uses cuda::std:: after including
// only this header. With a host compiler (kspec's CPU device) std:: is the real standard library, so this
// header only includes it.
#pragma once

#if defined(__CUDACC_RTC__)

#if __cplusplus >= 201402L
#define KSPEC_CUPY_STD_NAMES_CXX14(X) X(index_sequence) X(integer_sequence) X(make_index_sequence) X(make_integer_sequence)
#else
#define KSPEC_CUPY_STD_NAMES_CXX14(X)
#endif
// CuPy's list: <type_traits>, <limits>, <utility> (integer sequences from C++14), <tuple>
#define KSPEC_CUPY_STD_NAMES(X)                                                                                \
  X(add_const) X(add_cv) X(add_lvalue_reference) X(add_volatile) X(alignment_of) X(conditional) X(enable_if)   \
  X(false_type) X(integral_constant) X(is_array) X(is_base_of) X(is_convertible) X(is_enum)                    \
  X(is_floating_point) X(is_function) X(is_integral) X(is_lvalue_reference) X(is_same) X(is_signed)            \
  X(is_pointer) X(is_unsigned) X(is_volatile) X(make_signed) X(make_unsigned) X(remove_cv) X(remove_reference) \
  X(remove_pointer) X(result_of) X(true_type)                                                                  \
  X(numeric_limits)                                                                                            \
  X(declval) KSPEC_CUPY_STD_NAMES_CXX14(X) X(make_pair) X(pair)                                                \
  X(get) X(tuple) X(make_tuple)

#if defined(KSPEC_CUDA_STD)
#include <cuda/std/type_traits>
#include <cuda/std/limits>
#include <cuda/std/utility>
#include <cuda/std/tuple>
#define KSPEC_CUPY_STD_USING(name) using cuda::std::name;
#else
#if __cplusplus >= 201703L
#include <cuda/std/cstdint>
#else
#include <kspec/std_lite/cstdint.cuh>  // the same names: CCCL refuses C++11 / C++14, this header does not
#endif
#include <kspec/std_lite.cuh>
#define KSPEC_CUPY_STD_USING(name) using kspec_std::name;
#endif

namespace std {
KSPEC_CUPY_STD_NAMES(KSPEC_CUPY_STD_USING)
}  // namespace std

#undef KSPEC_CUPY_STD_USING
#undef KSPEC_CUPY_STD_NAMES
#undef KSPEC_CUPY_STD_NAMES_CXX14

#else

#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>

#endif
