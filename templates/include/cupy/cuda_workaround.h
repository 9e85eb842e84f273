// CuPy's <cupy/cuda_workaround.h> for kspec: NVRTC has no C++ standard library, so code written against
// std:: (std::is_same, std::numeric_limits, std::enable_if, std::tuple...) gets kspec's own implementation
// of those names (kspec/std_lite.cuh), not CCCL's: including libcu++ here cost about 1.5 s of NVRTC time in
// every kernel that includes this header (all of cupyx.scipy.ndimage's filters do). It covers the names
// CuPy's header covers (type traits, numeric_limits, declval / pair / integer sequences, tuple) and a few
// more that such code uses (the _t / _v aliases, forward, move, swap). Specializing a trait through these
// names works (`template <> struct std::is_floating_point<float16> : std::true_type {};`). CCCL's headers
// may still be included too, before or after this one; std::tuple is then kspec's, cuda::std::tuple CCCL's.
//
// With a host compiler (kspec's CPU device) std:: is the real standard library, so this header only
// includes it.
#pragma once

#if defined(__CUDACC_RTC__)

#include <kspec/std_lite.cuh>

#else

#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>

#endif
