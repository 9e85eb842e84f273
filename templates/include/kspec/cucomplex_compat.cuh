// kspec device header for raw kernels built with translate_cucomplex=True (render_raw puts it first).
//
// cuComplex.h's types and functions on complex<T> come from <cupy/cuComplex_bridge.h>, the header CuPy's
// own translation switches to. This header adds cuComplex.h's include guard, so that the user's own
// `#include <cuComplex.h>` further down becomes a no-op instead of redefining every function on float2.
// Limitation (CuPy's too): cuFloatComplex is complex<float>, not float2: code that reads `.x` / `.y`
// directly does not compile; cuCrealf / cuCimagf do.
#pragma once

#define CU_COMPLEX_H_

#include <cupy/cuComplex_bridge.h>
