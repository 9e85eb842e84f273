"""specialize(): placeholder binding, scalar inputs, the content key, needs, vector width, variants."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import kspec
from kspec.render import Specialization, VariantKey, specialize
from kspec.render._variants import reduction_variants
from kspec.spec import ElementwiseSpec, RawSpec, ReductionSpec
from helpers.child_env import child_env
from helpers.render_cases import ABS2, ARGMAX, AXPY, GENERIC, L2NORM, L2NORM_HALF, RAW_CUCOMPLEX, RUNNING, SQUARED_DIFF

REPO = Path(__file__).resolve().parents[2]

_KEY_SCRIPT = textwrap.dedent(
    """
    from kspec.render import specialize
    from kspec.spec import ElementwiseSpec
    spec = ElementwiseSpec(name="axpy", in_params="T a, T x, T y", out_params="T z", operation="z = a * x + y")
    print(specialize(spec, {"T": "float32"}, scalars=["a"]).key)
    """
)


def test_key_is_stable_across_processes():
    here = specialize(AXPY, {"T": "float32"}, scalars=["a"]).key
    keys = {
        subprocess.run(
            [sys.executable, "-c", _KEY_SCRIPT], capture_output=True, text=True, check=True, cwd=REPO,
            env=child_env(PYTHONHASHSEED=str(seed)),
        ).stdout.strip()
        for seed in (1, 2)
    }
    assert keys == {here}
    assert len(here) == 64 and int(here, 16) >= 0


def test_key_changes_with_binding_scalars_and_spec():
    base = specialize(AXPY, {"T": "float32"}, scalars=["a"])
    others = [
        specialize(AXPY, {"T": "float64"}, scalars=["a"]),
        specialize(AXPY, {"T": "float32"}),
        specialize(AXPY, {"T": "float32"}, scalars=["a", "y"]),
        specialize(AXPY.model_copy(update={"operation": "z = a * x - y"}), {"T": "float32"}, scalars=["a"]),
        specialize(AXPY.model_copy(update={"name": "axpy2"}), {"T": "float32"}, scalars=["a"]),
    ]
    keys = {base.key, *(o.key for o in others)}
    assert len(keys) == 1 + len(others)


def test_equal_specializations_are_equal_and_hash_alike():
    a = specialize(AXPY, {"T": "f4"}, scalars=("a",))
    b = specialize(AXPY, {"T": np.dtype(np.float32)}, scalars=["a"])
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert dict(a.types) == {"T": "float32"} and a.scalars == frozenset({"a"})


def test_unbound_placeholder_is_a_type_error_naming_it():
    spec = ElementwiseSpec(name="k", in_params="T x", out_params="U y", operation="y = x")
    with pytest.raises(kspec.KspecTypeError, match=r"placeholder 'U' \(type of y\) is not bound"):
        specialize(spec, {"T": "float32"})
    with pytest.raises(TypeError, match="'T'"):
        specialize(spec, {})


def test_unknown_placeholder_is_a_value_error_naming_it():
    with pytest.raises(kspec.KspecValueError, match=r"'U' is not a type placeholder .*'T'"):
        specialize(GENERIC, {"T": "float32", "U": "int32"})


def test_unknown_dtype_names_the_placeholder():
    with pytest.raises(kspec.KspecValueError, match=r"placeholder 'T' bound to 'float128'"):
        specialize(GENERIC, {"T": "float128"})
    with pytest.raises(ValueError, match="placeholder 'T'"):
        specialize(GENERIC, {"T": object()})


def test_scalars_must_be_inputs():
    with pytest.raises(kspec.KspecValueError, match=r"'z' is an output"):
        specialize(AXPY, {"T": "float32"}, scalars=["z"])
    with pytest.raises(kspec.KspecValueError, match=r"'w' is not a parameter"):
        specialize(AXPY, {"T": "float32"}, scalars=["w"])
    raw = ElementwiseSpec(name="k", in_params="raw T x", out_params="T y", operation="y = x")
    (x, _y) = specialize(raw, {"T": "float32"}, scalars=["x"]).operands  # CuPy passes a scalar for it by value
    assert not x.raw and x.scalar


def test_a_string_of_scalars_is_one_name():
    assert specialize(AXPY, {"T": "float32"}, scalars="a").scalars == frozenset({"a"})


def test_operands_follow_the_declaration():
    s = specialize(AXPY, {"T": "int16"}, scalars=["a"])
    assert [(o.name, o.dtype, o.c_type, o.is_output, o.scalar) for o in s.operands] == [
        ("a", "int16", "T", False, True),
        ("x", "int16", "T", False, False),
        ("y", "int16", "T", False, False),
        ("z", "int16", "T", True, False),
    ]
    explicit = specialize(SQUARED_DIFF).operands[0]
    assert (explicit.dtype, explicit.c_type) == ("float32", "float")


@pytest.mark.parametrize(
    ("spec", "types", "needs"),
    [
        (SQUARED_DIFF, {}, set()),
        (GENERIC, {"T": "float16"}, {"fp16"}),
        (GENERIC, {"T": "bfloat16"}, {"bf16"}),
        (GENERIC, {"T": "complex128"}, {"complex"}),
        (L2NORM_HALF, {}, {"fp16"}),
        (ABS2, {}, {"complex"}),
        (ElementwiseSpec(name="k", in_params="float32 x", out_params="float32 y", preamble="__device__ __half h;",
                         operation="y = x"), {}, {"fp16"}),
    ],
)
def test_needs(spec, types, needs):
    assert specialize(spec, types).needs == frozenset(needs)


@pytest.mark.parametrize(
    ("spec", "types", "scalars", "vec"),
    [
        (SQUARED_DIFF, {}, (), 4),
        (GENERIC, {"T": "bool"}, (), 16),
        (GENERIC, {"T": "float16"}, (), 8),
        (GENERIC, {"T": "float64"}, (), 2),
        (GENERIC, {"T": "complex128"}, (), 1),
        (AXPY, {"T": "float64"}, ("a", "x", "y"), 2),  # only the output moves in vectors
        (RUNNING, {"T": "float32"}, (), 1),  # a _non_const array input: no vector variant
        (L2NORM, {"T": "float32"}, (), 4),
        (L2NORM_HALF, {}, (), 8),  # reductions size the vector by their array inputs only
        (ElementwiseSpec(name="k", in_params="float16 x", out_params="float64 y", operation="y = x"), {}, (), 2),
    ],
)
def test_vector_width(spec, types, scalars, vec):
    s = specialize(spec, types, scalars=scalars)
    assert s.vec == vec
    # the contiguous entry, the rows and pieces entries carry it; the runtime-rank cols entry comes with it and
    # with scalar lanes; every other entry loads scalars (the tiled entries' vec is their tile width)
    vectorised = {v for v in s.variants if v.entry in ("contig", "rows", "slab", "pieces")}
    assert {v.vec for v in vectorised} == {vec}
    runtime_cols = {v for v in s.variants if v.entry == "cols" and v.ndim == 0}
    if s.kind == "reduction":
        assert {v.vec for v in runtime_cols} == {1, vec}
    tiled = {v for v in s.variants if v.entry == "tiled"}
    assert {v.vec for v in tiled} <= {4, 8, 16, 32, 64}
    assert {v.vec for v in set(s.variants) - vectorised - runtime_cols - tiled} == {1}


def test_elementwise_variants_and_names():
    s = specialize(SQUARED_DIFF)
    assert s.variants == (
        VariantKey("contig", "int64", 0, 4),
        VariantKey("strided", "int32", 2, 1),
        VariantKey("strided", "int32", 0, 1),
        VariantKey("strided", "int64", 0, 1),
        VariantKey("tiled", "int32", 0, 32),
        VariantKey("tiled", "int32", 0, 16),
        VariantKey("tiled", "int32", 0, 64),
        VariantKey("tiled", "int32", 0, 8),
        VariantKey("tiled", "int32", 0, 4),
    )
    assert s.name_expressions == (
        "squared_diff__contig<long long, 4>",
        "squared_diff__strided<int, 2>",
        "squared_diff__strided<int, 0>",
        "squared_diff__strided<long long, 0>",
        "squared_diff__tiled<int, 0, 32>",
        "squared_diff__tiled<int, 0, 16>",
        "squared_diff__tiled<int, 0, 64>",
        "squared_diff__tiled<int, 0, 8>",
        "squared_diff__tiled<int, 0, 4>",
    )
    with pytest.raises(kspec.KspecValueError, match="no launch variant"):
        s.name_expression(VariantKey("strided", "int64", 3, 1))


def test_reduction_variants():
    s = specialize(L2NORM, {"T": "float32"})
    assert [s.name_expression(v) for v in s.variants] == [
        "l2norm__rows<long long, 1, 4>",
        "l2norm__rows<long long, 0, 4>",
        "l2norm__cols<long long, 1, 1>",
        "l2norm__cols<long long, 0, 1>",
        "l2norm__cols<long long, 0, 4>",
        "l2norm__pieces<long long, 0, 4>",
        "l2norm__slab<int, 0, 4>",
        "l2norm__split_final<long long>",
        "l2norm__slab_final<int>",
        "l2norm__cols<int, 0, 4>",  # the vectorised cols entry in 32 bits, for unsplit launches whose offsets fit
    ]
    # scalar loads only (vec 1): one runtime-rank cols entry, no pieces entry, no 32-bit cols, no variant twice
    assert reduction_variants(1) == (
        VariantKey("rows", "int64", 1, 1),
        VariantKey("rows", "int64", 0, 1),
        VariantKey("cols", "int64", 1, 1),
        VariantKey("cols", "int64", 0, 1),
        VariantKey("slab", "int32", 0, 1),
        VariantKey("split_final", "int64", 0, 1),
        VariantKey("slab_final", "int32", 0, 1),
    )
    assert all(len(set(reduction_variants(vec))) == len(reduction_variants(vec)) for vec in (1, 2, 4, 8, 16))


@pytest.mark.parametrize(
    ("spec", "types", "c_type", "dtype"),
    [
        (L2NORM, {"T": "float64"}, "T", "float64"),  # default: the first output's type
        (L2NORM_HALF, {}, "float", "float32"),  # a dtype name
        (L2NORM.model_copy(update={"reduce_type": "double"}), {"T": "float32"}, "double", "float64"),  # a C type
        (ARGMAX, {}, "ArgMax", None),  # a preamble struct, passed through
        (
            ReductionSpec(name="r", in_params="T x, U w", out_params="T y", map_expr="x", reduce_expr="a + b",
                          post_map_expr="y = a", identity="0", reduce_type="U"),
            {"T": "float32", "U": "float64"},
            "U",
            "float64",
        ),
    ],
)
def test_reduce_type(spec, types, c_type, dtype):
    rt = specialize(spec, types).reduce_type
    assert (rt.c_type, rt.dtype) == (c_type, dtype)


def test_raw_specialization(tmp_path):
    s = specialize(RAW_CUCOMPLEX)
    assert isinstance(s, Specialization) and s.variants == () and s.needs == frozenset({"complex"})
    assert s.name_expressions == ("cscale",)
    with pytest.raises(kspec.KspecValueError, match="no placeholders"):
        specialize(RAW_CUCOMPLEX, {"T": "float32"})
    # a spec pointing at a .cu file changes key with the file's content
    path = tmp_path / "k.cu"
    path.write_text('extern "C" __global__ void k() {}\n')
    spec = RawSpec(name="k", path=str(path), kernels=("k",))
    before = specialize(spec).key
    path.write_text('extern "C" __global__ void k() { }\n')
    assert specialize(spec).key != before


def test_specialize_rejects_other_objects():
    with pytest.raises(kspec.KspecTypeError, match="expected an ElementwiseSpec"):
        specialize("z = x")  # type: ignore[arg-type]
    with pytest.raises(kspec.KspecTypeError, match="mapping"):
        specialize(GENERIC, ["T"])  # type: ignore[arg-type]


def test_contiguous_layouts_keep_the_contiguous_entry_and_one_general_strided_one():
    """``layouts = "contiguous"``: no tiled entry, one strided entry (64-bit, runtime rank: it serves any layout),
    the same contiguous entry; the field is part of the spec, so of the key."""
    fields = dict(name="cscale", in_params="T x", out_params="T y", operation="y = x * 3")
    contiguous = specialize(ElementwiseSpec(**fields, layouts="contiguous"), {"T": "float32"})
    anything = specialize(ElementwiseSpec(**fields), {"T": "float32"})
    assert contiguous.variants == (VariantKey("contig", "int64", 0, 4), VariantKey("strided", "int64", 0, 1))
    assert not contiguous.tiled and anything.tiled
    assert {v.entry for v in anything.variants} == {"contig", "strided", "tiled"} and len(anything.variants) == 9
    assert contiguous.key != anything.key
    assert len(contiguous.name_expressions) == 2


def test_layouts_is_checked_and_kept_by_the_plain_reader():
    from kspec import SpecError
    from kspec.spec import plain_spec

    with pytest.raises(SpecError, match="layouts"):
        ElementwiseSpec(name="k", in_params="T x", out_params="T y", operation="y = x", layouts="transposed")
    spec = ElementwiseSpec(name="k", in_params="T x", out_params="T y", operation="y = x", layouts="contiguous")
    table = spec.to_data()
    assert table["layouts"] == "contiguous"
    assert "layouts" not in ElementwiseSpec(name="k", in_params="T x", out_params="T y", operation="y = x").to_data()
    assert plain_spec(table).layouts == "contiguous"
    assert plain_spec({**table, "layouts": "transposed"}) is None  # not what to_data() writes: validated instead


def test_the_row_sum_variant_is_built_for_contiguous_calls():
    spec = ElementwiseSpec(name="bias_act", in_params="T x, T b", out_params="T y", operation="y = x * b + x", grad="auto")
    variant = spec.row_sum_spec(("b",))
    assert variant.layouts == "contiguous"
    assert not specialize(variant, {"T": "float32"}).tiled
