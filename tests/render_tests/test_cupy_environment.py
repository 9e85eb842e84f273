"""Issue 52: CuPy's implicit kernel environment for kernels of the CuPy-style constructors.

CuPy prepends cupy/carray.cuh, atomics.cuh and math_constants.h (and complex.cuh) to every ElementwiseKernel
and ReductionKernel, so kernel text uses M_PI, CArray, CIndexer, cupy::type_traits, _floor_divide,
atomicAdd(long long*) and CUDART_INF without an include. kspec's constructors set the spec field
``cupy_headers`` (default off: spec files keep kspec's own environment unless they ask), and the prologue
includes the three headers; complex stays conditional on the kernel needing it. Kernels run on both devices
(``xp``) against NumPy; the rest compiles for sm_90 without a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import kspec
from kspec.render import render, render_host, specialize
from kspec.spec import ElementwiseSpec, dumps_toml, load_file, parse_spec, plain_from_fields, plain_spec

rng = np.random.default_rng(5200)


# -- the constructors' kernels see CuPy's names ------------------------------------------------------------


def test_m_pi_in_loop_prep_and_operation(xp):
    """A window kernel in the style of cupyx.scipy.signal.windows: M_PI and _ind.size() in loop_prep."""
    window = kspec.ElementwiseKernel(
        "float64 alpha", "float64 w", "w = alpha - (1.0 - alpha) * cos(step * i);", "raised_cosine",
        loop_prep="const double step = 2.0 * M_PI / (_ind.size() - 1);",
    )  # fmt: skip
    window.compile(0.54, np.zeros(51), arch="sm_90")
    out = xp.zeros(51, np.float64)
    window(0.54, out)
    np.testing.assert_allclose(xp.asnumpy(out), np.hamming(51), rtol=0, atol=1e-12)


def test_floor_divide_and_constants_in_a_reduction(xp):
    floor_sum = kspec.ReductionKernel(
        "int32 x", "int64 y", "_floor_divide(x, 3) + (isinf(CUDART_INF) ? 0 : 1000)", "a + b", "y = a", "0", "floor_sum"
    )  # fmt: skip
    x = rng.integers(-100, 100, 1000).astype(np.int32)
    floor_sum.compile(x, arch="sm_90")
    assert int(xp.asnumpy(floor_sum(xp.asarray(x)))) == int(np.floor_divide(x, 3).sum())


# A raw parameter passed where CuPy code has a CArray: constructed from it, and given to a function that
# takes `const CArray<T, 2>&` (a non-const reference cannot bind to the converted view: kernels.md).
CARRAY_PREAMBLE = r"""
template <typename T>
__device__ T last_row_first(const CArray<T, 2>& a) {
  const ptrdiff_t idx[2] = {a.shape()[0] - 1, 0};
  return a[idx];
}
"""


def test_carray_from_a_raw_parameter(xp):
    k = kspec.ElementwiseKernel(
        "raw T x", "T y", "CArray<T, 2> a(x); y = a[i] + (a.size() == x.size() ? 0 : 1000) + 0 * last_row_first<T>(a);",
        "carray_from_raw", preamble=CARRAY_PREAMBLE,
    )  # fmt: skip
    corner = kspec.ElementwiseKernel("raw T x", "T y", "y = last_row_first<T>(CArray<T, 2>(x));", "corner",
                                     preamble=CARRAY_PREAMBLE)  # fmt: skip
    host = rng.standard_normal((6, 5)).astype(np.float32)
    k.compile(host.T, np.zeros(30, np.float32), arch="sm_90")
    corner.compile(host.T, np.zeros(1, np.float32), arch="sm_90")
    x = xp.asarray(host).T  # a transposed view: the CArray honours its strides
    y = xp.zeros(30, np.float32)
    k(x, y)
    np.testing.assert_array_equal(xp.asnumpy(y), host.T.reshape(-1))
    z = xp.zeros(1, np.float32)
    corner(x, z)
    assert xp.asnumpy(z)[0] == host.T[-1, 0]


def test_cindexer_and_type_traits(xp):
    """CIndexer<3> unravels i over a shape; cupy::type_traits picks a type."""
    k = kspec.ElementwiseKernel(
        "int32 d0, int32 d1, int32 d2", "raw int64 coords",
        """
        typedef cupy::type_traits::conditional<sizeof(void*) == 8, long long, int>::type index_type;
        typedef cupy::type_traits::enable_if<cupy::type_traits::is_same<index_type, long long>::value, int>::type dim;
        const index_type shape[3] = {dim(d0), dim(d1), dim(d2)};
        CIndexer<3> ind(shape);
        ind.set(i);
        for (int d = 0; d < 3; ++d) coords[3 * i + d] = ind.get()[d];
        """,
        "unravel",
    )  # fmt: skip
    shape = (3, 4, 5)
    k.compile(np.int32(3), np.int32(4), np.int32(5), np.zeros((60, 3), np.int64), arch="sm_90")
    coords = xp.zeros((60, 3), np.int64)
    k(np.int32(3), np.int32(4), np.int32(5), coords, size=60)
    np.testing.assert_array_equal(xp.asnumpy(coords), np.stack(np.unravel_index(np.arange(60), shape), axis=1))


def test_atomic_add_on_long_long(xp):
    histogram = kspec.ElementwiseKernel("int64 v", "raw int64 counts", "atomicAdd(&counts[v], 1LL);", "histogram")
    values = rng.integers(0, 10, 5000)
    histogram.compile(values, np.zeros(10, np.int64), arch="sm_90")
    counts = xp.zeros(10, np.int64)
    histogram(xp.asarray(values), counts)
    np.testing.assert_array_equal(xp.asnumpy(counts), np.bincount(values, minlength=10))


# Union-find over the 4-neighbourhood of a grid, written as CuPy's label kernels are: the CAS word type is
# picked with cupy::type_traits (CUDA's atomicCAS takes unsigned long long*, not long long*). Under kspec
# this was "more than one instance of overloaded function atomicCAS": cupy::type_traits was undefined.
LINK = r"""
using word_t = typename cupy::type_traits::conditional<cupy::type_traits::is_same<Y, long long>::value,
                                                       unsigned long long, Y>::type;
