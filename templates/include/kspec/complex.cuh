// kspec's complex numbers: its own self-contained complex<T>, the same type on the GPU (NVRTC) and the CPU
// device (host compiler). It includes no CCCL / libcu++ header: a kernel that included <cuda/std/complex>
// compiled in ~1.6 s with NVRTC, one that includes this header (and kspec/complex_math.cuh) in ~0.045 s, ~10 ms
// more than with no header at all.
//
// The type lives in namespace kspec_cx and is brought to global scope, so raw CuPy sources say `complex<float>`
// unqualified (CuPy's header puts thrust's complex there). Layout {T re; T im;} aligned to 2 * sizeof(T), as
// cuda::std::complex and CuPy's: complex64 / complex128 arrays are passed as pointers to it. Free functions
// (real, imag, abs, arg, norm, conj, proj, polar, exp, log, log10, pow, sqrt, the trigonometric and hyperbolic
// functions and their inverses) are found for complex arguments by argument-dependent lookup; polar takes real
// arguments, so it is also declared at global scope.
//
// Arithmetic mixes with any arithmetic scalar and any complex precision, with thrust's rule (the result is
// complex of the common type: complex<float> * 2 is complex<float>, complex<float> * 0.5 and complex<float> +
// complex<double> are complex<double>). Multiplication is the textbook formula (NumPy's); division is Smith's
// algorithm (NumPy's), which never forms |w|^2, the textbook formula's overflow for parts beyond sqrt(max).
#pragma once

#include <kspec/select.cuh>

#if !defined(__CUDACC_RTC__)
#include <math.h>  // the C functions (::expf, ::hypot...) in the global namespace; NVRTC has them built in
#endif

