// CuPy's <cupy/cuda_workaround.h> for kspec: NVRTC has no C++ standard library, so code written against
// std:: (std::is_same, std::numeric_limits, std::enable_if, std::tuple...) gets libcu++'s cuda::std names
// under std:: here, from the nvidia-cuda-cccl headers on NVRTC's include path. It covers the names CuPy's
// header covers (type traits, numeric_limits, declval / pair / integer sequences, tuple) and a few more
// that such code uses (the _t / _v aliases, forward, move, swap). Specializing a trait through these names
// works (`template <> struct std::is_floating_point<float16> : std::true_type {};`).
//
// With a host compiler (kspec's CPU device) std:: is the real standard library, so this header only
// includes it.
#pragma once

#if defined(__CUDACC_RTC__)

#include <cuda/std/limits>
#include <cuda/std/tuple>
#include <cuda/std/type_traits>
#include <cuda/std/utility>

namespace std {
// <type_traits>
using cuda::std::add_const;
using cuda::std::add_cv;
using cuda::std::add_lvalue_reference;
using cuda::std::add_pointer;
using cuda::std::add_rvalue_reference;
using cuda::std::add_volatile;
using cuda::std::alignment_of;
using cuda::std::bool_constant;
using cuda::std::common_type;
using cuda::std::conditional;
using cuda::std::conditional_t;
using cuda::std::decay;
using cuda::std::decay_t;
using cuda::std::enable_if;
using cuda::std::enable_if_t;
using cuda::std::false_type;
using cuda::std::integral_constant;
using cuda::std::is_arithmetic;
using cuda::std::is_array;
using cuda::std::is_base_of;
using cuda::std::is_const;
using cuda::std::is_convertible;
using cuda::std::is_enum;
using cuda::std::is_floating_point;
using cuda::std::is_function;
using cuda::std::is_integral;
using cuda::std::is_lvalue_reference;
using cuda::std::is_pointer;
using cuda::std::is_reference;
using cuda::std::is_same;
using cuda::std::is_same_v;
using cuda::std::is_signed;
using cuda::std::is_trivially_copyable;
using cuda::std::is_unsigned;
using cuda::std::is_void;
using cuda::std::is_volatile;
using cuda::std::make_signed;
using cuda::std::make_unsigned;
using cuda::std::remove_const;
using cuda::std::remove_cv;
using cuda::std::remove_pointer;
using cuda::std::remove_reference;
using cuda::std::remove_reference_t;
using cuda::std::result_of;
using cuda::std::true_type;
using cuda::std::underlying_type;

// <limits>
using cuda::std::numeric_limits;

// <utility>
using cuda::std::declval;
using cuda::std::forward;
using cuda::std::index_sequence;
using cuda::std::integer_sequence;
using cuda::std::make_index_sequence;
using cuda::std::make_integer_sequence;
using cuda::std::make_pair;
using cuda::std::move;
using cuda::std::pair;
using cuda::std::swap;

// <tuple> (std::tuple_size / tuple_element are declared by libcu++ itself, for structured bindings)
using cuda::std::get;
using cuda::std::make_tuple;
using cuda::std::tie;
using cuda::std::tuple;
}  // namespace std

#else

#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>

#endif
