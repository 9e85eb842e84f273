"""CuPy's indexer inside ElementwiseKernel bodies (``_ind.get()``, ``_ind.set()``, ``_raw_<operand>``, a ptrdiff_t
``_ind.size()`` and ``i``): the text analysis, the module a body that uses it renders (CUDA and host), NVRTC
compiles for sm_90 (no GPU), the loop dims CuPy's kernel would see and the plans. Results on both devices are in
tests/kernels_tests/test_indexer_kernels.py.
"""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

import kspec
from kspec.compiler import CompileOptions, compile_source
from kspec.kernels.planning._binding import bind
from kspec.kernels.planning._plan import plan_elementwise
from kspec.kernels.planning._indexed_loop import c_contiguous, cupy_loop_dims
from kspec.render import VariantKey, render, render_host, specialize
from kspec.render._analysis import indexer_use, reduction_indexer_names
from kspec.render._variants import DYNAMIC_NDIM, elementwise_variants, indexed_variants
from kspec.runtime._devicearray import DeviceArray
from kspec.spec import ElementwiseSpec, ReductionSpec
from helpers.render_cases import GENERIC

# An ndimage-style 2-d correlation with a 3 x 3 window, written as cupyx.scipy.ndimage's kernel generator writes it:
# sizes from the raw input's shape() and the output's _raw_y.shape(), byte strides from x.strides(), coordinates
# from i; the window's cells outside the input count as 0 ("constant" mode).
CORRELATE_2D = """
const int xsize_0 = x.shape()[0], ysize_0 = _raw_y.shape()[0], xstride_0 = x.strides()[0];
const int xsize_1 = x.shape()[1], ysize_1 = _raw_y.shape()[1], xstride_1 = x.strides()[1];
int _c = i;
int ind_1 = _c % ysize_1 - 1; _c /= ysize_1;
int ind_0 = _c - 1;
const unsigned char* data = (const unsigned char*)&x[0];
W sum = (W)0;
int iws = 0;
for (int iw_0 = 0; iw_0 < 3; iw_0++) {
  int ix_0 = ind_0 + iw_0;
  for (int iw_1 = 0; iw_1 < 3; iw_1++) {
    int ix_1 = ind_1 + iw_1;
    W wval = w[iws];
    if (ix_0 >= 0 && ix_0 < xsize_0 && ix_1 >= 0 && ix_1 < xsize_1)
      sum += wval * (W)(*(X*)&data[ix_0 * xstride_0 + ix_1 * xstride_1]);
    iws++;
  }
}
y = (Y)sum;
"""

CORRELATE = ElementwiseSpec(name="correlate_2d", in_params="raw X x, raw W w", out_params="Y y",
                            operation=CORRELATE_2D, reduce_dims=False)  # fmt: skip
GATHER = ElementwiseSpec(name="gather_nd", in_params="T a, raw T x", out_params="T y",
                         operation="y = a + x[_ind.get()] + _ind.get()[0]", reduce_dims=False)  # fmt: skip
NEIGHBOUR = ElementwiseSpec(name="neighbour", in_params="T a, T b, T s", out_params="T y",
                            operation="y = _raw_a[(i + 1) % _raw_a.size()] * s + (T)(int)_raw_b.strides()[0]")  # fmt: skip
SIZED = ElementwiseSpec(name="sized", in_params="T x", out_params="T y",
                        operation="y = x + min(i + 1, _ind.size() - 1)")  # fmt: skip


def _compile(module, name_expressions=None, extra=()):
    names = module.name_expressions if name_expressions is None else name_expressions
    return compile_source(module.source, name=module.name, options=CompileOptions(arch="sm_90", extra=tuple(extra)),
                          name_expressions=names, needs=module.needs)  # fmt: skip


