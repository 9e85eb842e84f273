// Compatibility: CuPy raw sources `#include <cupy/complex.cuh>` and use `complex<float>` /
// `complex<double>`. kspec serves them cuda::std::complex through its own header (see kspec/complex.cuh for
// what is and is not the same as CuPy's thrust-based complex).
#pragma once

#include <kspec/complex.cuh>