namespace kspec_cx {

template <class T>
struct complex;

// Real math for float and double, called qualified (rm::exp): inside kspec_cx the complex overloads of
// kspec/complex_math.cuh hide the global names, and these stay clear of any overload set.
namespace rm {
#define KSPEC_CX_RM1(NAME)                                                                       \
    __host__ __device__ inline float NAME(float x) { return ::NAME##f(x); }                    \
    __host__ __device__ inline double NAME(double x) { return ::NAME(x); }
#define KSPEC_CX_RM2(NAME)                                                                       \
    __host__ __device__ inline float NAME(float x, float y) { return ::NAME##f(x, y); }        \
    __host__ __device__ inline double NAME(double x, double y) { return ::NAME(x, y); }
KSPEC_CX_RM1(fabs)
KSPEC_CX_RM1(sqrt)
KSPEC_CX_RM1(exp)
KSPEC_CX_RM1(log)
KSPEC_CX_RM1(log1p)
KSPEC_CX_RM1(sin)
KSPEC_CX_RM1(cos)
KSPEC_CX_RM1(tan)
KSPEC_CX_RM1(sinh)
KSPEC_CX_RM1(cosh)
KSPEC_CX_RM1(tanh)
KSPEC_CX_RM1(asinh)
KSPEC_CX_RM2(atan2)
KSPEC_CX_RM2(hypot)
KSPEC_CX_RM2(copysign)
#undef KSPEC_CX_RM1
#undef KSPEC_CX_RM2
template <class T> __host__ __device__ inline bool isnan(T x) { return x != x; }
template <class T> __host__ __device__ inline bool isinf(T x);
template <class T> __host__ __device__ inline bool isfinite(T x);
template <class T> __host__ __device__ inline bool signbit(T x) { return copysign(T(1), x) < 0; }
}  // namespace rm

namespace detail {

using ::kspec::enable_if;  // kspec/select.cuh
// The arithmetic types a complex number mixes with (what std::is_arithmetic names, less long double).
template <class T>
struct is_scalar : ::kspec::is_builtin_arithmetic<T> {};

// std::common_type of two arithmetic types (the conditional operator's type).
template <class A, class B>
struct promote {
    typedef decltype(true ? A() : B()) type;
};

// complex<common type> when U is an arithmetic scalar: the result of complex<T> OP U and U OP complex<T>.
template <class T, class U>
using scalar_result = typename enable_if<is_scalar<U>::value, complex<typename promote<T, U>::type>>::type;
template <class T, class U>
using both_result = complex<typename promote<T, U>::type>;

}  // namespace detail

template <class T>
struct alignas(2 * sizeof(T)) complex {
    typedef T value_type;

    __host__ __device__ constexpr complex(const T& re = T(), const T& im = T()) : re_(re), im_(im) {}
    // Implicit from any precision, as thrust's (cuda::std makes the narrowing ones explicit).
    template <class U>
    __host__ __device__ constexpr complex(const complex<U>& z) : re_(T(z.real())), im_(T(z.imag())) {}

    __host__ __device__ constexpr T real() const { return re_; }
    __host__ __device__ constexpr T imag() const { return im_; }
    __host__ __device__ T real() const volatile { return re_; }
    __host__ __device__ T imag() const volatile { return im_; }
    __host__ __device__ void real(T re) { re_ = re; }
    __host__ __device__ void imag(T im) { im_ = im; }

    __host__ __device__ complex& operator=(const T& re) {
        re_ = re;
        im_ = T();
        return *this;
    }
    template <class U>
    __host__ __device__ complex& operator=(const complex<U>& z) {
        re_ = T(z.real());
        im_ = T(z.imag());
        return *this;
    }

    template <class U>
    __host__ __device__ complex& operator+=(const complex<U>& z) {
        re_ += T(z.real());
        im_ += T(z.imag());
        return *this;
    }
    template <class U>
    __host__ __device__ complex& operator-=(const complex<U>& z) {
        re_ -= T(z.real());
        im_ -= T(z.imag());
        return *this;
    }
    template <class U>
    __host__ __device__ complex& operator*=(const complex<U>& z);
    template <class U>
    __host__ __device__ complex& operator/=(const complex<U>& z);

    // With a scalar: part by part, so an infinite part meets no 0 * inf.
    template <class U, class = typename detail::enable_if<detail::is_scalar<U>::value>::type>
    __host__ __device__ complex& operator+=(const U& s) {
        re_ += T(s);
        return *this;
    }
    template <class U, class = typename detail::enable_if<detail::is_scalar<U>::value>::type>
    __host__ __device__ complex& operator-=(const U& s) {
        re_ -= T(s);
        return *this;
    }
    template <class U, class = typename detail::enable_if<detail::is_scalar<U>::value>::type>
    __host__ __device__ complex& operator*=(const U& s) {
        re_ *= T(s);
        im_ *= T(s);
        return *this;
    }
    template <class U, class = typename detail::enable_if<detail::is_scalar<U>::value>::type>
    __host__ __device__ complex& operator/=(const U& s) {
        re_ /= T(s);
        im_ /= T(s);
        return *this;
    }

  private:
    T re_;
    T im_;
};

namespace detail {

template <class T>
__host__ __device__ inline complex<T> mul(T ar, T ai, T br, T bi) {
    return complex<T>(ar * br - ai * bi, ar * bi + ai * br);
}

// Smith's algorithm as NumPy: scale by the larger part of the divisor; a zero divisor gives inf / NaN parts.
template <class T>
__host__ __device__ inline complex<T> div(T ar, T ai, T br, T bi) {
    const T abs_br = rm::fabs(br), abs_bi = rm::fabs(bi);
    if (abs_br >= abs_bi) {
        if (abs_br == 0 && abs_bi == 0) return complex<T>(ar / abs_br, ai / abs_br);
        const T rat = bi / br, scl = T(1) / (br + bi * rat);
        return complex<T>((ar + ai * rat) * scl, (ai - ar * rat) * scl);
    }
    const T rat = br / bi, scl = T(1) / (bi + br * rat);
    return complex<T>((ar * rat + ai) * scl, (ai * rat - ar) * scl);
}

}  // namespace detail

template <class T>
template <class U>
__host__ __device__ inline complex<T>& complex<T>::operator*=(const complex<U>& z) {
    return *this = detail::mul(re_, im_, T(z.real()), T(z.imag()));
}
template <class T>
template <class U>
__host__ __device__ inline complex<T>& complex<T>::operator/=(const complex<U>& z) {
    return *this = detail::div(re_, im_, T(z.real()), T(z.imag()));
}

template <class T>
__host__ __device__ inline complex<T> operator+(const complex<T>& z) {
    return z;
}
template <class T>
__host__ __device__ inline complex<T> operator-(const complex<T>& z) {
    return complex<T>(-z.real(), -z.imag());
}

// complex OP complex (any precisions), complex OP scalar and scalar OP complex, in the common type R.
template <class T, class U>
__host__ __device__ inline detail::both_result<T, U> operator+(const complex<T>& a, const complex<U>& b) {
    typedef typename detail::promote<T, U>::type R;
    return complex<R>(R(a.real()) + R(b.real()), R(a.imag()) + R(b.imag()));
}
template <class T, class U>
__host__ __device__ inline detail::scalar_result<T, U> operator+(const complex<T>& a, const U& b) {
    typedef typename detail::promote<T, U>::type R;
    return complex<R>(R(a.real()) + R(b), R(a.imag()));
}
template <class T, class U>
__host__ __device__ inline detail::scalar_result<T, U> operator+(const U& a, const complex<T>& b) {
    typedef typename detail::promote<T, U>::type R;
    return complex<R>(R(a) + R(b.real()), R(b.imag()));
}
template <class T, class U>
__host__ __device__ inline detail::both_result<T, U> operator-(const complex<T>& a, const complex<U>& b) {
    typedef typename detail::promote<T, U>::type R;
    return complex<R>(R(a.real()) - R(b.real()), R(a.imag()) - R(b.imag()));
}
template <class T, class U>
__host__ __device__ inline detail::scalar_result<T, U> operator-(const complex<T>& a, const U& b) {
    typedef typename detail::promote<T, U>::type R;
    return complex<R>(R(a.real()) - R(b), R(a.imag()));
}
template <class T, class U>
__host__ __device__ inline detail::scalar_result<T, U> operator-(const U& a, const complex<T>& b) {
    typedef typename detail::promote<T, U>::type R;
    return complex<R>(R(a) - R(b.real()), -R(b.imag()));
}
template <class T, class U>
__host__ __device__ inline detail::both_result<T, U> operator*(const complex<T>& a, const complex<U>& b) {
    typedef typename detail::promote<T, U>::type R;
    return detail::mul(R(a.real()), R(a.imag()), R(b.real()), R(b.imag()));
}
template <class T, class U>
__host__ __device__ inline detail::scalar_result<T, U> operator*(const complex<T>& a, const U& b) {
    typedef typename detail::promote<T, U>::type R;
    return complex<R>(R(a.real()) * R(b), R(a.imag()) * R(b));
}
template <class T, class U>
__host__ __device__ inline detail::scalar_result<T, U> operator*(const U& a, const complex<T>& b) {
    typedef typename detail::promote<T, U>::type R;
    return complex<R>(R(a) * R(b.real()), R(a) * R(b.imag()));
}
template <class T, class U>
__host__ __device__ inline detail::both_result<T, U> operator/(const complex<T>& a, const complex<U>& b) {
    typedef typename detail::promote<T, U>::type R;
    return detail::div(R(a.real()), R(a.imag()), R(b.real()), R(b.imag()));
}
template <class T, class U>
__host__ __device__ inline detail::scalar_result<T, U> operator/(const complex<T>& a, const U& b) {
    typedef typename detail::promote<T, U>::type R;
    return complex<R>(R(a.real()) / R(b), R(a.imag()) / R(b));
}
template <class T, class U>
__host__ __device__ inline detail::scalar_result<T, U> operator/(const U& a, const complex<T>& b) {
    typedef typename detail::promote<T, U>::type R;
    return detail::div(R(a), R(0), R(b.real()), R(b.imag()));
}

template <class T, class U>
__host__ __device__ inline bool operator==(const complex<T>& a, const complex<U>& b) {
    return a.real() == b.real() && a.imag() == b.imag();
}
template <class T, class U, class = typename detail::enable_if<detail::is_scalar<U>::value>::type>
__host__ __device__ inline bool operator==(const complex<T>& a, const U& b) {
    return a.real() == b && a.imag() == T(0);
}
template <class T, class U, class = typename detail::enable_if<detail::is_scalar<U>::value>::type>
__host__ __device__ inline bool operator==(const U& a, const complex<T>& b) {
    return b == a;
}
template <class T, class U>
__host__ __device__ inline bool operator!=(const complex<T>& a, const complex<U>& b) {
    return !(a == b);
}
template <class T, class U, class = typename detail::enable_if<detail::is_scalar<U>::value>::type>
__host__ __device__ inline bool operator!=(const complex<T>& a, const U& b) {
    return !(a == b);
}
template <class T, class U, class = typename detail::enable_if<detail::is_scalar<U>::value>::type>
__host__ __device__ inline bool operator!=(const U& a, const complex<T>& b) {
    return !(b == a);
}

}  // namespace kspec_cx

// The real-valued math the complex functions are built on, and the functions themselves.
#include <kspec/complex_math.cuh>

using kspec_cx::complex;
using kspec_cx::polar;

// CuPy's header spells the type thrust::complex; sources that name it so keep compiling. Define
// KSPEC_NO_THRUST_COMPLEX_ALIAS when the real <thrust/complex.h> is included as well.
#ifndef KSPEC_NO_THRUST_COMPLEX_ALIAS
namespace thrust {
using kspec_cx::complex;
using kspec_cx::abs;
using kspec_cx::acos;
using kspec_cx::acosh;
using kspec_cx::arg;
using kspec_cx::asin;
using kspec_cx::asinh;
using kspec_cx::atan;
using kspec_cx::atanh;
using kspec_cx::conj;
using kspec_cx::cos;
using kspec_cx::cosh;
using kspec_cx::exp;
using kspec_cx::imag;
using kspec_cx::log;
using kspec_cx::log10;
using kspec_cx::norm;
using kspec_cx::polar;
using kspec_cx::pow;
using kspec_cx::proj;
using kspec_cx::real;
using kspec_cx::sin;
using kspec_cx::sinh;
using kspec_cx::sqrt;
using kspec_cx::tan;
using kspec_cx::tanh;
}  // namespace thrust
#endif