# -- the text analysis -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "texts, expected",
    [
        (["y = x[_ind.get()]"], (True, (), False, True, True)),
        (["_ind . set( j ); y = x[_ind.get()]"], (True, (), False, True, True)),
        (["y = _raw_a[0] + _raw_b.shape()[1]"], (True, ("a", "b"), False, True, False)),  # views only: no index read
        (["y = _raw_r[0]", "", "int _raw_c = 1; y = _raw_cc"], (False, (), False, False, False)),  # raw/unknown names: the code's own
        (["y = x * _ind.size()"], (False, (), True, False, False)),
        (["y = x[i] * 2"], (False, (), False, True, False)),  # names i: C order
        (["y = x; // _raw_a would also do"], (True, ("a",), False, True, False)),  # a comment counts: "yes" is only slower
        (["y = x"], (False, (), False, False, False)),
        (["", "const ptrdiff_t n = _ind.size();", "ptrdiff_t z = _ind.get()[0];"], (True, (), True, True, True)),
        (["y = _raw_a[i] + _ind.ndim"], (True, ("a",), False, True, True)),  # the rank: CuPy's index
    ],
)
def test_indexer_use(texts, expected):
    *use, reads_index = expected
    assert tuple(indexer_use(texts, ["a", "b", "y"])) == (*use, False, reads_index)


def test_a_preamble_macro_reading_the_index_counts_as_reading_it():
    use = indexer_use(["y = _raw_a[0] + AT0"], ["a", "y"], "#define AT0 (_ind.get()[0])")
    assert use.indexed and use.reads_index


def test_indexer_use_sees_state_per_thread_in_loop_prep_and_after_loop():
    assert indexer_use(["y = x"], ["y"], "", ["int calls = 0", ""]).thread_state
    assert indexer_use(["y = x"], ["y"], "", ["", "atomicAdd(p, 1)"]).thread_state
    assert not indexer_use(["y = x"], ["y"], "", ["", "  "]).thread_state
    assert indexer_use(["y = x"], ["y"], "", ["ptrdiff_t k = _ind.get()[0]"]) == (True, (), False, True, True, True)


def test_indexer_use_keeps_the_operands_order():
    assert indexer_use(["_raw_y = 0; _raw_b; _raw_a"], ["a", "b", "y"]).views == ("a", "b", "y")


def test_reduction_indexer_names():
    texts = ["_raw_x[_in_ind.size() / 2] > x", "a + b", "y = a + _out_ind.get()[0] + _in_ind . get ()[0]"]
    assert reduction_indexer_names(texts, ["x", "y"]) == ["_raw_x", "_out_ind.get", "_in_ind.get"]
    assert reduction_indexer_names(["x * _in_ind.size() + _raw_zz[0]", "a + b", "y = a / _out_ind.size()"], ["x"]) == []


# -- specializations and what they render ---------------------------------------------------------------------


def test_an_indexed_body_gets_the_indexed_variants_only():
    s = specialize(GATHER, {"T": "float32"})
    assert s.indexed and s.indexer.views == () and not s.tiled
    assert s.variants == indexed_variants()
    assert all(v.entry == "strided" for v in s.variants)
    assert {v.ndim for v in s.variants if v.index == "int32"} == {1, 2, 3, DYNAMIC_NDIM}
    assert {v.ndim for v in s.variants if v.index == "int64"} == {1, 2, 3, DYNAMIC_NDIM}
    plain = specialize(GENERIC, {"T": "float32"})
    assert not plain.indexed and plain.variants == elementwise_variants(plain.vec, plain.tiled)


def test_a_scalar_has_no_view_and_the_preamble_does_not_count():
    spec = ElementwiseSpec(name="v", in_params="T a, T b", out_params="T y", operation="y = _raw_a[i] + _raw_b[i]",
                           preamble="#define NOT_USED(q) _raw_q[_ind.get()]")  # fmt: skip
    assert specialize(spec, {"T": "float32"}).indexer.views == ("a", "b")
    assert specialize(spec, {"T": "float32"}, scalars=["b"]).indexer.views == ("a",)
    plain = ElementwiseSpec(name="p", in_params="T a", out_params="T y", operation="y = a",
                            preamble="#define NOT_USED(q) _raw_q[_ind.get()]")  # fmt: skip
    assert not specialize(plain, {"T": "float32"}).indexed


