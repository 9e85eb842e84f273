// kspec's CPU device: the part of CUDA's device math API that C++ lacks, for the host compiler. The C
// library's functions (sinf, fminf, erfcf, exp10, sincos...) come from <math.h>, whose C++ form also puts
// the float/double overloads of std (sin(float), abs(float), isnan...) in the global namespace, as CUDA code
// calls them. What CUDA adds is here, in the global namespace, with float and double overloads as CUDA has:
//   kspec_host/math_bits.h       bit casts and integer intrinsics (__popc, __clz, __byte_perm, __mulhi...)
//   kspec_host/math_rounding.h   conversions and arithmetic with a rounding mode (__float2int_rn, __fadd_rz...)
//   kspec_host/math_functions.h  rsqrt, sinpi, normcdfinv, erfinv, erfcx, __expf..., min/max
//   kspec_host/vector_types.h    float2, int4, ... and make_*
#pragma once

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include <kspec_host/types_bits.h>
#include <kspec_host/vector_types.h>
#include <kspec_host/math_bits.h>
#include <kspec_host/math_rounding.h>
#include <kspec_host/math_functions.h>
