// kspec's CPU device: CUDA's <cuComplex.h>: cuFloatComplex is float2 and cuDoubleComplex is double2, with
// CUDA's formulas (scaled division, the overflow-safe cuCabs). Raw kernels built with translate_cucomplex
// get kspec/cucomplex_compat.cuh instead, which defines the same guard so that this header stays out.
#ifndef CU_COMPLEX_H_
#define CU_COMPLEX_H_

#include <math.h>

#include <kspec_host/vector_types.h>

typedef float2 cuFloatComplex;
typedef double2 cuDoubleComplex;
typedef cuFloatComplex cuComplex;

#define KSPEC_HOST_CUCOMPLEX(C, R, S, MAKE, SQRT, FABS, BIG)                                                \
  __host__ __device__ inline R cuCreal##S(C x) { return x.x; }                                             \
  __host__ __device__ inline R cuCimag##S(C x) { return x.y; }                                             \
  __host__ __device__ inline C MAKE(R r, R i) { C c; c.x = r; c.y = i; return c; }                          \
  __host__ __device__ inline C cuConj##S(C x) { return MAKE(x.x, -x.y); }                                  \
  __host__ __device__ inline C cuCadd##S(C x, C y) { return MAKE(x.x + y.x, x.y + y.y); }                  \
  __host__ __device__ inline C cuCsub##S(C x, C y) { return MAKE(x.x - y.x, x.y - y.y); }                  \
  __host__ __device__ inline C cuCmul##S(C x, C y) { return MAKE(x.x * y.x - x.y * y.y, x.x * y.y + x.y * y.x); } \
  __host__ __device__ inline C cuCdiv##S(C x, C y) {                                                       \
    R s = FABS(y.x) + FABS(y.y);                                                                          \
    R oos = R(1) / s;                                                                                     \
    const R ars = x.x * oos, ais = x.y * oos, brs = y.x * oos, bis = y.y * oos;                            \
    s = brs * brs + bis * bis;                                                                            \
    oos = R(1) / s;                                                                                       \
    return MAKE((ars * brs + ais * bis) * oos, (ais * brs - ars * bis) * oos);                             \
  }                                                                                                        \
  __host__ __device__ inline R cuCabs##S(C x) {                                                            \
    const R a = FABS(x.x), b = FABS(x.y);                                                                  \
    const R v = a > b ? a : b, w = a > b ? b : a;                                                          \
    R t = w / v;                                                                                          \
    t = R(1) + t * t;                                                                                     \
    t = v * SQRT(t);                                                                                      \
    if (v == R(0) || v > BIG || w > BIG) t = v + w;                                                        \
    return t;                                                                                             \
  }                                                                                                        \
  __host__ __device__ inline C cuCfma##S(C x, C y, C d) {                                                  \
    R re = (x.x * y.x) + d.x;                                                                             \
    re = -(x.y * y.y) + re;                                                                               \
    R im = (x.x * y.y) + d.y;                                                                             \
    im = (x.y * y.x) + im;                                                                                \
    return MAKE(re, im);                                                                                  \
  }
KSPEC_HOST_CUCOMPLEX(cuFloatComplex, float, f, make_cuFloatComplex, sqrtf, fabsf, 3.402823466e38f)
KSPEC_HOST_CUCOMPLEX(cuDoubleComplex, double, , make_cuDoubleComplex, sqrt, fabs, 1.79769313486231570e+308)
#undef KSPEC_HOST_CUCOMPLEX

__host__ __device__ inline cuComplex make_cuComplex(float r, float i) { return make_cuFloatComplex(r, i); }
__host__ __device__ inline cuDoubleComplex cuComplexFloatToDouble(cuFloatComplex c) {
  return make_cuDoubleComplex(static_cast<double>(c.x), static_cast<double>(c.y));
}
__host__ __device__ inline cuFloatComplex cuComplexDoubleToFloat(cuDoubleComplex c) {
  return make_cuFloatComplex(static_cast<float>(c.x), static_cast<float>(c.y));
}

#endif  // CU_COMPLEX_H_
