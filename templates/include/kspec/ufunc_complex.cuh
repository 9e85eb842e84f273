// kspec device header, part of kspec/ufunc.cuh (which includes it inside its own setup; not for direct
// inclusion): NumPy's ufuncs on complex numbers.
#pragma once

namespace kspec {
namespace uf {

// ------------------------------------------------------------------------------------------------ complex
// NumPy's own formulas where they differ from C99's (multiply, divide, reciprocal, square, power, sign,
// expm1, log1p, log2, log10, ordering); kspec/complex_math.cuh's for the rest (qualified: an unqualified
// exp(z) here would see both kspec::uf::exp and, by argument-dependent lookup, kspec_cx::exp).
#if defined(KSPEC_NEED_COMPLEX)
template <class T> __device__ inline bool nonzero(complex<T> z) { return z.real() != 0 || z.imag() != 0; }
template <class T> __device__ inline complex<T> add(complex<T> a, complex<T> b) { return a + b; }
template <class T> __device__ inline complex<T> subtract(complex<T> a, complex<T> b) { return a - b; }
template <class T> __device__ inline complex<T> negative(complex<T> a) { return complex<T>(-a.real(), -a.imag()); }
template <class T> __device__ inline complex<T> conjugate(complex<T> a) { return complex<T>(a.real(), -a.imag()); }
template <class T> __device__ inline complex<T> multiply(complex<T> a, complex<T> b) {
    return kspec_cx::detail::mul(a.real(), a.imag(), b.real(), b.imag());
}
template <class T> __device__ inline complex<T> square(complex<T> a) { return multiply(a, a); }
// Smith's algorithm, as NumPy (kspec/complex.cuh's division); a zero divisor gives inf/NaN parts.
template <class T> __device__ inline complex<T> divide(complex<T> a, complex<T> b) {
    return kspec_cx::detail::div(a.real(), a.imag(), b.real(), b.imag());
}
template <class T> __device__ inline complex<T> reciprocal(complex<T> a) {
    const T r = a.real(), i = a.imag();
    if (::fabs(i) <= ::fabs(r)) {
        const T q = i / r, d = r + i * q;
        return complex<T>(T(1) / d, -q / d);
    }
    const T q = r / i, d = r * q + i;
    return complex<T>(q / d, T(-1) / d);
}
// kspec/complex.cuh's abs: CUDA's hypot overflows beside the largest doubles
template <class T> __device__ inline T absolute(complex<T> a) { return kspec_cx::abs(a); }
template <class T> __device__ inline complex<T> sign(complex<T> a) {
    const T r = a.real(), i = a.imag(), m = kspec_cx::abs(a), nan = nan_of(r);
    if (::isnan(m)) return complex<T>(nan, nan);
    if (::isinf(m)) {
        if (::isinf(r)) return ::isinf(i) ? complex<T>(nan, nan) : complex<T>(r > 0 ? T(1) : T(-1), T(0));
        return complex<T>(T(0), i > 0 ? T(1) : T(-1));
    }
    if (m == 0) return complex<T>(T(0), T(0));
    return complex<T>(r / m, i / m);
}
// NumPy's nc_pow: exact special cases for b == 0, a == 0 and small integer exponents (by squaring).
template <class T> __device__ inline complex<T> power(complex<T> a, complex<T> b) {
    const T ar = a.real(), ai = a.imag(), br = b.real(), bi = b.imag();
    if (br == 0 && bi == 0) return complex<T>(T(1), T(0));
    if (ar == 0 && ai == 0) {
        if (br > 0) return complex<T>(T(0), T(0));  // NumPy 2: any exponent with a positive real part
        return complex<T>(nan_of(ar), nan_of(ar));
    }
    if (bi == 0 && br == (T)(long long)br && br > -100 && br < 100) {
        long long n = (long long)br;
        if (n == 1) return a;
        if (n == 2) return multiply(a, a);
        if (n == 3) return multiply(multiply(a, a), a);
        if (n < 0) n = -n;
        complex<T> acc(T(1), T(0)), p = a;
        for (long long mask = 1;; mask <<= 1) {
            if (n & mask) acc = multiply(acc, p);
            if (n < (mask << 1)) break;
            p = multiply(p, p);
        }
        return br < 0 ? divide(complex<T>(T(1), T(0)), acc) : acc;
    }
    return kspec_cx::pow(a, b);
}
template <class T> __device__ inline complex<T> float_power(complex<T> a, complex<T> b) { return power(a, b); }
template <class T> __device__ inline complex<T> exp(complex<T> z) { return kspec_cx::exp(z); }
template <class T> __device__ inline complex<T> log(complex<T> z) { return kspec_cx::log(z); }
template <class T> __device__ inline complex<T> sqrt(complex<T> z) { return kspec_cx::sqrt(z); }
template <class T> __device__ inline complex<T> sin(complex<T> z) { return kspec_cx::sin(z); }
template <class T> __device__ inline complex<T> cos(complex<T> z) { return kspec_cx::cos(z); }
template <class T> __device__ inline complex<T> tan(complex<T> z) { return kspec_cx::tan(z); }
template <class T> __device__ inline complex<T> arcsin(complex<T> z) { return kspec_cx::asin(z); }
template <class T> __device__ inline complex<T> arccos(complex<T> z) { return kspec_cx::acos(z); }
template <class T> __device__ inline complex<T> arctan(complex<T> z) { return kspec_cx::atan(z); }
template <class T> __device__ inline complex<T> sinh(complex<T> z) { return kspec_cx::sinh(z); }
template <class T> __device__ inline complex<T> cosh(complex<T> z) { return kspec_cx::cosh(z); }
template <class T> __device__ inline complex<T> tanh(complex<T> z) { return kspec_cx::tanh(z); }
template <class T> __device__ inline complex<T> arcsinh(complex<T> z) { return kspec_cx::asinh(z); }
template <class T> __device__ inline complex<T> arccosh(complex<T> z) { return kspec_cx::acosh(z); }
template <class T> __device__ inline complex<T> arctanh(complex<T> z) { return kspec_cx::atanh(z); }
template <class T> __device__ inline complex<T> exp2(complex<T> z) {
    const T ln2 = T(0.693147180559945309417232121458176568);
    return kspec_cx::exp(complex<T>(z.real() * ln2, z.imag() * ln2));
}
template <class T> __device__ inline complex<T> expm1(complex<T> z) {
    const T h = sin(z.imag() / T(2));
    return complex<T>(expm1(z.real()) * cos(z.imag()) - T(2) * h * h, exp(z.real()) * sin(z.imag()));
}
template <class T> __device__ inline complex<T> log1p(complex<T> z) {
    const T re = z.real() + T(1);
    return complex<T>(log(hypot(re, z.imag())), arctan2(z.imag(), re));
}
template <class T> __device__ inline complex<T> log2(complex<T> z) {
    const complex<T> l = kspec_cx::log(z);
    const T k = T(1.442695040888963407359924681001892137);
    return complex<T>(l.real() * k, l.imag() * k);
}
template <class T> __device__ inline complex<T> log10(complex<T> z) {
    const complex<T> l = kspec_cx::log(z);
    const T k = T(0.434294481903251827651128918916605082);
    return complex<T>(l.real() * k, l.imag() * k);
}
template <class T> __device__ inline complex<T> rint(complex<T> z) { return complex<T>(rint(z.real()), rint(z.imag())); }
template <class T> __device__ inline bool isnan(complex<T> z) { return ::isnan(z.real()) || ::isnan(z.imag()); }
template <class T> __device__ inline bool isinf(complex<T> z) { return ::isinf(z.real()) || ::isinf(z.imag()); }
template <class T> __device__ inline bool isfinite(complex<T> z) { return ::isfinite(z.real()) && ::isfinite(z.imag()); }
// NumPy orders complex numbers lexicographically (its CLT/CLE/CGT/CGE macros): the real parts decide when
// they differ strictly and no imaginary part is NaN, the imaginary parts when the real parts are equal.
#define KSPEC_UF_C_CMP(NAME, STRICT, OP)                                                                  \
    template <class T> __device__ inline bool NAME(complex<T> a, complex<T> b) {                          \
        return (a.real() STRICT b.real() && !::isnan(a.imag()) && !::isnan(b.imag())) ||                  \
               (a.real() == b.real() && a.imag() OP b.imag());                                            \
    }
KSPEC_UF_C_CMP(less, <, <)
KSPEC_UF_C_CMP(less_equal, <, <=)
KSPEC_UF_C_CMP(greater, >, >)
KSPEC_UF_C_CMP(greater_equal, >, >=)
#undef KSPEC_UF_C_CMP
template <class T> __device__ inline bool equal(complex<T> a, complex<T> b) { return a.real() == b.real() && a.imag() == b.imag(); }
template <class T> __device__ inline bool not_equal(complex<T> a, complex<T> b) { return !equal(a, b); }
template <class T> __device__ inline complex<T> maximum(complex<T> a, complex<T> b) { return (isnan(a) || greater_equal(a, b)) ? a : b; }
template <class T> __device__ inline complex<T> minimum(complex<T> a, complex<T> b) { return (isnan(a) || less_equal(a, b)) ? a : b; }
template <class T> __device__ inline complex<T> fmax(complex<T> a, complex<T> b) { return (isnan(b) || greater_equal(a, b)) ? a : b; }
template <class T> __device__ inline complex<T> fmin(complex<T> a, complex<T> b) { return (isnan(b) || less_equal(a, b)) ? a : b; }
#endif

}  // namespace uf
}  // namespace kspec
