"""Spec models: parsing, printing back, placeholders, instantiations, the repository's own specs."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from kspec.spec import (
    ElementwiseSpec,
    Param,
    RawSpec,
    ReductionSpec,
    dumps_json,
    dumps_toml,
    format_params,
    load_library,
    parse_params,
    parse_spec,
)

REPO = Path(__file__).resolve().parents[2]
SPECS = load_library(REPO / "specs")


@pytest.mark.parametrize(
    "text",
    [
        "T x, raw T y, _non_const float32 z",
        "float32 x, float32 y",
        "raw _non_const T x",
        "complex128 z, bfloat16 h, bool flag, uint64 n",
        "",
    ],
)
def test_param_string_round_trip(text):
    params = parse_params(text, field="in_params")
    assert format_params(params) == text
    assert parse_params(format_params(params), field="in_params") == params


def test_params_from_tables_equal_string_form():
    tables = [{"name": "x", "type": "T"}, {"name": "y", "type": "T", "raw": True}, {"name": "z", "type": "float32", "non_const": True}]
    assert parse_params(tables, field="in_params") == parse_params("T x, raw T y, _non_const float32 z", field="in_params")


def test_param_whitespace_and_aliases():
    (p,) = parse_params("  raw   float   x  ", field="in_params")
    assert p == Param(name="x", type="float64", raw=True)  # NumPy alias canonicalised, as CuPy's numpy.dtype does


@pytest.mark.parametrize("name", sorted(SPECS))
def test_repository_specs_round_trip_toml(name):
    spec = SPECS[name]
    text = dumps_toml([spec])
    again = parse_spec(tomllib.loads(text)["kernel"][0])
    assert again == spec
    assert dumps_toml([again]) == text  # TOML -> model -> TOML -> model is a fixed point


@pytest.mark.parametrize("name", sorted(SPECS))
def test_repository_specs_round_trip_json(name):
    spec = SPECS[name]
    assert parse_spec(json.loads(dumps_json([spec]))["kernel"][0]) == spec


def test_whole_library_in_one_file_round_trips(tmp_path):
    path = tmp_path / "all.toml"
    path.write_text(dumps_toml(SPECS.values()))
    assert dict(load_library(path)) == dict(SPECS)


def test_seed_kernels_are_in_the_library():
    seeds = {
        "squared_diff", "squared_diff_generic", "squared_diff_super_generic", "add_reverse", "l2norm",
        "clipped_relu", "l2_norm_squared", "abs_squared", "vector_add", "my_add", "my_func", "fx3",
        "sum_and_multiply", "saxpy", "relu", "clamp", "sum_of_squares", "argmax",
    }
    assert seeds <= set(SPECS)
    assert isinstance(SPECS["l2norm"], ReductionSpec) and isinstance(SPECS["fx3"], RawSpec)
    assert SPECS["fx3"].name_expressions == ("fx3<float>", "fx3<double>")
    assert len(SPECS["argmax"].out_params) == 2


def test_output_only_placeholder_is_recorded():
    spec = SPECS["squared_diff_super_generic"]
    assert spec.placeholders == ("X", "Y", "Z")
    assert spec.output_only_placeholders == ("Z",)
    assert spec.requires_explicit_outputs
    assert not SPECS["squared_diff_generic"].requires_explicit_outputs


def test_instantiation_lists_expand_to_a_product():
    spec = parse_spec(
        dict(kind="elementwise", name="k", in_params="T x, U y", out_params="T z", operation="z = x",
             instantiations=[{"T": ["float32", "float64"], "U": ["int32", "int64"]}])
    )
    assert spec.instantiations == (
        {"T": "float32", "U": "int32"}, {"T": "float32", "U": "int64"},
        {"T": "float64", "U": "int32"}, {"T": "float64", "U": "int64"},
    )


def test_declared_instantiations_of_a_concrete_kernel():
    assert SPECS["squared_diff"].declared_instantiations() == ({},)
    generic = parse_spec(dict(kind="elementwise", name="g", in_params="T x", out_params="T y", operation="y = x"))
    assert generic.declared_instantiations() == ()  # lazy compile only


def test_reduction_identity_none_is_legal_and_numbers_become_text():
    spec = parse_spec(dict(kind="reduction", name="mx", in_params="T x", out_params="T y", map_expr="x",
                           reduce_expr="max(a, b)", post_map_expr="y = a"))
    assert spec.identity is None
    spec0 = parse_spec(dict(kind="reduction", name="s", in_params="T x", out_params="T y", map_expr="x",
                            reduce_expr="a + b", post_map_expr="y = a", identity=0))
    assert spec0.identity == "0"


def test_reduce_type_forms():
    base = dict(kind="reduction", name="s", in_params="T x", out_params="T y", map_expr="x", reduce_expr="a + b",
                post_map_expr="y = a")
    assert parse_spec(dict(base, reduce_type="float")).reduce_type == "float"  # a C type
    assert parse_spec(dict(base, reduce_type="float32")).reduce_type == "float32"  # a dtype
    assert parse_spec(dict(base, reduce_type="T")).reduce_type == "T"  # a placeholder
    assert parse_spec(dict(base, reduce_type="acc", preamble="struct acc { float v; };")).reduce_type == "acc"
    assert SPECS["argmax"].reduce_type == "kspec_argmax_pair"


def test_models_are_frozen():
    spec = SPECS["squared_diff"]
    with pytest.raises(Exception):  # noqa: B017 (any error: what matters is that assignment fails)
        spec.name = "other"  # type: ignore[misc]


def test_equality_ignores_origin():
    spec = SPECS["squared_diff"]
    assert spec.origin is not None and spec.origin.name == "elementwise.toml"
    same = ElementwiseSpec(**{k: v for k, v in spec.to_data().items() if k != "kind"})
    assert same.origin is None and same == spec


def test_crlf_code_is_normalised():
    spec = parse_spec(dict(kind="elementwise", name="k", in_params="T x", out_params="T y", operation="T t = x;\r\ny = t;"))
    assert spec.operation == "T t = x;\ny = t;"
    assert parse_spec(tomllib.loads(dumps_toml([spec]))["kernel"][0]) == spec


def test_code_with_quotes_and_backslashes_round_trips():
    op = 'printf("%d\\n", i); y = x; // it\'s\n'
    spec = parse_spec(dict(kind="elementwise", name="k", in_params="T x", out_params="T y", operation=op))
    assert parse_spec(tomllib.loads(dumps_toml([spec]))["kernel"][0]).operation == op