def test_the_indexed_module_declares_ind_the_views_and_a_ptrdiff_i():
    module = render(specialize(CORRELATE, {"X": "float32", "W": "float32", "Y": "float64"}))
    source = module.source
    assert "__contig" not in source and "__tiled" not in source
    assert "#include <kspec/loop_index.cuh>" in source  # only these modules include it
    assert "kspec::LoopIndex<NDIM, IndexT> _ind(_shape);" in source
    assert "const kspec::RawView<Y> _raw_y = kspec::loop_view(_p_y, _shape);" in source
    assert "_raw_x" not in re.sub(r"//[^\n]*", "", source)  # raw parameters are views already: x itself
    assert "ptrdiff_t i = _i;" in source
    # views only: the module holds the dense entry too, which addresses every operand by the flat index; the
    # planner decides on the launch's strides (nothing is tested in the kernel, no barrier)
    assert "_kspec_dense" not in source and "__syncthreads" not in source
    strided = source[source.index("void correlate_2d__strided("):source.index("void correlate_2d__dense(")]
    dense = source[source.index("void correlate_2d__dense("):]
    assert "Y& y = *kspec::at(_p_y.ptr, _ind.offset(_p_y.stride));" in strided
    assert strided.index("    _ind.set(_i);") < strided.index("ptrdiff_t i = _i;")
    assert "Y& y = *kspec::at(_p_y.ptr, _i * static_cast<IndexT>(sizeof(Y)));" in dense and "_ind.set" not in dense
    assert "kspec::LoopIndex<NDIM, IndexT> _ind(_shape);" in dense  # `_ind.size()` still reads it
    assert set(module.variants) == set(indexed_variants(dense=True))
    assert {v.entry for v in module.variants} == {"strided", "dense"}


def test_a_body_that_reads_the_index_unravels_every_element():
    spec = ElementwiseSpec(name="g", in_params="raw T x", out_params="T y", operation="y = x[_ind.get()] + _raw_y.size()",
                           reduce_dims=False)  # fmt: skip
    s = specialize(spec, {"T": "float32"})
    source = render(s).source
    assert "__dense" not in source and s.variants == indexed_variants()
    assert "    _ind.set(_i);" in source and "T& y = *kspec::at(_p_y.ptr, _ind.offset(_p_y.stride));" in source


def test_views_only_for_the_operands_the_body_names():
    source = render(specialize(NEIGHBOUR, {"T": "float32"})).source
    assert "_raw_a = kspec::loop_view(_p_a, _shape)" in source and "_raw_b = kspec::loop_view(_p_b, _shape)" in source
    assert "_raw_y =" not in source and "_raw_s" not in source
    scalar = render(specialize(NEIGHBOUR, {"T": "float32"}, scalars=["s"])).source
    assert "const T s" in scalar and "_p_s" not in scalar


def test_the_host_form_has_the_same_entry_and_names():
    s = specialize(CORRELATE, {"X": "float32", "W": "float32", "Y": "float32"})
    host = render_host(s)
    assert host.name_expressions == render(s).name_expressions
    assert "kspec_host::loop_kernel correlate_2d__strided(const kspec::Shape<NDIM, IndexT> _shape" in host.source
    assert "kspec_host::loop_kernel correlate_2d__dense(const kspec::Shape<NDIM, IndexT> _shape" in host.source
    assert "kspec::LoopIndex<NDIM, IndexT> _ind(_shape);" in host.source
    assert "const kspec::RawView<Y> _raw_y = kspec::loop_view(_p_y, _shape);" in host.source
    assert "ptrdiff_t i = _i;" in host.source


def test_a_body_that_uses_none_of_it_renders_as_before():
    """No LoopIndex, no view, i of the entry's index type, every fast path: what elementwise.cu.j2 always gave."""
    source = render(specialize(GENERIC, {"T": "float32"})).source
    assert "LoopIndex" not in source and "loop_index.cuh" not in source and "ptrdiff_t i" not in source
    # vector and scalar contig; inner-vector, unrolled and plain strided; tiled
    assert source.count("IndexT i = ") == 6
    assert "__contig" in source and "__tiled" in source