if (y[i] < 0) continue;
for (int dir = 0; dir < 2; ++dir) {
  const Y row = i / width, col = i % width;
  const Y k = dir == 0 ? (col + 1 < width ? Y(i) + 1 : Y(-1)) : (row + 1 < height ? Y(i) + width : Y(-1));
  if (k < 0 || y[k] < 0) continue;
  Y a = i, b = k;
  while (true) {
    while (a != y[a]) a = y[a];
    while (b != y[b]) b = y[b];
    if (a == b) break;
    if (a > b) { const Y t = a; a = b; b = t; }
    const Y seen = atomicCAS((word_t*)&y[b], b, a);  // the larger root joins the smaller one
    if (seen == b) break;
  }
}
"""


def _components(mask: np.ndarray) -> np.ndarray:
    """Connected components of `mask` (4-neighbourhood) by flood fill: a label per pixel, -1 off the mask."""
    labels = np.full(mask.shape, -1)
    for start in zip(*np.nonzero(mask)):
        if labels[start] >= 0:
            continue
        stack, labels[start] = [start], np.ravel_multi_index(start, mask.shape)
        while stack:
            r, c = stack.pop()
            for nr, nc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
                if 0 <= nr < mask.shape[0] and 0 <= nc < mask.shape[1] and mask[nr, nc] and labels[nr, nc] < 0:
                    labels[nr, nc] = labels[start]
                    stack.append((nr, nc))
    return labels


@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
def test_label_style_union_find(xp, label_dtype):
    init = kspec.ElementwiseKernel("X x", "Y y", "y = (x == 0) ? Y(-1) : Y(i);", "uf_init")
    link = kspec.ElementwiseKernel("int32 width, int32 height", "raw Y y", LINK, "uf_link")
    flatten = kspec.ElementwiseKernel("", "raw Y y", "if (y[i] >= 0) { Y r = y[i]; while (r != y[r]) r = y[r]; y[i] = r; }",
                                      "uf_flatten")  # fmt: skip
    mask = rng.random((24, 31)) < 0.55
    for kernel, args in ((init, (mask.reshape(-1).astype(np.int8),)), (link, (np.int32(31), np.int32(24))), (flatten, ())):
        kernel.compile(*args, np.zeros(mask.size, label_dtype), arch="sm_90")
    y = xp.zeros(mask.size, label_dtype)
    init(xp.asarray(mask.reshape(-1).astype(np.int8)), y)
    link(np.int32(31), np.int32(24), y, size=mask.size)
    flatten(y, size=mask.size)
    got = xp.asnumpy(y).reshape(mask.shape)
    # union-find keeps each component's smallest flat index as its root: the flood fill's first pixel
    np.testing.assert_array_equal(got, _components(mask))


# -- float16 and bfloat16: CUDA's types, CuPy's classes declared beside them --------------------------------


def test_float16_kernels_see_cupys_float16_class(xp):
    """A float16 placeholder is CUDA's __half in the constructors' kernels too (kspec's own constructor kernels
    are written against it); CuPy's float16 class is declared beside it for code that names it."""
    k = kspec.ElementwiseKernel(
        "T x, T s", "T y", "float16 h = float16(float(x)); y = h.isnan() ? T(-1.0f) : T(float(h) * 2.0f + float(s) + 1.0f)",
        "half_class")  # fmt: skip
    x = np.array([0.5, -1.25, np.nan, 3.0, 16000.0, 1e-3], np.float16)
    s = np.float16(0.333)
    k.compile(x, s, arch="sm_90")
    y = xp.asnumpy(k(xp.asarray(x), s))
    want = np.where(np.isnan(x), -1, (x.astype(np.float32) * 2.0 + np.float32(s) + 1).astype(np.float16))
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y, want)
    total = kspec.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "half_sum")
    ints = rng.integers(0, 3, 100).astype(np.float16)  # every partial sum is exact in float16
    total.compile(ints, arch="sm_90")
    assert float(xp.asnumpy(total(xp.asarray(ints)))) == float(ints.astype(np.int64).sum())


