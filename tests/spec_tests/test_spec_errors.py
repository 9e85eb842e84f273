"""Bad specs: each case asserts the exception class and the words a person needs to fix it."""

from __future__ import annotations

import pytest

import kspec
from kspec.spec import parse_spec

EW = dict(kind="elementwise", name="k", in_params="T x", out_params="T y", operation="y = x")
RED = dict(
    kind="reduction", name="r", in_params="T x", out_params="T y",
    map_expr="x", reduce_expr="a + b", post_map_expr="y = a", identity="0",
)
RAW = dict(kind="raw", name="m", source='extern "C" __global__ void f() {}', kernels=["f"])


def case(base, **changes):
    data = dict(base)
    for k, v in changes.items():
        if v is _DROP:
            data.pop(k)
        else:
            data[k] = v
    return data


_DROP = object()

# (id, data, exception class, words that must appear in the message)
CASES = [
    # dtypes
    ("unknown-dtype-in", case(EW, in_params="flaot32 x"), kspec.UnknownDtypeError, ["in_params", "flaot32", "float32"]),
    ("unknown-dtype-out", case(EW, out_params="floot y"), kspec.UnknownDtypeError, ["out_params", "floot"]),
    ("unsupported-dtype", case(EW, in_params="float128 x"), kspec.UnknownDtypeError, ["float128", "unknown dtype"]),
    ("string-dtype", case(EW, in_params="str x"), kspec.UnknownDtypeError, ["'str'"]),
    ("placeholder-digit", case(EW, in_params="1 x"), kspec.UnknownDtypeError, ["'1'", "letter"]),
    ("placeholder-i", case(EW, in_params="i x"), kspec.UnknownDtypeError, ["'i'", "placeholder"]),
    ("table-unknown-dtype", case(EW, in_params=[{"name": "x", "type": "flt"}]), kspec.UnknownDtypeError, ["flt", "in_params[0]"]),
    # names
    ("kernel-keyword", case(EW, name="class"), kspec.InvalidNameError, ["'class'", "keyword", "name"]),
    ("kernel-cpp-keyword", case(EW, name="template"), kspec.InvalidNameError, ["'template'", "keyword"]),
    ("kernel-not-identifier", case(EW, name="my-kernel"), kspec.InvalidNameError, ["'my-kernel'", "identifier"]),
    ("kernel-digit-first", case(EW, name="2fast"), kspec.InvalidNameError, ["'2fast'", "identifier"]),
    ("kernel-empty", case(EW, name=""), kspec.InvalidNameError, ["identifier"]),
    ("param-keyword", case(EW, in_params="T int"), kspec.InvalidNameError, ["'int'", "keyword", "in_params"]),
    ("param-keyword-out", case(EW, out_params="T float"), kspec.InvalidNameError, ["'float'", "out_params"]),
    ("param-not-identifier", case(EW, in_params="T x-1"), kspec.InvalidNameError, ["'x-1'", "identifier"]),
    ("param-cpp-alt-keyword", case(EW, in_params="T and"), kspec.InvalidNameError, ["'and'", "keyword"]),
    ("raw-kernel-fn-keyword", case(RAW, kernels=["switch"]), kspec.InvalidNameError, ["'switch'", "kernels[0]"]),
    # reserved
    ("param-i", case(EW, in_params="T i"), kspec.ReservedNameError, ["'i'", "loop index"]),
    ("param-underscore", case(EW, in_params="T _x"), kspec.ReservedNameError, ["'_x'", "'_'"]),
    ("param-underscore-out", case(EW, out_params="T _ind"), kspec.ReservedNameError, ["'_ind'", "out_params"]),
    ("reduction-param-i", case(RED, in_params="T i"), kspec.ReservedNameError, ["'i'"]),
    # duplicates
    ("dup-in-in", case(EW, in_params="T x, T x"), kspec.DuplicateNameError, ["'x'", "twice"]),
    ("dup-in-out", case(EW, out_params="T x"), kspec.DuplicateNameError, ["'x'", "in_params", "out_params"]),
    ("param-named-like-placeholder", case(EW, in_params="T x, float32 T"), kspec.DuplicateNameError, ["'T'", "placeholder"]),
    ("dup-raw-kernels", case(RAW, kernels=["f", "f"]), kspec.DuplicateNameError, ["twice", "kernels"]),
    ("dup-name-expr", case(RAW, kernels=[], name_expressions=["f<int>", "f<int>"]), kspec.DuplicateNameError, ["name_expressions"]),
    # param syntax
    ("param-missing-name", case(EW, in_params="float32"), kspec.SpecError, ["'float32'", "type and a name"]),
    ("param-trailing-comma", case(EW, in_params="T x,"), kspec.SpecError, ["empty parameter", "in_params"]),
    ("param-bad-modifier", case(EW, in_params="const T x"), kspec.SpecError, ["'const'", "modifier"]),
    ("param-repeated-modifier", case(EW, in_params="raw raw T x"), kspec.SpecError, ["repeated modifier"]),
    ("param-table-missing-type", case(EW, in_params=[{"name": "x"}]), kspec.SpecError, ["'type'", "missing"]),
    ("param-table-unknown-key", case(EW, in_params=[{"name": "x", "type": "T", "const": True}]), kspec.SpecError, ["'const'", "unknown key"]),
    ("param-not-string", case(EW, in_params=42), kspec.SpecError, ["in_params", "parameter string"]),
    # instantiations
    ("inst-unknown-placeholder", case(EW, instantiations=[{"U": "float32"}]), kspec.InstantiationError, ["'U'", "unknown placeholder", "instantiations[0]"]),
    ("inst-unbound", case(EW, in_params="T x, U z", instantiations=[{"T": "float32"}]), kspec.InstantiationError, ["'U'", "unbound"]),
    ("inst-bad-dtype", case(EW, instantiations=[{"T": "flot32"}]), kspec.UnknownDtypeError, ["flot32"]),
    ("inst-placeholder-value", case(EW, instantiations=[{"T": "U"}]), kspec.InstantiationError, ["'T'", "dtype"]),
    ("inst-not-letter", case(EW, instantiations=[{"TT": "float32"}]), kspec.InstantiationError, ["'TT'", "placeholder letter"]),
    ("inst-empty-list", case(EW, instantiations=[{"T": []}]), kspec.InstantiationError, ["'T'", "dtype"]),
    ("inst-duplicate", case(EW, instantiations=[{"T": "float32"}, {"T": "float32"}]), kspec.InstantiationError, ["twice"]),
    ("inst-not-table", case(EW, instantiations=["float32"]), kspec.InstantiationError, ["table"]),
    ("inst-no-placeholders", case(EW, in_params="float32 x", out_params="float32 y", instantiations=[{"T": "float32"}]), kspec.InstantiationError, ["'T'", "none"]),
    # fields
    ("unknown-key", case(EW, operatoin="y = x"), kspec.SpecError, ["'operatoin'", "unknown key"]),
    ("missing-operation", case(EW, operation=_DROP), kspec.SpecError, ["operation", "missing"]),
    ("unknown-kind", case(EW, kind="scan"), kspec.SpecError, ["'scan'", "kind"]),
    ("missing-kind", case(EW, kind=_DROP), kspec.SpecError, ["kind", "None"]),
    ("bad-bool", case(EW, no_return="yes please"), kspec.SpecError, ["no_return"]),
    ("empty-option", case(EW, options=[""]), kspec.SpecError, ["options", "non-empty"]),
    # reductions
    ("red-missing-map", case(RED, map_expr=_DROP), kspec.SpecError, ["map_expr", "missing"]),
    ("red-empty-reduce", case(RED, reduce_expr=""), kspec.SpecError, ["reduce_expr", "empty"]),
    ("red-no-output", case(RED, out_params=""), kspec.SpecError, ["out_params", "at least one output"]),
    ("red-no-input", case(RED, in_params="", out_params="float32 y"), kspec.SpecError, ["in_params", "at least one input"]),
    ("red-only-raw", case(RED, in_params="raw T x"), kspec.SpecError, ["non-raw input"]),
    ("red-reduce-type-unused-placeholder", case(RED, reduce_type="Q"), kspec.SpecError, ["'Q'", "reduce_type"]),
    ("red-reduce-type-bad", case(RED, reduce_type="float; int"), kspec.SpecError, ["reduce_type", "C type"]),
    ("red-reduce-type-alias-typo", case(RED, reduce_type="flaot32"), kspec.SpecError, ["reduce_type"]),
    # raw
    ("raw-neither", case(RAW, source=_DROP), kspec.SpecError, ["source", "path", "neither"]),
    ("raw-both", case(RAW, path="k.cu"), kspec.SpecError, ["source", "path", "both"]),
    ("raw-bad-suffix", case(RAW, source=_DROP, path="k.txt"), kspec.SpecError, ["'k.txt'", ".cubin"]),
    ("raw-binary-name-expr", case(RAW, source=_DROP, path="k.cubin", kernels=[], name_expressions=["f<int>"]), kspec.SpecError, ["name_expressions", "binary"]),
    ("raw-no-kernels", case(RAW, kernels=[]), kspec.SpecError, ["kernels", "name_expressions"]),
    ("raw-empty-source", case(RAW, source="   "), kspec.SpecError, ["source", "empty"]),
    ("raw-block-too-big", case(RAW, launch={"block": [64, 64]}), kspec.SpecError, ["launch.block", "1024"]),
    ("raw-block-zero", case(RAW, launch={"block": 0}), kspec.SpecError, ["block", "positive"]),
    ("raw-block-4d", case(RAW, launch={"block": [1, 1, 1, 1]}), kspec.SpecError, ["block", "1 to 3"]),
    ("raw-shared-negative", case(RAW, launch={"shared_mem": -1}), kspec.SpecError, ["shared_mem", ">= 0"]),
    ("raw-launch-unknown-key", case(RAW, launch={"grid": 4}), kspec.SpecError, ["grid", "unknown key"]),
    ("raw-carveout-range", case(RAW, attributes={"preferred_shared_memory_carveout": 150}), kspec.SpecError, ["preferred_shared_memory_carveout", "0..100"]),
    ("raw-max-dyn-negative", case(RAW, attributes={"max_dynamic_shared_size_bytes": -5}), kspec.SpecError, ["max_dynamic_shared_size_bytes"]),
    ("raw-empty-name-expr", case(RAW, name_expressions=[" "]), kspec.SpecError, ["name_expressions", "non-empty"]),
]