def test_a_body_that_uses_ind_size_keeps_its_entries_with_a_ptrdiff_i():
    s = specialize(SIZED, {"T": "float32"})
    assert not s.indexed and s.indexer.sized and s.variants == elementwise_variants(s.vec, s.tiled)
    for module in (render(s), render_host(s)):
        assert "IndexT i = " not in module.source
        assert "ptrdiff_t i = _i;" in module.source
    assert "ptrdiff_t i = _v * VEC + _k;" in render(s).source  # the vector loop of the contig entry


def test_reductions_refuse_what_they_do_not_provide():
    spec = ReductionSpec(name="lt", in_params="X x", out_params="Y y", map_expr="_raw_x[_in_ind.size() / 2] > x",
                         reduce_expr="a + b", post_map_expr="y = a", identity="0", reduce_type="int32")  # fmt: skip
    with pytest.raises(kspec.KspecNotImplementedError, match=r"kernel 'lt': _raw_x of CuPy's reduction indexer"):
        specialize(spec, {"X": "float32", "Y": "float32"})
    sized = ReductionSpec(name="rms", in_params="X x", out_params="Y y", map_expr="x * x", reduce_expr="a + b",
                          post_map_expr="y = a / _in_ind.size() + 0 * _out_ind.size()", identity="0")  # fmt: skip
    assert render(specialize(sized, {"X": "float32", "Y": "float32"})).source


# -- NVRTC, sm_90 ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, types, scalars",
    [
        (CORRELATE, {"X": "float32", "W": "float64", "Y": "float64"}, ()),
        (CORRELATE, {"X": "uint8", "W": "float32", "Y": "int16"}, ()),
        (GATHER, {"T": "float64"}, ()),
        (GATHER, {"T": "complex64"}, ()),
        (NEIGHBOUR, {"T": "float32"}, ("s",)),
        (NEIGHBOUR, {"T": "float16"}, ()),
    ],
    ids=["correlate-f32", "correlate-u8", "gather-f64", "gather-c64", "neighbour-scalar", "neighbour-f16"],
)
def test_indexed_modules_compile_every_variant(spec, types, scalars):
    module = render(specialize(spec, types, scalars=scalars))
    program = _compile(module)
    assert set(program.lowered_names) == set(module.name_expressions) == set(module.variants.values())
    assert "warning" not in program.log.lower(), program.log


def test_indexed_static_ranks_keep_the_index_in_registers_and_compile_under_cxx11():
    module = render(specialize(CORRELATE, {"X": "float32", "W": "float32", "Y": "float32"}))
    static = [module.variants[VariantKey("strided", "int32", n, 1)] for n in (2, 3)]
    log = _compile(module, static, extra=("--ptxas-options=-v", "-std=c++11")).log
    assert log.count("0 bytes stack frame") == 2, log


def test_every_body_form_compiles_with_a_non_const_input_and_set():
    spec = ElementwiseSpec(
        name="mixed", in_params="T a, _non_const T b, raw T r, int32 k", out_params="T y, U z",
        loop_prep="ptrdiff_t seen = 0;",
        operation="""
        if (a < T(0)) continue;
        _ind.set(i);                       // CuPy's set(): the index of another element
        const ptrdiff_t* idx = _ind.get();
        b = b + (T)k;
        _raw_y[_ind.get()] = a + r[i % r.size()] + (T)idx[0];
        z = (U)_raw_b.size() + (U)_raw_z.strides()[0];
        ++seen;""",
        after_loop="if (seen < 0) seen = 0;",
    )  # fmt: skip
    for types in ({"T": "float32", "U": "float64"}, {"T": "int64", "U": "bfloat16"}):
        module = render(specialize(spec, types, scalars=["k"]))
        assert "T& b = *kspec::at(" in module.source and "const T& b" not in module.source
        program = _compile(module)
        assert "warning" not in program.log.lower(), program.log


