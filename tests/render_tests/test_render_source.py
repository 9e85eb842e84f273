"""What the rendered CUDA source says: order of the parts, how the body sees each parameter, strictness."""

from __future__ import annotations

import re

import jinja2
import pytest

import kspec
from kspec.render import RenderedModule, make_environment, render, render_raw, specialize
from kspec.render._analysis import element_body, is_write_only, needs_from_text, needs_of_raw_source
from kspec.spec import ElementwiseSpec, RawSpec, ReductionSpec
from helpers.render_cases import ARGMAX, AXPY, L2NORM, MAX_NO_IDENTITY, RAW_CUCOMPLEX, REVERSE, RUNNING, SQUARED_DIFF


def _kernel(source: str, entry: str) -> str:
    """The text of one entry point's template, up to the next one."""
    start = source.index(f"__global__ void {entry}(")
    following = source.find("__global__", start + 1)
    return source[start : following if following != -1 else len(source)]


def test_typedefs_come_before_the_preamble_and_the_kernels():
    source = render(specialize(RUNNING, {"T": "float64"})).source
    typedef = source.index("typedef double T;")
    preamble = source.index("__device__ T clip0(T v)")
    first_kernel = source.index("__global__")
    assert source.index("#include <kspec/types.cuh>") < typedef < preamble < first_kernel


def test_loop_prep_loop_and_after_loop_in_order():
    source = render(specialize(RUNNING, {"T": "float32"})).source
    for entry in ("running_clip__contig", "running_clip__strided"):
        text = _kernel(source, entry)
        prep = text.index("T acc = T(0);")
        loop = text.index("for (IndexT _i")
        body = text.index("acc += clip0(x); scratch = acc; y = acc")
        after = text.index("if (acc < T(0)) { acc = T(0); }")
        assert prep < loop < body < after


def test_inputs_are_const_references_outputs_references():
    source = render(specialize(SQUARED_DIFF)).source
    contig = _kernel(source, "squared_diff__contig")
    assert "const float& x = _p_x[_i];" in contig
    assert "const float& y = _p_y[_i];" in contig
    assert "float& z = _p_z[_i];" in contig and "const float& z" not in contig
    assert "IndexT i = _i;" in contig
    strided = _kernel(source, "squared_diff__strided")
    assert "const float& x = *kspec::at(_p_x.ptr, _o_x);" in strided


def test_non_const_lifts_the_const():
    source = render(specialize(RUNNING, {"T": "float32"})).source
    assert re.search(r"(?<!const )T& scratch = ", source)
    assert "const T& x = " in source


def test_scalars_are_by_value_parameters():
    source = render(specialize(AXPY, {"T": "float32"}, scalars=["a"])).source
    contig = _kernel(source, "axpy__contig")
    assert "const T a" in contig.split("{")[0]
    assert "T& a" not in contig and "_p_a" not in contig


def test_raw_parameters_are_views_and_the_loop_size_is_ind():
    source = render(specialize(REVERSE, {"T": "float32"})).source
    contig = _kernel(source, "reverse__contig")
    assert "const __grid_constant__ kspec::RawView<T> x" in contig
    assert "const kspec::LoopSize<IndexT> _ind{_n};" in contig
    assert "y = x[_ind.size() - i - 1];" in contig
    code = re.sub(r"//[^\n]*", "", source)
    assert re.search(r"\bn\b", code) is None  # kspec never defines `n` (CuPy code names parameters n)


def test_vector_paths_check_alignment_themselves():
    contig = _kernel(render(specialize(SQUARED_DIFF)).source, "squared_diff__contig")
    assert "if (VEC > 1 && (kspec::address(_p_x) | kspec::address(_p_y) | kspec::address(_p_z)) % 16 == 0)" in contig
    rows = _kernel(render(specialize(L2NORM, {"T": "float32"})).source, "l2norm__rows")
    assert "_p_x.red_stride[0] == static_cast<IndexT>(sizeof(T))" in rows
    assert "kspec::address(kspec::at(_p_x.ptr, _k_x))) % 16 == 0" in rows


def test_vector_path_loads_outputs_the_body_reads():
    inplace = ElementwiseSpec(name="acc", in_params="float32 x", out_params="float32 z", operation="z += x")
    text = _kernel(render(specialize(inplace)).source, "acc__contig")
    assert "kspec::Vec<float, VEC> _v_z = kspec::load_vec<VEC>(_p_z + _v * VEC);" in text
    pure = _kernel(render(specialize(SQUARED_DIFF)).source, "squared_diff__contig")
    assert "kspec::Vec<float, VEC> _v_z;" in pure


