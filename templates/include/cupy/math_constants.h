// CuPy's <cupy/math_constants.h> for kspec: the constants of CUDA's <math_constants.h> that CuPy's kernels
// use, for code that cannot count on the CUDA toolkit's header. The values are CuPy's (its CUDART_NAN has
// the sign bit set). kspec's CuPy-style constructors include this header in every kernel, as CuPy does.
// Each macro is defined only where no other header (CUDA's <math_constants.h>) did so first.
#pragma once

#ifndef CUDART_INF_F
#define CUDART_INF_F __int_as_float(0x7f800000)
#endif
#ifndef CUDART_NAN_F
#define CUDART_NAN_F __int_as_float(0x7fffffff)
#endif
#ifndef CUDART_INF
#define CUDART_INF __longlong_as_double(0x7ff0000000000000LL)
#endif
#ifndef CUDART_NAN
#define CUDART_NAN __longlong_as_double(0xfff8000000000000ULL)
#endif