def test_ind_size_and_i_mix_with_ptrdiff_t_as_in_cupy():
    """`_ind.size()` and `i` are ptrdiff_t (CuPy's types), so min/max over them and other ptrdiff_t values resolve
    to one overload in every entry: with long long or int (kspec's index types) they were ambiguous."""
    body = "ptrdiff_t n = x.size(); y = (T)(max(_ind.size(), n) + min(i, _ind.size() - 1) + (_ind.size() != n))"
    for extra in ("", " + (T)_ind.get()[0]"):
        spec = ElementwiseSpec(name="mix", in_params="raw T x", out_params="T y", operation=body + extra)
        module = render(specialize(spec, {"T": "float32"}))
        program = _compile(module)
        assert set(program.lowered_names) == set(module.name_expressions)
    loop_prep = ElementwiseSpec(name="prep", in_params="T x", out_params="T y", operation="y = x * delta",
                                loop_prep="const double delta = 2.0 / max(_ind.size() - 1, (ptrdiff_t)1)")  # fmt: skip
    assert _compile(render(specialize(loop_prep, {"T": "float64"}))).lowered_names
    reduction = ReductionSpec(name="mean_of", in_params="T x", out_params="T y", map_expr="x", reduce_expr="a + b",
                              post_map_expr="y = a / max(_in_ind.size() / max(_out_ind.size(), (ptrdiff_t)1), (ptrdiff_t)1)",
                              identity="0")  # fmt: skip
    assert _compile(render(specialize(reduction, {"T": "float32"}))).lowered_names


def test_compile_through_the_cupy_style_api_without_a_gpu():
    k = kspec.ElementwiseKernel("raw X x, raw W w", "Y y", CORRELATE_2D, "correlate_api", reduce_dims=False)
    log = io.StringIO()
    k.compile(np.empty((5, 6), np.float32), np.empty((3, 3), np.float64), np.empty((5, 6), np.float64),
              arch="sm_90", log_stream=log)  # fmt: skip
    assert "error" not in log.getvalue().lower()
    assert "_raw_y = kspec::loop_view" in k.source(np.empty((5, 6), np.float32), np.empty((3, 3)), np.empty((5, 6)))


# -- the loop dims CuPy's kernel sees --------------------------------------------------------------------------


def test_c_contiguous_ignores_extent_1_dims():
    assert c_contiguous((2, 3), (12, 4), 4) and c_contiguous((2, 1, 3), (12, 999, 4), 4)
    assert not c_contiguous((2, 3), (0, 4), 4) and not c_contiguous((3, 2), (4, 12), 4)
    assert c_contiguous((), (), 8) and c_contiguous((1,), (0,), 8)


@pytest.mark.parametrize(
    "shape, strides, itemsizes, reduce_dims, one, expected",
    [
        # reduce_dims=False: every dim, extent-1 ones too
        ((2, 1, 3), [(12, 12, 4)], [4], False, False, ((2, 1, 3), [(12, 12, 4)])),
        # every operand C-contiguous: one dim
        ((2, 3, 4), [(96, 32, 8), (48, 16, 4)], [8, 4], True, False, ((24,), [(8,), (4,)])),
        # one operand not C-contiguous and two dims: the dims stay, extent 1 included
        ((3, 4), [(32, 8), (0, 8)], [8, 8], True, False, ((3, 4), [(32, 8), (0, 8)])),
        # strides along extent-1 dims do not make an operand strided
        ((1, 4), [(0, 8), (32, 8)], [8, 8], True, False, ((4,), [(8,), (8,)])),
        # three dims, a broadcast row of two: dims 1 and 2 merge, dim 0 stays
        ((2, 3, 4), [(96, 32, 8), (0, 32, 8)], [8, 8], True, False, ((2, 12), [(96, 8), (0, 8)])),
        # a transposed operand: no neighbours merge, so nothing changes
        ((2, 3, 4), [(4, 8, 24), (48, 16, 4)], [4, 4], True, False, ((2, 3, 4), [(4, 8, 24), (48, 16, 4)])),
        # ... but an extent-1 dim goes (then fewer dims are left)
        ((2, 1, 3), [(4, 4, 8), (12, 12, 4)], [4, 4], True, False, ((2, 3), [(4, 8), (12, 4)])),
        # extent-1 dims dropped where something merges
        ((2, 1, 3, 4), [(0, 0, 16, 4), (48, 48, 16, 4)], [4, 4], True, False, ((2, 12), [(0, 4), (48, 4)])),
        # one parameter: reduced_view(); C-contiguous -> 1 dim, else merged where it can
        ((3, 4, 5), [(160, 40, 8)], [8], True, True, ((60,), [(8,)])),
        ((3, 4, 5), [(320, 80, 8)], [8], True, True, ((12, 5), [(80, 8)])),  # padded rows: dims 0 and 1 merge
        ((3, 1, 5), [(8, 8, 24)], [8], True, True, ((3, 5), [(8, 24)])),
        ((4, 5), [(8, 32)], [8], True, True, ((4, 5), [(8, 32)])),
        # a loop of one dim, or no array operand: unchanged
        ((7,), [(16,)], [8], True, False, ((7,), [(16,)])),
        ((3, 4), [], [], True, False, ((3, 4), [])),
    ],
)
def test_cupy_loop_dims(shape, strides, itemsizes, reduce_dims, one, expected):
    assert cupy_loop_dims(shape, strides, itemsizes, reduce_dims=reduce_dims, one_parameter=one) == expected