def test_half_values_take_cupys_min_and_max(xp):
    """CuPy's float16 class has min / max / fmin / fmax, so CuPy code reduces float16 with ``max(a, b)``;
    kspec's float16 values are CUDA's __half, which has none (NVRTC found the call ambiguous): kspec's types
    header gives them, on float, a NaN losing as in CuPy (compiled with NVRTC, then run)."""
    x = rng.standard_normal((40, 7)).astype(np.float16)
    x[3, 2] = np.nan
    for expr, want in (("max(a, b)", np.fmax.reduce(x, axis=0)), ("min(a, b)", np.fmin.reduce(x, axis=0)),
                       ("fmax(a, b)", np.fmax.reduce(x, axis=0)), ("fmin(a, b)", np.fmin.reduce(x, axis=0))):
        k = kspec.ReductionKernel("T x", "T y", "x", expr, "y = a", None, f"half_{expr[:4].strip('(')}")
        k.compile(x, arch="sm_90")
        got = xp.asnumpy(k(xp.asarray(x), axis=0))
        assert got.dtype == np.float16
        np.testing.assert_array_equal(got, want)
    both = kspec.ElementwiseKernel("T x, T y", "T z", "z = max(x, y) - min(x, y)", "half_spread")
    y = rng.standard_normal(7).astype(np.float16)
    both.compile(x[0], y, arch="sm_90")
    np.testing.assert_array_equal(xp.asnumpy(both(xp.asarray(x[0]), xp.asarray(y))),
                                  (np.fmax(x[0], y).astype(np.float32) - np.fmin(x[0], y)).astype(np.float16))


@pytest.mark.parametrize("dtype, c_type, cupy_type", [("float16", "__half", "float16"),
                                                      ("bfloat16", "__nv_bfloat16", "bfloat16")])  # fmt: skip
def test_half_c_types_in_each_environment(dtype, c_type, cupy_type):
    table = dict(kind="reduction", name="r", in_params=f"T x, {dtype} w", out_params="T y", map_expr="x * w",
                 reduce_expr="a + b", post_map_expr="y = a", identity="0")  # fmt: skip
    own = render(specialize(parse_spec(table), {"T": dtype})).source
    assert f"typedef {c_type} T;" in own and "cupy/" not in own
    cupy = render(specialize(parse_spec({**table, "cupy_headers": True}), {"T": dtype})).source
    assert f"typedef {c_type} T;" in cupy and "typedef T _type_reduce;" in cupy
    assert f"#include <cupy/{cupy_type}.cuh>" in cupy and f"<{c_type}, RNDIM, IndexT> _p_w" in cupy