@pytest.mark.parametrize("data, exc_type, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_spec(data, exc_type, words):
    with pytest.raises(exc_type) as info:
        parse_spec(data, file="lib/kernels.toml")
    message = str(info.value)
    assert "lib/kernels.toml" in message  # the file
    if isinstance(data.get("name"), str) and data["name"]:
        assert f"kernel '{data['name']}'" in message  # the kernel
    for word in words:
        assert word in message, f"{word!r} missing from: {message}"
    assert info.value.field is not None  # the field


def test_case_count():
    assert len(CASES) >= 40


def test_errors_are_value_errors_and_kspec_errors():
    with pytest.raises(ValueError):
        parse_spec(case(EW, in_params="T i"))
    with pytest.raises(kspec.KspecError):
        parse_spec(case(EW, in_params="T i"))


def test_several_errors_are_grouped():
    with pytest.raises(kspec.SpecErrorGroup) as info:
        parse_spec(case(EW, operation=_DROP, bogus=1), file="f.toml")
    fields = {e.field for e in info.value.errors}
    assert fields == {"operation", "bogus"}
    assert "2 spec errors" in str(info.value)


def test_constructor_in_python_raises_spec_error():
    from kspec.spec import ElementwiseSpec

    with pytest.raises(kspec.ReservedNameError, match="kernel 'k'.*'_y'"):
        ElementwiseSpec(name="k", in_params="T x", out_params="T _y", operation="y = x")


def test_spec_error_pickles_with_location():
    import pickle

    err = kspec.UnknownDtypeError("bad", file="a.toml", kernel="k", field="in_params")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is kspec.UnknownDtypeError and str(back) == str(err)


def test_n_is_allowed():
    spec = parse_spec(case(EW, in_params="T x, int32 n"))
    assert [p.name for p in spec.in_params] == ["x", "n"]
