// kspec's complex functions (included by kspec/complex.cuh, which defines the type). Values and branch cuts are
// NumPy's (C99's cexp, clog, csqrt, casin... as glibc computes them), including C99 Annex G's special values
// where they are cheap to get: signed zeros, infinite and NaN parts. The formulas are the usual well-conditioned
// ones: Kahan's ("Branch cuts for complex elementary functions", 1987) for asin / acos / acosh through
// sqrt(1 - z) and sqrt(1 + z), asinh / asin / atan through their partners, atanh through log1p and atan2, a
// scaled sqrt, log and exp, and the tanh formula that stays finite for large real parts. Large and tiny
// arguments of the inverse functions take their asymptotic forms (log(2z) + ..., z) before anything overflows.
#pragma once

namespace kspec_cx {

// Constants and thresholds per precision. exp_big: exp(x) overflows above about this, exp(x / 2) squared
// does not; tanh_big: tanh(x) rounds to 1; inv_big / inv_small: the inverse functions' asymptotic forms are
// exact to the precision beyond / below this |part|; atanh_big: its formula's squares overflow beyond;
// tiny / up / up_root: parts below tiny are scaled by up (a power of 4) before a hypot, so that no precision
// is lost in subnormals, and square roots scaled back by up_root.
template <class T> struct limits;
template <> struct limits<float> {
    __host__ __device__ static constexpr float max() { return 3.40282347e+38f; }
    __host__ __device__ static constexpr float ln2() { return 0.693147180559945309f; }
    __host__ __device__ static constexpr float pi_2() { return 1.57079632679489662f; }
    __host__ __device__ static constexpr float log10e() { return 0.434294481903251828f; }
    __host__ __device__ static constexpr float exp_big() { return 88.0f; }
    __host__ __device__ static constexpr float tanh_big() { return 9.0f; }
    __host__ __device__ static constexpr float inv_big() { return 1e4f; }
    __host__ __device__ static constexpr float inv_small() { return 1e-4f; }
    __host__ __device__ static constexpr float atanh_big() { return 1e18f; }
    __host__ __device__ static constexpr float tiny() { return 1e-30f; }
    __host__ __device__ static constexpr float up() { return 281474976710656.0f; }  // 2^48
    __host__ __device__ static constexpr float up_root() { return 16777216.0f; }
};
template <> struct limits<double> {
    __host__ __device__ static constexpr double max() { return 1.7976931348623157e+308; }
    __host__ __device__ static constexpr double ln2() { return 0.693147180559945309; }
    __host__ __device__ static constexpr double pi_2() { return 1.57079632679489662; }
    __host__ __device__ static constexpr double log10e() { return 0.434294481903251828; }
    __host__ __device__ static constexpr double exp_big() { return 709.0; }
    __host__ __device__ static constexpr double tanh_big() { return 22.0; }
    __host__ __device__ static constexpr double inv_big() { return 1e8; }
    __host__ __device__ static constexpr double inv_small() { return 1e-8; }
    __host__ __device__ static constexpr double atanh_big() { return 1e150; }
    __host__ __device__ static constexpr double tiny() { return 1e-292; }
    __host__ __device__ static constexpr double up() { return 324518553658426726783156020576256.0; }  // 2^108
    __host__ __device__ static constexpr double up_root() { return 18014398509481984.0; }
};

template <class T> __host__ __device__ inline bool rm::isinf(T x) { return rm::fabs(x) > limits<T>::max(); }
template <class T> __host__ __device__ inline bool rm::isfinite(T x) { return rm::fabs(x) <= limits<T>::max(); }

template <class T> __host__ __device__ inline T real(const complex<T>& z) { return z.real(); }
template <class T> __host__ __device__ inline T imag(const complex<T>& z) { return z.imag(); }
template <class T> __host__ __device__ inline T abs(const complex<T>& z) {
    const T x = rm::fabs(z.real()), y = rm::fabs(z.imag());
    // CUDA's double hypot gives inf for a part near the largest finite value beside a much smaller one
    // (hypot(DBL_MAX, 2.2e-308), measured on an H100, halved parts too): there, m * sqrt(1 + (n/m)^2)
    const T m = x > y ? x : y, n = x > y ? y : x;
    if (m > limits<T>::max() * T(0.5) && m <= limits<T>::max() && n == n) {
        const T r = n / m;
        return m * rm::sqrt(T(1) + r * r);
    }
    return rm::hypot(x, y);
}
template <class T> __host__ __device__ inline T arg(const complex<T>& z) { return rm::atan2(z.imag(), z.real()); }
template <class T> __host__ __device__ inline complex<T> conj(const complex<T>& z) {
    return complex<T>(z.real(), -z.imag());
}
template <class T> __host__ __device__ inline T norm(const complex<T>& z) {
    const T x = z.real(), y = z.imag();
    if (rm::isinf(x)) return rm::fabs(x);  // inf even when the other part is NaN
    if (rm::isinf(y)) return rm::fabs(y);
    return x * x + y * y;
}
// The Riemann sphere: every infinity is (+inf, +-0).
template <class T> __host__ __device__ inline complex<T> proj(const complex<T>& z) {
    const T x = z.real(), y = z.imag();
    if (rm::isinf(x) || rm::isinf(y)) return complex<T>(rm::isinf(x) ? rm::fabs(x) : rm::fabs(y), rm::copysign(T(0), y));
    return z;
}
template <class T> __host__ __device__ inline complex<T> polar(const T& rho, const T& theta = T()) {
    if (theta == T(0)) return complex<T>(rho, theta);  // no inf * 0 for an infinite rho
    return complex<T>(rho * rm::cos(theta), rho * rm::sin(theta));
}

template <class T> __host__ __device__ inline complex<T> exp(const complex<T>& z) {
    const T x = z.real(), y = z.imag();
    if (y == T(0)) return complex<T>(rm::exp(x), y);  // exact on the real axis, exp(NaN + 0i) = NaN + 0i
    if (rm::isinf(x)) {
        if (x > 0) return rm::isfinite(y) ? complex<T>(x * rm::cos(y), x * rm::sin(y)) : complex<T>(x, y - y);
        return rm::isfinite(y) ? complex<T>(T(0) * rm::cos(y), T(0) * rm::sin(y)) : complex<T>(T(0), T(0));
    }
    if (x > limits<T>::exp_big()) {  // exp(x) overflows where exp(x) * cos(y) may not
        const T e = rm::exp(x * T(0.5));
        return complex<T>(e * rm::cos(y) * e, e * rm::sin(y) * e);
    }
    const T e = rm::exp(x);
    return complex<T>(e * rm::cos(y), e * rm::sin(y));
}

namespace detail {
// log |z|, without overflow for huge parts or lost digits for subnormal ones, and through log1p near |z| = 1.
template <class T> __host__ __device__ inline T log_abs(T x, T y) {
    x = rm::fabs(x);
    y = rm::fabs(y);
    const T big = x > y ? x : y, small = x > y ? y : x;
    if (big > limits<T>::max() * T(0.5)) return rm::log(rm::hypot(x * T(0.5), y * T(0.5))) + limits<T>::ln2();
    if (big < limits<T>::tiny()) {
        const T up = limits<T>::up();
        return rm::log(rm::hypot(x * up, y * up)) - rm::log(up);
    }
    const T h = rm::hypot(x, y);
    if (h > T(0.75) && h < T(1.4)) return T(0.5) * rm::log1p((big - T(1)) * (big + T(1)) + small * small);
    return rm::log(h);
}
}  // namespace detail

template <class T> __host__ __device__ inline complex<T> log(const complex<T>& z) {
    return complex<T>(detail::log_abs(z.real(), z.imag()), rm::atan2(z.imag(), z.real()));
}
template <class T> __host__ __device__ inline complex<T> log10(const complex<T>& z) {
    const complex<T> l = log(z);
    return complex<T>(l.real() * limits<T>::log10e(), l.imag() * limits<T>::log10e());
}

// sqrt((|x| + |z|) / 2) on parts scaled away from overflow and subnormals; the other part divided by it.
template <class T> __host__ __device__ inline complex<T> sqrt(const complex<T>& z) {
    T x = z.real(), y = z.imag();
    if (x == T(0) && y == T(0)) return complex<T>(T(0), y);
    if (rm::isinf(y)) return complex<T>(rm::fabs(y), y);
    if (rm::isnan(x)) return complex<T>(x, x);
    if (rm::isinf(x)) {
        if (x > 0) return complex<T>(x, rm::isnan(y) ? y : rm::copysign(T(0), y));
        return complex<T>(rm::isnan(y) ? y : T(0), rm::copysign(-x, y));
    }
    if (rm::isnan(y)) return complex<T>(y, y);
    const T ax = rm::fabs(x), ay = rm::fabs(y), big = ax > ay ? ax : ay;
    T back = T(1);
    if (big > limits<T>::max() * T(0.25)) {
        x *= T(0.25);
        y *= T(0.25);
        back = T(2);
    } else if (big < limits<T>::tiny()) {
        x *= limits<T>::up();
        y *= limits<T>::up();
        back = T(1) / limits<T>::up_root();
    }
    const T t = rm::sqrt((rm::fabs(x) + rm::hypot(x, y)) * T(0.5));
    if (x >= 0) return complex<T>(t * back, y / (2 * t) * back);
    return complex<T>(rm::fabs(y) / (2 * t) * back, rm::copysign(t, y) * back);
}

// pow = exp(y log x), as C99 cpow and cuda::std; a real exponent scales the logarithm part by part.
template <class T, class U>
__host__ __device__ inline detail::both_result<T, U> pow(const complex<T>& x, const complex<U>& y) {
    typedef typename detail::promote<T, U>::type R;
    return exp(complex<R>(y) * log(complex<R>(x)));
}
template <class T, class U>
__host__ __device__ inline detail::scalar_result<T, U> pow(const complex<T>& x, const U& y) {
    typedef typename detail::promote<T, U>::type R;
    const complex<R> l = log(complex<R>(x));
    return exp(complex<R>(l.real() * R(y), l.imag() * R(y)));
}
template <class T, class U>
__host__ __device__ inline detail::scalar_result<U, T> pow(const T& x, const complex<U>& y) {
    typedef typename detail::promote<T, U>::type R;
    return exp(complex<R>(y) * log(complex<R>(R(x))));
}

// sinh(x + iy) = sinh x cos y + i cosh x sin y; beyond exp_big, exp(|x| / 2) twice instead of a sinh that
// overflows first.
template <class T> __host__ __device__ inline complex<T> sinh(const complex<T>& z) {
    const T x = z.real(), y = z.imag();
    if (y == T(0)) return complex<T>(rm::sinh(x), y);
    if (!rm::isfinite(y)) {  // C99 leaves the sign of an infinite real part open: +inf, as glibc
        if (rm::isinf(x)) return complex<T>(rm::fabs(x), y - y);
        return complex<T>(x == T(0) ? x : y - y, y - y);
    }
    const T ax = rm::fabs(x);
    if (ax > limits<T>::exp_big()) {
        const T h = T(0.5) * rm::exp(ax * T(0.5));
        return complex<T>(rm::copysign(T(1), x) * h * rm::cos(y) * h * T(2), h * rm::sin(y) * h * T(2));
    }
    return complex<T>(rm::sinh(x) * rm::cos(y), rm::cosh(x) * rm::sin(y));
}
template <class T> __host__ __device__ inline complex<T> cosh(const complex<T>& z) {
    const T x = z.real(), y = z.imag();
    if (y == T(0)) return complex<T>(rm::cosh(x), rm::copysign(T(1), x) * y);
    if (!rm::isfinite(y)) {
        if (x == T(0)) return complex<T>(y - y, T(0));
        return rm::isinf(x) ? complex<T>(x * x, x * (y - y)) : complex<T>(y - y, y - y);
    }
    const T ax = rm::fabs(x);
    if (ax > limits<T>::exp_big()) {
        const T h = T(0.5) * rm::exp(ax * T(0.5));
        return complex<T>(h * rm::cos(y) * h * T(2), rm::copysign(T(1), x) * h * rm::sin(y) * h * T(2));
    }
    return complex<T>(rm::cosh(x) * rm::cos(y), rm::sinh(x) * rm::sin(y));
}
// With t = tan y, s = sinh x: tanh z = (s sqrt(1 + s^2) (1 + t^2) + i t) / (1 + (1 + t^2) s^2), no cancellation;
// beyond tanh_big the real part is +-1 and the imaginary part 4 sin y cos y exp(-2|x|).
template <class T> __host__ __device__ inline complex<T> tanh(const complex<T>& z) {
    const T x = z.real(), y = z.imag();
    if (rm::isnan(x)) return complex<T>(x, y == T(0) ? y : x);
    if (y == T(0)) return complex<T>(rm::tanh(x), y);
    if (!rm::isfinite(y)) {
        if (rm::isinf(x)) return complex<T>(rm::copysign(T(1), x), rm::copysign(T(0), y));
        return complex<T>(x == T(0) ? x : y - y, y - y);
    }
    const T ax = rm::fabs(x);
    if (ax >= limits<T>::tanh_big())
        return complex<T>(rm::copysign(T(1), x), T(4) * rm::sin(y) * rm::cos(y) * rm::exp(T(-2) * ax));
    const T t = rm::tan(y), beta = T(1) + t * t, s = rm::sinh(x), rho = rm::sqrt(T(1) + s * s);
    const T d = T(1) + beta * s * s;
    return complex<T>(beta * rho * s / d, t / d);
}
// sin z = -i sinh(iz), cos z = cosh(iz), tan z = -i tanh(iz): swaps and negations keep the signed zeros.
template <class T> __host__ __device__ inline complex<T> sin(const complex<T>& z) {
    if (rm::isnan(z.real()) && rm::isinf(z.imag())) return complex<T>(z.real(), rm::fabs(z.imag()));  // glibc's sign
    const complex<T> w = sinh(complex<T>(-z.imag(), z.real()));
    return complex<T>(w.imag(), -w.real());
}
template <class T> __host__ __device__ inline complex<T> cos(const complex<T>& z) {
    return cosh(complex<T>(-z.imag(), z.real()));
}
template <class T> __host__ __device__ inline complex<T> tan(const complex<T>& z) {
    const complex<T> w = tanh(complex<T>(-z.imag(), z.real()));
    return complex<T>(w.imag(), -w.real());
}

namespace detail {
// log(z) + ln 2: asinh and acosh for |z| beyond inv_big (and infinite parts), where log(2z) is exact.
template <class T> __host__ __device__ inline complex<T> log_2z(const complex<T>& z) {
    const complex<T> l = log(z);
    return complex<T>(l.real() + limits<T>::ln2(), l.imag());
}
template <class T> __host__ __device__ inline T big_part(const complex<T>& z) {
    const T ax = rm::fabs(z.real()), ay = rm::fabs(z.imag());
    return ax > ay ? ax : ay;
}
// Kahan: asin z = atan(x / Re(sqrt(1 - z) sqrt(1 + z))) + i asinh(Im(conj(sqrt(1 - z)) sqrt(1 + z))).
template <class T> __host__ __device__ inline complex<T> asin_kahan(T x, T y) {
    const complex<T> a = sqrt(complex<T>(T(1) - x, -y)), b = sqrt(complex<T>(T(1) + x, y));
    return complex<T>(rm::atan2(x, a.real() * b.real() - a.imag() * b.imag()),
                      rm::asinh(a.real() * b.imag() - a.imag() * b.real()));
}
}  // namespace detail

template <class T> __host__ __device__ inline complex<T> asinh(const complex<T>& z) {
    const T x = z.real(), y = z.imag();
    const T big = detail::big_part(z);  // a NaN part reaches the log path only beside a big finite one: NaN + iNaN
    if (rm::isinf(x) || rm::isinf(y) || big > limits<T>::inv_big()) {
        if (!rm::signbit(x)) return detail::log_2z(z);
        const complex<T> w = detail::log_2z(complex<T>(-x, -y));  // asinh is odd
        return complex<T>(-w.real(), -w.imag());
    }
    if (rm::isnan(x) || rm::isnan(y)) return complex<T>(x + y, y == T(0) ? y : x + y);
    if (big < limits<T>::inv_small()) return z;
    const complex<T> w = detail::asin_kahan(y, -x);  // asinh z = i asin(-iz)
    return complex<T>(-w.imag(), w.real());
}
template <class T> __host__ __device__ inline complex<T> asin(const complex<T>& z) {
    const complex<T> w = asinh(complex<T>(-z.imag(), z.real()));  // asin z = -i asinh(iz)
    return complex<T>(w.imag(), -w.real());
}
// Kahan: acos z = 2 atan(Re sqrt(1 - z) / Re sqrt(1 + z)) + i asinh(Im(conj(sqrt(1 + z)) sqrt(1 - z))).
template <class T> __host__ __device__ inline complex<T> acos(const complex<T>& z) {
    const T x = z.real(), y = z.imag();
    if (rm::isinf(x) || rm::isinf(y) || detail::big_part(z) > limits<T>::inv_big()) {  // -i log(2z)
        const T re = rm::atan2(rm::fabs(y), x), im = detail::log_abs(x, y) + limits<T>::ln2();
        return complex<T>(re, rm::signbit(y) ? im : -im);
    }
    if (rm::isnan(x) || rm::isnan(y)) return complex<T>(x == T(0) ? limits<T>::pi_2() : x + y, x + y);
    const complex<T> a = sqrt(complex<T>(T(1) - x, -y)), b = sqrt(complex<T>(T(1) + x, y));
    return complex<T>(T(2) * rm::atan2(a.real(), b.real()), rm::asinh(b.real() * a.imag() - b.imag() * a.real()));
}
// Kahan: acosh z = asinh(Re(conj(sqrt(z - 1)) sqrt(z + 1))) + 2i atan(Im sqrt(z - 1) / Re sqrt(z + 1)).
template <class T> __host__ __device__ inline complex<T> acosh(const complex<T>& z) {
    const T x = z.real(), y = z.imag();
    if (rm::isinf(x) || rm::isinf(y) || detail::big_part(z) > limits<T>::inv_big()) return detail::log_2z(z);
    if (rm::isnan(x) || rm::isnan(y)) return complex<T>(x + y, x == T(0) ? limits<T>::pi_2() : x + y);
    const complex<T> a = sqrt(complex<T>(x - T(1), y)), b = sqrt(complex<T>(x + T(1), y));
    return complex<T>(rm::asinh(a.real() * b.real() + a.imag() * b.imag()), T(2) * rm::atan2(a.imag(), b.real()));
}
// atanh z = 1/4 log1p(4x / ((1 - x)^2 + y^2)) + i/2 atan2(2y, (1 - x)(1 + x) - y^2), on |x| (atanh is odd);
// beyond atanh_big, 1/z + i pi/2 sign(y).
template <class T> __host__ __device__ inline complex<T> atanh(const complex<T>& z) {
    const T x = z.real(), y = z.imag(), ax = rm::fabs(x), ay = rm::fabs(y), pi_2 = limits<T>::pi_2();
    if (rm::isinf(y)) return complex<T>(rm::copysign(T(0), x), rm::copysign(pi_2, y));
    if (rm::isinf(x)) return complex<T>(rm::copysign(T(0), x), rm::isnan(y) ? y : rm::copysign(pi_2, y));
    if (rm::isnan(x) || rm::isnan(y)) return complex<T>(x == T(0) ? x : x + y, x + y);
    const T big = ax > ay ? ax : ay;
    if (big > limits<T>::atanh_big()) {
        const T h = rm::hypot(ax, ay);
        return complex<T>(rm::copysign(ax / h / h, x), rm::copysign(pi_2, y) - y / h / h);
    }
    if (big < limits<T>::inv_small()) return z;
    // log1p where 4|x| / d is small; where it is not, log|1 + z| - log|1 - z| (no d to underflow beside z = +-1)
    const T one_m = T(1) - ax, d = one_m * one_m + ay * ay;
    const T re = T(4) * ax < d ? T(0.25) * rm::log1p(T(4) * ax / d)
                               : T(0.5) * (detail::log_abs(T(1) + ax, ay) - detail::log_abs(one_m, ay));
    return complex<T>(rm::copysign(re, x), T(0.5) * rm::atan2(T(2) * y, one_m * (T(1) + ax) - ay * ay));
}
template <class T> __host__ __device__ inline complex<T> atan(const complex<T>& z) {
    const complex<T> w = atanh(complex<T>(-z.imag(), z.real()));  // atan z = -i atanh(iz)
    return complex<T>(w.imag(), -w.real());
}

}  // namespace kspec_cx