# -- plans -----------------------------------------------------------------------------------------------------

PTR = 0x7F0000000000
H200_SMS = 132


def fake(shape, dtype="float32", strides=None):
    return DeviceArray._wrap(PTR, tuple(shape), np.dtype(dtype), 0, None, strides=strides)


def eplan(kernel, *args, **kwargs):
    bound = bind(kernel.spec, args[: kernel.nin], args[kernel.nin :] or None)
    return plan_elementwise(kernel.spec, bound, kernel._specializer, **kwargs)


def test_an_indexed_plan_keeps_cupys_dims_and_takes_the_static_rank():
    k = kspec.ElementwiseKernel("T a, raw T x", "T y", "y = a + x[_ind.get()]", "plan_gather")
    plan = eplan(k, fake((40, 50)), fake((40, 50)))  # contiguous: CuPy's loop is one dim (x is raw: not counted)
    assert plan.variant == VariantKey("strided", "int32", 1, 1) and plan.extents == (2000,)
    assert plan.strides == {"a": (4,), "y": (4,)} and plan.grid(H200_SMS) == 8  # one element per thread
    plan = eplan(k, fake((40, 50), strides=(4, 160)), fake((50, 40)))  # a transposed operand: never tiled
    assert plan.variant == VariantKey("strided", "int32", 2, 1) and plan.extents == (50, 40)
    assert plan.strides == {"a": (160, 4), "y": (4, 200)}
    plan = eplan(k, fake((2, 3, 4, 5)), fake((2,)))  # contiguous in 4-d: still one dim
    assert plan.variant == VariantKey("strided", "int32", 1, 1) and plan.extents == (120,)
    k3 = kspec.ElementwiseKernel("T a, T b", "T y", "y = _raw_a[i] + b", "plan_view", reduce_dims=False)
    plan = eplan(k3, fake((2, 3, 4, 5)), fake((5,)))
    assert plan.variant == VariantKey("strided", "int32", DYNAMIC_NDIM, 1) and plan.extents == (5, 4, 3, 2)
    assert plan.strides["b"] == (4, 0, 0, 0)


def test_an_indexed_plan_of_a_0d_loop_and_of_size():
    k = kspec.ElementwiseKernel("T a", "T y", "y = a + _ind.get()[0]", "plan_0d")
    plan = eplan(k, fake(()))
    assert plan.variant == VariantKey("strided", "int32", DYNAMIC_NDIM, 1) and plan.extents == ()
    raw = kspec.ElementwiseKernel("raw T x", "raw T y", "y[_ind.get()] = x[_ind.get()]", "plan_size")
    plan = eplan(raw, fake((9,)), fake((9,)), size=9)
    assert plan.variant == VariantKey("strided", "int32", 1, 1) and plan.extents == (9,) and plan.strides == {}


def test_a_plain_kernel_plans_as_before():
    k = kspec.ElementwiseKernel("T x, T y", "T z", "z = x + y + _ind.size()", "plan_plain")
    assert eplan(k, fake((40, 50)), fake((40, 50))).variant.entry == "contig"
    assert eplan(k, fake((400, 300), strides=(4, 1600)), fake((400, 300))).variant.entry == "tiled"
