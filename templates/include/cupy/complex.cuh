// CuPy's <cupy/complex.cuh> for kspec: `complex<float>` / `complex<double>` (kspec's own, self-contained like
// CuPy's thrust-derived one: kspec/complex.cuh says how it compares), plus what CuPy's
// header adds on top of the type and real code relies on (cupyx.scipy's k-d tree sorts complex points):
//  * NumPy's ordering of complex numbers: a + bi < c + di when a < c, or a == c and b < d (operators <, <=,
//    >, >= between two complex numbers and between a complex number and a real one of its value type);
//  * min / max (NaN-propagating: a NaN argument loses to the other, as CuPy's), isnan / isinf / isfinite,
//    log1p / log2 / expm1, rint (per part).
// Kernels of the CuPy-style constructors include it whenever complex is needed, as CuPy prepends it.
#pragma once

#include <kspec/complex.cuh>

namespace kspec_cupy_complex {
template <class T>
__host__ __device__ inline bool less(const complex<T>& a, const complex<T>& b) {
    return a.real() < b.real() || (a.real() == b.real() && a.imag() < b.imag());
}
}  // namespace kspec_cupy_complex

template <class T>
__host__ __device__ inline bool operator<(const complex<T>& a, const complex<T>& b) {
    return kspec_cupy_complex::less(a, b);
}
template <class T>
__host__ __device__ inline bool operator>(const complex<T>& a, const complex<T>& b) {
    return kspec_cupy_complex::less(b, a);
}
template <class T>
__host__ __device__ inline bool operator<=(const complex<T>& a, const complex<T>& b) {
    return !kspec_cupy_complex::less(b, a) && a == a && b == b;  // NaN compares false, as NumPy's
}
template <class T>
__host__ __device__ inline bool operator>=(const complex<T>& a, const complex<T>& b) {
    return !kspec_cupy_complex::less(a, b) && a == a && b == b;
}

// Mixed with a real of the value type: the real is the complex number with a zero imaginary part.
template <class T>
__host__ __device__ inline bool operator<(const T& a, const complex<T>& b) { return complex<T>(a) < b; }
template <class T>
__host__ __device__ inline bool operator<(const complex<T>& a, const T& b) { return a < complex<T>(b); }
template <class T>
__host__ __device__ inline bool operator>(const T& a, const complex<T>& b) { return complex<T>(a) > b; }
template <class T>
__host__ __device__ inline bool operator>(const complex<T>& a, const T& b) { return a > complex<T>(b); }
template <class T>
__host__ __device__ inline bool operator<=(const T& a, const complex<T>& b) { return complex<T>(a) <= b; }
template <class T>
__host__ __device__ inline bool operator<=(const complex<T>& a, const T& b) { return a <= complex<T>(b); }
template <class T>
__host__ __device__ inline bool operator>=(const T& a, const complex<T>& b) { return complex<T>(a) >= b; }
template <class T>
__host__ __device__ inline bool operator>=(const complex<T>& a, const T& b) { return a >= complex<T>(b); }

template <class T>
__host__ __device__ inline bool isnan(const complex<T>& x) { return isnan(x.real()) || isnan(x.imag()); }
template <class T>
__host__ __device__ inline bool isinf(const complex<T>& x) { return isinf(x.real()) || isinf(x.imag()); }
template <class T>
__host__ __device__ inline bool isfinite(const complex<T>& x) { return isfinite(x.real()) && isfinite(x.imag()); }

// The smaller / larger in NumPy's ordering; a NaN argument gives the other one.
template <class T>
__host__ __device__ inline complex<T> min(const complex<T>& x, const complex<T>& y) {
    if (isnan(x)) return y;
    if (isnan(y)) return x;
    return kspec_cupy_complex::less(y, x) ? y : x;
}
template <class T>
__host__ __device__ inline complex<T> max(const complex<T>& x, const complex<T>& y) {
    if (isnan(x)) return y;
    if (isnan(y)) return x;
    return kspec_cupy_complex::less(x, y) ? y : x;
}

template <class T>
__host__ __device__ inline complex<T> log1p(const complex<T>& x) { return log(x + T(1)); }
template <class T>
__host__ __device__ inline complex<T> log2(const complex<T>& x) { return log(x) / log(T(2)); }
template <class T>
__host__ __device__ inline complex<T> expm1(const complex<T>& x) { return exp(x) - T(1); }
template <class T>
__host__ __device__ inline complex<T> rint(const complex<T>& x) { return complex<T>(rint(x.real()), rint(x.imag())); }
