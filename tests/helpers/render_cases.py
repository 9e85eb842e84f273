"""Kernel specs the render tests share (each with the bindings it is rendered for)."""

from __future__ import annotations

from kspec import dtypes
from kspec.spec import ElementwiseSpec, RawSpec, ReductionSpec

SQUARED_DIFF = ElementwiseSpec(
    name="squared_diff",
    in_params="float32 x, float32 y",
    out_params="float32 z",
    operation="z = (x - y) * (x - y)",
)

GENERIC = ElementwiseSpec(
    name="squared_diff_t", in_params="T x, T y", out_params="T z", operation="z = (x - y) * (x - y)"
)

AXPY = ElementwiseSpec(name="axpy", in_params="T a, T x, T y", out_params="T z", operation="z = a * x + y")

# CuPy code names parameters `n`; kspec never defines it, so this must compile.
SCALE_N = ElementwiseSpec(name="scale_n", in_params="T x, int32 n", out_params="T y", operation="y = x * n")

REVERSE = ElementwiseSpec(
    name="reverse", in_params="raw T x", out_params="T y", operation="y = x[_ind.size() - i - 1]"
)

RUNNING = ElementwiseSpec(
    name="running_clip",
    in_params="T x, _non_const T scratch",
    out_params="T y",
    preamble="__device__ T clip0(T v) { return v < T(0) ? T(0) : v; }",
    loop_prep="T acc = T(0);",
    operation="acc += clip0(x); scratch = acc; y = acc",
    after_loop="if (acc < T(0)) { acc = T(0); }",
)

L2NORM = ReductionSpec(
    name="l2norm",
    in_params="T x",
    out_params="T y",
    map_expr="x * x",
    reduce_expr="a + b",
    post_map_expr="y = sqrt(a)",
    identity="0",
)

L2NORM_HALF = ReductionSpec(
    name="l2norm_half",
    in_params="float16 x",
    out_params="float16 y",
    map_expr="float(x) * float(x)",
    reduce_expr="a + b",
    post_map_expr="y = __float2half(sqrtf(a))",
    identity="0",
    reduce_type="float32",
)

ABS2 = ReductionSpec(
    name="abs2_sum",
    in_params="complex64 x",
    out_params="float32 y",
    map_expr="x.real() * x.real() + x.imag() * x.imag()",
    reduce_expr="a + b",
    post_map_expr="y = a",
    identity="0",
    reduce_type="float32",
)

MAX_NO_IDENTITY = ReductionSpec(
    name="max_of",
    in_params="T x",
    out_params="T y",
    map_expr="x",
    reduce_expr="a > b ? a : b",
    post_map_expr="y = a",
    identity=None,
)

ARGMAX = ReductionSpec(
    name="argmax_pair",
    in_params="float32 x",
    out_params="float32 best, int64 at",
    preamble="struct ArgMax { float value; long long index; };",
    map_expr="ArgMax{x, static_cast<long long>(_J)}",
    reduce_expr="(b.value > a.value || (b.value == a.value && b.index < a.index)) ? b : a",
    post_map_expr="best = a.value; at = a.index",
    identity=None,
    reduce_type="ArgMax",
)

RAW_CUCOMPLEX = RawSpec(
    name="cscale",
    source="""
#include <cuComplex.h>
extern "C" __global__ void cscale(cuFloatComplex* z, cuFloatComplex s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) z[i] = cuCmulf(z[i], s);
}
""",
    kernels=("cscale",),
    translate_cucomplex=True,
)

# (case id, spec, binding, scalars): every module whose every variant must compile.
COMPILE_CASES = [
    ("squared_diff", SQUARED_DIFF, {}, ()),
    *[(f"generic-{name}", GENERIC, {"T": name}, ()) for name in dtypes.NAMES],
    ("axpy-scalar", AXPY, {"T": "float32"}, ("a",)),
    ("scale-n", SCALE_N, {"T": "float32"}, ("n",)),
    ("reverse-raw", REVERSE, {"T": "float64"}, ()),
    ("running-preamble", RUNNING, {"T": "float32"}, ()),
    ("l2norm-f32", L2NORM, {"T": "float32"}, ()),
    ("l2norm-f16-in-f32", L2NORM_HALF, {}, ()),
    ("abs2-c64", ABS2, {}, ()),
    ("max-no-identity", MAX_NO_IDENTITY, {"T": "float32"}, ()),
    ("max-no-identity-i8", MAX_NO_IDENTITY, {"T": "int8"}, ()),
    ("argmax-struct", ARGMAX, {}, ()),
]
