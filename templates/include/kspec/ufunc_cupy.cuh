// kspec device header, part of kspec/ufunc.cuh (which includes it inside its own setup; not for direct
// inclusion): the ufuncs CuPy has and NumPy has no ufunc for (cupyx.rsqrt, cupy.sinc, cupy.i0, the ufunc
// behind cupy.around), with the values of NumPy's functions of those names: 1 / numpy.sqrt(x), numpy.sinc,
// numpy.i0, numpy.round. kspec/fuse/_ufunc_cupy.py picks the loops (CuPy's) and emits the calls.
#pragma once

namespace kspec {
namespace uf {

// 1 / sqrt(x), rounded twice like NumPy's 1 / numpy.sqrt(x) (CuPy calls CUDA's rsqrt, within 2 ulp of it).
__device__ inline float rsqrt(float x) { return 1.0f / ::sqrtf(x); }
__device__ inline double rsqrt(double x) { return 1.0 / ::sqrt(x); }

// numpy.sinc, step by step in x's type: y = pi * x; y = where(y, y, eps); sin(y) / y. pi and eps come in
// x's type (eps is finfo(x.dtype).eps for a real type, 1e-20 for a complex one, as NumPy 2 takes them).
// Qualified calls: for complex, unqualified ones would also find kspec_cx's by argument-dependent lookup.
template <class F> __device__ inline F sinc(F x, F pi, F eps) {
    F y = ::kspec::uf::multiply(pi, x);
    if (!::kspec::uf::nonzero(y)) y = eps;
    return ::kspec::uf::divide(::kspec::uf::sin(y), y);
}

// numpy.i0: Cephes' Chebyshev series in double, with NumPy's coefficients and its order of operations
// (products kept out of FMA contraction). NaN and inf give NaN, as NumPy's exp(x) * c / sqrt(x) does.
__device__ inline void i0_step(double t, double c, double& b0, double& b1, double& b2) {
    b2 = b1;
    b1 = b0;
    b0 = mul_rn(t, b1) - b2 + c;
}
__device__ inline double i0(double x) {
    x = ::fabs(x);
    double b0, b1 = 0.0, b2 = 0.0;
    if (x <= 8.0) {
        const double t = x / 2.0 - 2.0;
        b0 = -4.4153416464793395e-18;
        i0_step(t, 3.3307945188222384e-17, b0, b1, b2); i0_step(t, -2.431279846547955e-16, b0, b1, b2);
        i0_step(t, 1.715391285555133e-15, b0, b1, b2); i0_step(t, -1.1685332877993451e-14, b0, b1, b2);
        i0_step(t, 7.676185498604936e-14, b0, b1, b2); i0_step(t, -4.856446783111929e-13, b0, b1, b2);
        i0_step(t, 2.95505266312964e-12, b0, b1, b2); i0_step(t, -1.726826291441556e-11, b0, b1, b2);
        i0_step(t, 9.675809035373237e-11, b0, b1, b2); i0_step(t, -5.189795601635263e-10, b0, b1, b2);
        i0_step(t, 2.6598237246823866e-09, b0, b1, b2); i0_step(t, -1.300025009986248e-08, b0, b1, b2);
        i0_step(t, 6.046995022541919e-08, b0, b1, b2); i0_step(t, -2.670793853940612e-07, b0, b1, b2);
        i0_step(t, 1.1173875391201037e-06, b0, b1, b2); i0_step(t, -4.4167383584587505e-06, b0, b1, b2);
        i0_step(t, 1.6448448070728896e-05, b0, b1, b2); i0_step(t, -5.754195010082104e-05, b0, b1, b2);
        i0_step(t, 0.00018850288509584165, b0, b1, b2); i0_step(t, -0.0005763755745385824, b0, b1, b2);
        i0_step(t, 0.0016394756169413357, b0, b1, b2); i0_step(t, -0.004324309995050576, b0, b1, b2);
        i0_step(t, 0.010546460394594998, b0, b1, b2); i0_step(t, -0.02373741480589947, b0, b1, b2);
        i0_step(t, 0.04930528423967071, b0, b1, b2); i0_step(t, -0.09490109704804764, b0, b1, b2);
        i0_step(t, 0.17162090152220877, b0, b1, b2); i0_step(t, -0.3046826723431984, b0, b1, b2);
        i0_step(t, 0.6767952744094761, b0, b1, b2);
        return mul_rn(::exp(x), 0.5 * (b0 - b2));
    }
    const double t = 32.0 / x - 2.0;
    b0 = -7.233180487874754e-18;
    i0_step(t, -4.830504485944182e-18, b0, b1, b2); i0_step(t, 4.46562142029676e-17, b0, b1, b2);
    i0_step(t, 3.461222867697461e-17, b0, b1, b2); i0_step(t, -2.8276239805165836e-16, b0, b1, b2);
    i0_step(t, -3.425485619677219e-16, b0, b1, b2); i0_step(t, 1.7725601330565263e-15, b0, b1, b2);
    i0_step(t, 3.8116806693526224e-15, b0, b1, b2); i0_step(t, -9.554846698828307e-15, b0, b1, b2);
    i0_step(t, -4.150569347287222e-14, b0, b1, b2); i0_step(t, 1.54008621752141e-14, b0, b1, b2);
    i0_step(t, 3.8527783827421426e-13, b0, b1, b2); i0_step(t, 7.180124451383666e-13, b0, b1, b2);
    i0_step(t, -1.7941785315068062e-12, b0, b1, b2); i0_step(t, -1.3215811840447713e-11, b0, b1, b2);
    i0_step(t, -3.1499165279632416e-11, b0, b1, b2); i0_step(t, 1.1889147107846439e-11, b0, b1, b2);
    i0_step(t, 4.94060238822497e-10, b0, b1, b2); i0_step(t, 3.3962320257083865e-09, b0, b1, b2);
    i0_step(t, 2.266668990498178e-08, b0, b1, b2); i0_step(t, 2.0489185894690638e-07, b0, b1, b2);
    i0_step(t, 2.8913705208347567e-06, b0, b1, b2); i0_step(t, 6.889758346916825e-05, b0, b1, b2);
    i0_step(t, 0.0033691164782556943, b0, b1, b2); i0_step(t, 0.8044904110141088, b0, b1, b2);
    return mul_rn(::exp(x), 0.5 * (b0 - b2)) / ::sqrt(x);
}

// numpy.round(x, d) (PyArray_Round): d == 0 is rint; otherwise f = 10**|d| in x's type and, each step
// rounded in x's type, rint(x * f) / f for d > 0 or rint(x / f) * f for d < 0. Integers: unchanged for
// d >= 0, else computed in double and converted back (wrapping, as NumPy's astype).
__device__ inline double power_of_ten(long long n) {  // NumPy's power_of_ten: exact through 1e22
    double r = 1.0;
    for (long long k = 0; k < n && k < 400; ++k) r *= 10.0;
    return r;
}
template <class F> __device__ inline F round_scaled(F x, F f, bool up) {
    return up ? ::kspec::uf::divide(::kspec::uf::rint(::kspec::uf::multiply(x, f)), f)
              : ::kspec::uf::multiply(::kspec::uf::rint(::kspec::uf::divide(x, f)), f);
}
__device__ inline float round_decimals(float x, long long d) {
    return d == 0 ? ::kspec::uf::rint(x) : round_scaled(x, (float)power_of_ten(d < 0 ? -d : d), d > 0);
}
__device__ inline double round_decimals(double x, long long d) {
    return d == 0 ? ::kspec::uf::rint(x) : round_scaled(x, power_of_ten(d < 0 ? -d : d), d > 0);
}
#if defined(KSPEC_NEED_FP16)
__device__ inline __half round_decimals(__half x, long long d) {
    return d == 0 ? ::kspec::uf::rint(x) : round_scaled(x, __double2half(power_of_ten(d < 0 ? -d : d)), d > 0);
}
#endif
template <class T> __device__ inline KSPEC_UF_I(T) round_decimals(T x, long long d) {
    return d >= 0 ? x : float_to_int<T>(round_decimals((double)x, d));
}

}  // namespace uf
}  // namespace kspec