@pytest.mark.parametrize(
    ("operation", "write_only"),
    [
        ("z = x * 2", True),
        ("z = x; w = y", True),
        ("{ z = x; }", True),
        ("z += x", False),
        ("z = z * 2", False),
        ("if (x > 0) z = x;", False),
        ("if (x > 0) { z = x; }", False),
        ("y = z = x", False),
        ("f(z)", False),
        ("z == x", False),
        ("w = x", False),  # never assigned
        ("z = x; // z", True),  # comments are not code
        ("const float t0 = (x - y);  // subtract (<string>:4)\nz = t0;", True),  # kspec.fuse's bodies
        ("w = x; /* then */ z = w", True),
        ("/* z */ z = z + 1", False),
        ('printf("//"); z = z + 1;\nz = 3;', False),  # a literal: comments stay, the read of z counts
    ],
)
def test_is_write_only(operation, write_only):
    assert is_write_only(operation, "z") is write_only


def test_needs_from_text():
    assert needs_from_text(["__half h;", "complex<float> c;"]) == {"fp16", "complex"}
    assert needs_from_text(["float half = 1;"]) == set()
    assert needs_of_raw_source("#include <cuda_fp16.h>\n#include <cupy/complex.cuh>") == {"fp16", "complex"}


def test_reduction_parts():
    module = render(specialize(L2NORM, {"T": "float32"}))
    source = module.source
    assert source.index("typedef float T;") < source.index("typedef T _type_reduce;")
    assert "return (a + b);" in source
    assert "acc.value = _type_reduce(0);" in source
    assert "kspec::push(_acc, static_cast<_type_reduce>((x * x)), _op);" in source
    assert "y = sqrt(a);" in source
    assert "const IndexT _J = " in source
    assert "#include <kspec/reduce.cuh>" in source
    # the reduce type's size is Python's to know (float32): no device global for the launcher to read
    assert "__reduce_type_info" not in source
    assert 'extern "C" __device__ unsigned long long argmax_pair__reduce_type_info[2]' in render(specialize(ARGMAX)).source


def test_reduction_without_identity_uses_the_has_value_flag():
    source = render(specialize(MAX_NO_IDENTITY, {"T": "float32"})).source
    assert "kspec::Acc<_type_reduce, false>" in source and "acc.has = false;" in source


def test_opaque_reduce_type_is_typedefd_after_the_preamble():
    source = render(specialize(ARGMAX)).source
    assert source.index("struct ArgMax {") < source.index("typedef ArgMax _type_reduce;")
    assert "best = a.value; at = a.index;" in source


def test_strict_undefined_catches_a_missing_variable():
    env = make_environment(jinja2.DictLoader({"broken.cu.j2": "__global__ void {{ name }}() { {{ body }} }"}))
    with pytest.raises(jinja2.UndefinedError, match="body"):
        env.get_template("broken.cu.j2").render(name="k")


def test_render_a_spec_directly_needs_no_placeholders():
    assert isinstance(render(SQUARED_DIFF), RenderedModule)
    with pytest.raises(kspec.KspecTypeError, match="placeholder 'T'"):
        render(L2NORM)
    with pytest.raises(kspec.KspecTypeError, match="Specialization"):
        render("nope")  # type: ignore[arg-type]


def test_rendering_is_deterministic():
    a = render(specialize(AXPY, {"T": "float16"}, scalars=["a"]))
    b = render(specialize(AXPY, {"T": "float16"}, scalars=["a"]))
    assert a.source == b.source and a.key == b.key and dict(a.variants) == dict(b.variants)


def test_raw_source_passes_through():
    spec = RawSpec(
        name="mod",
        source='extern "C" __global__ void k1() {}\ntemplate <int N> __global__ void k2() {}\n',
        kernels=("k1",),
        name_expressions=("k2<3>",),
    )
    module = render_raw(spec)
    assert module.source.rstrip("\n") == spec.source.rstrip("\n")
    assert module.name_expressions == ("k1", "k2<3>")
    assert module.kind == "raw" and dict(module.variants) == {} and dict(module.abi) == {}
    assert render(spec).source == module.source


def test_raw_translate_cucomplex_puts_the_bridge_first():
    module = render_raw(RAW_CUCOMPLEX)
    assert module.source.startswith("#include <kspec/cucomplex_compat.cuh>\n")
    assert module.needs == frozenset({"complex"})


def test_raw_source_from_a_file(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text('extern "C" __global__ void from_file() {}\n')
    spec = RawSpec(name="f", path=str(path), kernels=("from_file",))
    assert "from_file" in render_raw(spec).source


def test_render_raw_rejects_other_specs():
    with pytest.raises(kspec.KspecTypeError, match="RawSpec"):
        render_raw(SQUARED_DIFF)  # type: ignore[arg-type]


def test_reduction_spec_validation_stays_upstream():
    with pytest.raises(kspec.SpecError):
        ReductionSpec(name="r", in_params="raw T x", out_params="T y", map_expr="x", reduce_expr="a", post_map_expr="y = a")


def test_a_body_that_returns_runs_in_a_lambda_of_its_own():
    assert element_body("y = x * 2") == "y = x * 2"
    assert element_body("if (x < 0) { y = 0; return; } y = x") == "[&]() {\nif (x < 0) { y = 0; return; } y = x;\n}()"
    assert element_body("y = returned(x)") == "y = returned(x)"  # a word that contains it is not one
