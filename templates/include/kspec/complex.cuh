// kspec's complex numbers for device code: cuda::std::complex (CCCL), usable as a plain `complex<T>`.
//
// Raw CuPy sources say `complex<float>` unqualified (CuPy's header puts thrust's complex in the global
// namespace); here the type is cuda::std::complex brought in with a using-declaration. Free functions
// (abs, arg, norm, conj, proj, polar, exp, log, log10, pow, sqrt, sin, cos, tan, asin, acos, atan, sinh, cosh,
// tanh, asinh, acosh, atanh, real, imag) are found for complex arguments by argument-dependent lookup, so
// unqualified calls such as `abs(z)` or `exp(z)` work without declaring anything here (declaring global
// forwarding templates would make those calls ambiguous).
//
// What cuda::std lacks and CuPy's thrust-style complex has: arithmetic between a complex<T> and another
// arithmetic type or a complex<U> of a different precision (`z * 2`, `z * 0.5` with complex<float> z,
// complex<float> + complex<double>). The operators below add it with thrust's promotion rule (the result
// is complex of the common type). They only take part when the plain cuda::std overload cannot deduce.
#pragma once

#include <cuda/std/complex>
#include <cuda/std/type_traits>

using cuda::std::complex;

namespace kspec_complex_detail {

template <class A, class B>
using promoted_t = typename cuda::std::common_type<A, B>::type;

// A scalar that mixes with complex<T>: arithmetic and not T itself (that case is cuda::std's own overload).
template <class T, class U>
using mixed_scalar_t =
    typename cuda::std::enable_if<cuda::std::is_arithmetic<U>::value && !cuda::std::is_same<T, U>::value,
                                  promoted_t<T, U>>::type;

template <class T, class U>
using mixed_complex_t = typename cuda::std::enable_if<!cuda::std::is_same<T, U>::value, promoted_t<T, U>>::type;

}  // namespace kspec_complex_detail

#define KSPEC_COMPLEX_MIXED_OP(OP)                                                                        \
    template <class T, class U>                                                                           \
    __host__ __device__ inline complex<kspec_complex_detail::mixed_scalar_t<T, U>> operator OP(            \
        const complex<T>& a, const U& b) {                                                                \
        using R = kspec_complex_detail::promoted_t<T, U>;                                                 \
        return complex<R>(a) OP complex<R>(b);                                                            \
    }                                                                                                     \
    template <class T, class U>                                                                           \
    __host__ __device__ inline complex<kspec_complex_detail::mixed_scalar_t<T, U>> operator OP(            \
        const U& a, const complex<T>& b) {                                                                \
        using R = kspec_complex_detail::promoted_t<T, U>;                                                 \
        return complex<R>(a) OP complex<R>(b);                                                            \
    }                                                                                                     \
    template <class T, class U>                                                                           \
    __host__ __device__ inline complex<kspec_complex_detail::mixed_complex_t<T, U>> operator OP(           \
        const complex<T>& a, const complex<U>& b) {                                                       \
        using R = kspec_complex_detail::promoted_t<T, U>;                                                 \
        return complex<R>(a) OP complex<R>(b);                                                            \
    }

KSPEC_COMPLEX_MIXED_OP(+)
KSPEC_COMPLEX_MIXED_OP(-)
KSPEC_COMPLEX_MIXED_OP(*)
KSPEC_COMPLEX_MIXED_OP(/)

#undef KSPEC_COMPLEX_MIXED_OP

// polar takes real arguments, so argument-dependent lookup cannot find cuda::std::polar for it.
template <class T>
__host__ __device__ inline complex<T> polar(const T& rho, const T& theta = T()) {
    return cuda::std::polar(rho, theta);
}

// CuPy's header spells the type thrust::complex; sources that name it so keep compiling. Define
// KSPEC_NO_THRUST_COMPLEX_ALIAS when the real <thrust/complex.h> is included as well.
#ifndef KSPEC_NO_THRUST_COMPLEX_ALIAS
namespace thrust {
using cuda::std::complex;
using cuda::std::abs;
using cuda::std::acos;
using cuda::std::acosh;
using cuda::std::arg;
using cuda::std::asin;
using cuda::std::asinh;
using cuda::std::atan;
using cuda::std::atanh;
using cuda::std::conj;
using cuda::std::cos;
using cuda::std::cosh;
using cuda::std::exp;
using cuda::std::log;
using cuda::std::log10;
using cuda::std::norm;
using cuda::std::polar;
using cuda::std::pow;
using cuda::std::proj;
using cuda::std::sin;
using cuda::std::sinh;
using cuda::std::sqrt;
using cuda::std::tan;
using cuda::std::tanh;
}  // namespace thrust
#endif
