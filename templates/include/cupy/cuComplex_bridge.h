// translate_cucomplex=True: sources written against CUDA's <cuComplex.h> get this header instead (kspec
// rewrites the #include), so cuFloatComplex / cuDoubleComplex are complex<float> / complex<double> and the
// cuC* functions work on them. A kernel that takes `cuFloatComplex*` then reads complex64 arrays as before
// (same size and layout as float2).
#pragma once

#include <kspec/complex.cuh>

typedef complex<float> cuFloatComplex;
typedef complex<double> cuDoubleComplex;
typedef cuFloatComplex cuComplex;

__host__ __device__ inline float cuCrealf(cuFloatComplex x) { return x.real(); }
__host__ __device__ inline float cuCimagf(cuFloatComplex x) { return x.imag(); }
__host__ __device__ inline cuFloatComplex make_cuFloatComplex(float r, float i) { return cuFloatComplex(r, i); }
__host__ __device__ inline cuFloatComplex cuConjf(cuFloatComplex x) { return kspec_cx::conj(x); }
__host__ __device__ inline cuFloatComplex cuCaddf(cuFloatComplex x, cuFloatComplex y) { return x + y; }
__host__ __device__ inline cuFloatComplex cuCsubf(cuFloatComplex x, cuFloatComplex y) { return x - y; }
__host__ __device__ inline cuFloatComplex cuCmulf(cuFloatComplex x, cuFloatComplex y) { return x * y; }
__host__ __device__ inline cuFloatComplex cuCdivf(cuFloatComplex x, cuFloatComplex y) { return x / y; }
__host__ __device__ inline float cuCabsf(cuFloatComplex x) { return kspec_cx::abs(x); }
__host__ __device__ inline cuFloatComplex cuCfmaf(cuFloatComplex x, cuFloatComplex y, cuFloatComplex d) {
    return x * y + d;
}

__host__ __device__ inline double cuCreal(cuDoubleComplex x) { return x.real(); }
__host__ __device__ inline double cuCimag(cuDoubleComplex x) { return x.imag(); }
__host__ __device__ inline cuDoubleComplex make_cuDoubleComplex(double r, double i) { return cuDoubleComplex(r, i); }
__host__ __device__ inline cuDoubleComplex cuConj(cuDoubleComplex x) { return kspec_cx::conj(x); }
__host__ __device__ inline cuDoubleComplex cuCadd(cuDoubleComplex x, cuDoubleComplex y) { return x + y; }
__host__ __device__ inline cuDoubleComplex cuCsub(cuDoubleComplex x, cuDoubleComplex y) { return x - y; }
__host__ __device__ inline cuDoubleComplex cuCmul(cuDoubleComplex x, cuDoubleComplex y) { return x * y; }
__host__ __device__ inline cuDoubleComplex cuCdiv(cuDoubleComplex x, cuDoubleComplex y) { return x / y; }
__host__ __device__ inline double cuCabs(cuDoubleComplex x) { return kspec_cx::abs(x); }
__host__ __device__ inline cuDoubleComplex cuCfma(cuDoubleComplex x, cuDoubleComplex y, cuDoubleComplex d) {
    return x * y + d;
}

__host__ __device__ inline cuComplex make_cuComplex(float r, float i) { return cuComplex(r, i); }
__host__ __device__ inline cuDoubleComplex cuComplexFloatToDouble(cuFloatComplex x) { return cuDoubleComplex(x); }
__host__ __device__ inline cuFloatComplex cuComplexDoubleToFloat(cuDoubleComplex x) {
    return cuFloatComplex(static_cast<float>(x.real()), static_cast<float>(x.imag()));
}