# -- the spec field ----------------------------------------------------------------------------------------

EW = dict(kind="elementwise", name="uses_pi", in_params="float64 x", out_params="float64 y", operation="y = x * M_PI")


def test_constructor_specs_carry_the_field_and_spec_files_default_off():
    k = kspec.ElementwiseKernel("float64 x", "float64 y", "y = x * M_PI", "uses_pi")
    assert k.spec.cupy_headers is True and k.spec.to_data()["cupy_headers"] is True
    r = kspec.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "r")
    assert r.spec.cupy_headers is True
    spec = parse_spec(EW)
    assert spec.cupy_headers is False
    assert "cupy_headers" not in spec.to_data()  # off: the table, so the spec key, is what it was before


def test_spec_file_asks_for_cupys_environment(tmp_path):
    body = "\n".join(f'{key} = "{value}"' for key, value in EW.items())
    path = tmp_path / "k.toml"
    path.write_text(f"schema = 1\n[[kernel]]\n{body}\ncupy_headers = true\n")
    (spec,) = load_file(path)
    assert spec.cupy_headers is True
    again = tmp_path / "again.toml"
    again.write_text(dumps_toml([spec]))
    assert load_file(again) == [spec]
    path.write_text(f"schema = 1\n[[kernel]]\n{body}\ncupy_headers = 1\n")
    with pytest.raises(kspec.SpecError, match="cupy_headers"):
        load_file(path)


def test_without_the_field_a_spec_keeps_kspecs_environment():
    plain = kspec.ElementwiseKernel.from_spec(parse_spec(EW))
    with pytest.raises(kspec.CompileError, match="M_PI"):
        plain.compile(np.zeros(4), np.zeros(4), arch="sm_90")
    kspec.ElementwiseKernel.from_spec(parse_spec({**EW, "cupy_headers": True})).compile(np.zeros(4), np.zeros(4), arch="sm_90")


def test_plain_specs_carry_the_field():
    fields = {key: value for key, value in EW.items() if key != "kind"}
    plain = plain_from_fields("elementwise", {**fields, "cupy_headers": True})
    assert plain is not None and plain.cupy_headers is True
    assert plain.to_data() == parse_spec({**EW, "cupy_headers": True}).to_data()
    served = plain_spec(plain.to_data())  # a generated module's table, served without Pydantic
    assert served is not None and served.cupy_headers is True
    assert plain_spec(parse_spec(EW).to_data()).cupy_headers is False
    assert render(specialize(served)).source == render(specialize(served.validated())).source


def test_rendered_prologue():
    spec = parse_spec({**EW, "cupy_headers": True})
    for source in (render(specialize(spec)).source, render_host(specialize(spec)).source):
        assert "#include <cupy/carray.cuh>" in source and "#include <cupy/math_constants.h>" in source
        assert "#include <cupy/atomics.cuh>" in source and "KSPEC_NEED_COMPLEX" not in source
    assert "cupy/" not in render(specialize(parse_spec(EW))).source
    with_complex = parse_spec({**EW, "cupy_headers": True, "operation": "y = abs(complex<double>(x, 1.0))"})
    assert "#define KSPEC_NEED_COMPLEX 1" in render(specialize(with_complex)).source


def test_cupy_environment_keeps_nvrtc_minimal():
    """The three headers need nothing NVRTC's -minimal leaves out; CUDART_ constants do not either."""
    for operation in ("y = x * M_PI", "y = x < 0 ? -CUDART_INF : x"):
        spec = parse_spec({**EW, "cupy_headers": True, "operation": operation})
        assert "-minimal" in specialize(spec).nvrtc_options
    assert "-minimal" not in specialize(parse_spec({**EW, "operation": "y = cudaGetLastError()"})).nvrtc_options


def test_spec_models_refuse_a_non_bool():
    with pytest.raises(kspec.SpecError, match="cupy_headers"):
        ElementwiseSpec(**{**{k: v for k, v in EW.items() if k != "kind"}, "cupy_headers": "yes"})
