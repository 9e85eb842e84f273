"""The constructors' plain path (issue 14, cold first call): ``kspec.spec.plain_from_fields`` checks a
constructor's fields without Pydantic. It must accept a strict subset of what the models accept, give the
model's ``to_data()`` exactly, and decline (None) everything the models reject; a plain spec must render
the same source, byte for byte, as its model.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest

import kspec
from kspec import SpecError
from kspec.render import render, specialize
from kspec.spec import ElementwiseSpec, ReductionSpec, parse_spec, plain_from_fields, plain_spec

from helpers import render_cases as rc

# What the constructors pass (kspec/kernels/_elementwise.py, _reduction.py): every argument, defaults too.
_EW = dict(in_params="float32 x, float32 y", out_params="float32 z", operation="z = (x - y) * (x - y)", name="sqd",
           preamble="", loop_prep="", after_loop="", reduce_dims=True, no_return=False, return_tuple=False, options=())
_RED = dict(in_params="T x", out_params="T y", map_expr="x * x", reduce_expr="a + b", post_map_expr="y = sqrt(a)",
            name="l2norm", preamble="", identity="0", reduce_type=None, reduce_dims=True, options=())


class _Str(str):
    pass


def ew(**changes: Any) -> tuple[str, dict[str, Any]]:
    return "elementwise", {**_EW, **changes}


def red(**changes: Any) -> tuple[str, dict[str, Any]]:
    return "reduction", {**_RED, **changes}


def _without(case: tuple[str, dict[str, Any]], key: str) -> tuple[str, dict[str, Any]]:
    kind, fields = case
    return kind, {k: v for k, v in fields.items() if k != key}


# (id, (kind, fields), expected): "plain" (the plain path serves it), "model" (only the model accepts it:
# the plain path declines) or "error" (the model raises a SpecError; the plain path must decline).
CASES: list[tuple[str, tuple[str, dict[str, Any]], str]] = [
    # elementwise, accepted without Pydantic
    ("ew-basic", ew(), "plain"),
    ("ew-placeholders", ew(in_params="T x, T y", out_params="T z"), "plain"),
    ("ew-two-placeholders", ew(in_params="T x, U y", out_params="T z"), "plain"),
    ("ew-output-only-placeholder", ew(in_params="float32 x", out_params="U z", operation="z = x"), "plain"),
    ("ew-raw", ew(in_params="raw T x", out_params="T y", operation="y = x[_ind.size() - i - 1]"), "plain"),
    ("ew-non-const", ew(in_params="_non_const T x, raw _non_const T w", out_params="T y"), "plain"),
    ("ew-both-modifiers-reversed", ew(in_params="_non_const raw T x", out_params="T y"), "plain"),
    ("ew-aliases", ew(in_params="f4 x, float y, int z", out_params="double w"), "plain"),
    ("ew-spacing", ew(in_params="  float32   x ,float32\ty  ", out_params="\nfloat32 z\n"), "plain"),
    ("ew-param-n", ew(in_params="T x, int32 n", out_params="T y", operation="y = x * n"), "plain"),
    ("ew-no-inputs", ew(in_params="", out_params="raw float32 z", operation="z[i] = i"), "plain"),
    ("ew-no-outputs", ew(in_params="float32 x", out_params="", operation=""), "plain"),
    ("ew-empty-operation", ew(operation=""), "plain"),
    ("ew-preamble-loop", ew(preamble="__device__ float f(float v) { return v; }", loop_prep="float acc = 0;",
                            after_loop="(void)acc;"), "plain"),
    ("ew-crlf", ew(operation="z = x;\r\nz = y;\r\n", preamble="// a\r\n", loop_prep="int k;\r\n"), "plain"),
    ("ew-lone-cr", ew(operation="z = x;\rz = y;"), "plain"),
    ("ew-flags", ew(reduce_dims=False, no_return=True, return_tuple=True), "plain"),
    ("ew-options", ew(options=("-O3", "--use_fast_math")), "plain"),
    ("ew-options-list", ew(options=["-O3"]), "plain"),
    ("ew-options-crlf", ew(options=("-DX=1\r\n",)), "plain"),
    ("ew-doc", ew(doc="squares\r\nthe difference"), "plain"),
    ("ew-unicode", ew(operation="z = x; // naïve ☃"), "plain"),
    ("ew-kernel-name-i", ew(name="i"), "plain"),
    ("ew-kernel-name-underscore", ew(name="_k"), "plain"),
    ("ew-minimal", ("elementwise", {"name": "k", "operation": "z = x", "in_params": "T x", "out_params": "T z"}),
     "plain"),
    # elementwise, valid but declined
    ("ew-scalars", ew(scalars=("y",)), "model"),
    ("ew-instantiations", ew(in_params="T x, T y", out_params="T z", instantiations=[{"T": "float32"}]), "model"),
    ("ew-empty-instantiations", ew(instantiations=()), "model"),
    ("ew-kind-given", ew(kind="elementwise"), "model"),
    ("ew-params-as-list", ew(in_params=["float32 x", "float32 y"]), "model"),
    ("ew-params-as-tables", ew(out_params=[{"name": "z", "type": "float32"}]), "model"),
    ("ew-str-subclass-name", ew(name=_Str("sqd")), "model"),
    ("ew-str-subclass-option", ew(options=(_Str("-O3"),)), "model"),
    # elementwise, rejected by the model
    ("ew-keyword-name", ew(name="int"), "error"),
    ("ew-bad-name", ew(name="1abc"), "error"),
    ("ew-empty-name", ew(name=""), "error"),
    ("ew-name-crlf", ew(name="sq\r\nd"), "error"),
    ("ew-param-i", ew(in_params="float32 i, float32 y"), "error"),
    ("ew-param-underscore", ew(in_params="float32 _x, float32 y"), "error"),
    ("ew-param-keyword", ew(in_params="float32 int, float32 y"), "error"),
    ("ew-param-macro", ew(in_params="float32 NULL, float32 CUDA_X"), "error"),
    ("ew-param-macro-int-max", ew(out_params="float32 INT_MAX"), "error"),
    ("ew-duplicate-in", ew(in_params="float32 x, float32 x"), "error"),
    ("ew-duplicate-in-out", ew(out_params="float32 x"), "error"),
    ("ew-param-named-like-placeholder", ew(in_params="T x, float32 T", out_params="T z"), "error"),
    ("ew-param-named-like-out-placeholder", ew(in_params="U x", out_params="float32 U"), "error"),
    ("ew-unknown-dtype", ew(in_params="flot32 x, float32 y"), "error"),
    ("ew-placeholder-i", ew(in_params="i x", out_params="i z"), "error"),
    ("ew-placeholder-non-ascii", ew(in_params="é x", out_params="é z"), "error"),
    ("ew-placeholder-digit", ew(in_params="1 x", out_params="float32 z"), "error"),
    ("ew-repeated-modifier", ew(in_params="raw raw T x", out_params="T z"), "error"),
    ("ew-unknown-modifier", ew(in_params="const float32 x", out_params="float32 z"), "error"),
    ("ew-one-word", ew(in_params="float32"), "error"),
    ("ew-double-comma", ew(in_params="float32 x,, float32 y"), "error"),
    ("ew-trailing-comma", ew(in_params="float32 x, float32 y,"), "error"),
    ("ew-nul-operation", ew(operation="z = x;\0"), "error"),
    ("ew-nul-params", ew(in_params="float32 x\0, float32 y"), "error"),
    ("ew-surrogate-preamble", ew(preamble="// \ud800"), "error"),
    ("ew-nul-option", ew(options=("-O3\0",)), "error"),
    ("ew-empty-option", ew(options=("",)), "error"),
    ("ew-blank-option", ew(options=(" ",)), "error"),
    ("ew-flag-str", ew(no_return="yes"), "error"),
    ("ew-flag-int", ew(reduce_dims=1), "error"),
    ("ew-operation-none", ew(operation=None), "error"),
    ("ew-operation-missing", _without(ew(), "operation"), "error"),
    ("ew-name-missing", _without(ew(), "name"), "error"),
    ("ew-extra-key", ew(map_expr="x"), "error"),
    ("ew-unknown-key", ew(colour="red"), "error"),
    ("ew-option-not-str", ew(options=(1,)), "error"),
    ("ew-params-not-str", ew(in_params=3), "error"),
    # reductions, accepted without Pydantic
    ("red-basic", red(), "plain"),
    ("red-identity-none", red(identity=None), "plain"),
    ("red-identity-int", red(identity=0), "plain"),
    ("red-identity-negative", red(identity=-1), "plain"),
    ("red-identity-float", red(identity=0.5), "plain"),
    ("red-identity-big-float", red(identity=1e300), "plain"),
    ("red-identity-true", red(identity=True), "plain"),
    ("red-identity-false", red(identity=False), "plain"),
    ("red-identity-crlf", red(identity="0\r\n"), "plain"),
    ("red-identity-c", red(identity="-CUDART_INF_F", preamble="#include <math_constants.h>"), "plain"),
    ("red-reduce-type-dtype", red(reduce_type="float32"), "plain"),
    ("red-reduce-type-alias", red(reduce_type="f8"), "plain"),
    ("red-reduce-type-c-name", red(reduce_type="float"), "plain"),
    ("red-reduce-type-c-complex", red(reduce_type="complex<float>"), "plain"),
    ("red-reduce-type-words", red(reduce_type="unsigned long long"), "plain"),
    ("red-reduce-type-pointer", red(reduce_type="T*"), "plain"),
    ("red-reduce-type-template", red(reduce_type="thrust::pair<float, int>"), "plain"),
    ("red-reduce-type-placeholder", red(reduce_type="T"), "plain"),
    ("red-reduce-type-struct", red(preamble="struct Acc { float v; };", reduce_type="Acc", identity=None), "plain"),
    ("red-raw-and-array", red(in_params="T x, raw T w", out_params="T y"), "plain"),
    ("red-two-outputs", red(in_params="float32 x", out_params="float32 best, int64 at", reduce_type="float32"),
     "plain"),
    ("red-crlf-exprs", red(map_expr="x\r\n* x", post_map_expr="y =\r\na"), "plain"),
    ("red-options", red(options=("-O3",), reduce_dims=False), "plain"),
    # reductions, valid but declined
    ("red-identity-numpy-float", red(identity=np.float64(1.0)), "model"),
    ("red-scalars", red(in_params="T x, T s", scalars=("s",)), "model"),
    ("red-identity-int-subclass", red(identity=np.True_), "error"),
    # reductions, rejected by the model
    ("red-empty-map", red(map_expr=" "), "error"),
    ("red-empty-reduce", red(reduce_expr=""), "error"),
    ("red-empty-post", red(post_map_expr="\n"), "error"),
    ("red-identity-empty", red(identity=""), "error"),
    ("red-identity-blank", red(identity="  "), "error"),
    ("red-identity-inf", red(identity=float("inf")), "error"),
    ("red-identity-minus-inf", red(identity=float("-inf")), "error"),
    ("red-identity-nan", red(identity=float("nan")), "error"),
    ("red-identity-list", red(identity=[0]), "error"),
    ("red-identity-nul", red(identity="0\0"), "error"),
    ("red-reduce-type-declaration", red(reduce_type="int x"), "error"),
    ("red-reduce-type-unused-placeholder", red(reduce_type="S"), "error"),
    ("red-reduce-type-placeholder-i", red(reduce_type="i"), "error"),
    ("red-reduce-type-undefined", red(reduce_type="Acc"), "error"),
    ("red-reduce-type-typo", red(reduce_type="floot32"), "error"),
    ("red-reduce-type-bad", red(reduce_type="float$"), "error"),
    ("red-reduce-type-two", red(reduce_type="float, int"), "error"),
    ("red-reduce-type-empty", red(reduce_type=""), "error"),
    ("red-reduce-type-crlf", red(reduce_type="float32\r\n"), "error"),
    ("red-reduce-type-not-str", red(reduce_type=3), "error"),
    ("red-no-inputs", red(in_params=""), "error"),
    ("red-no-outputs", red(out_params=""), "error"),
    ("red-all-raw", red(in_params="raw T x"), "error"),
    ("red-param-a", red(in_params="T a"), "error"),
    ("red-param-b", red(out_params="T b"), "error"),
    ("red-param-i", red(in_params="T i"), "error"),
    ("red-duplicate", red(in_params="T x", out_params="T x"), "error"),
    ("red-missing-post", _without(red(), "post_map_expr"), "error"),
    ("red-operation-key", red(operation="x"), "error"),
    ("red-keyword-name", red(name="while"), "error"),
    ("red-surrogate", red(map_expr="x\udfff"), "error"),
]


def _model(kind: str, fields: dict[str, Any]) -> tuple[Any, SpecError | None]:
    cls = ElementwiseSpec if kind == "elementwise" else ReductionSpec
    try:
        return cls(**fields), None
    except SpecError as exc:
        return None, exc


def _param_rows(spec: Any) -> list[tuple[str, str, bool, bool]]:
    return [(p.name, p.type, p.raw, p.non_const) for p in spec.params]


_ATTRIBUTES = {
    "elementwise": ("name", "doc", "options", "preamble", "reduce_dims", "scalars", "operation", "loop_prep",
                    "after_loop", "no_return", "return_tuple"),
    "reduction": ("name", "doc", "options", "preamble", "reduce_dims", "scalars", "map_expr", "reduce_expr",
                  "post_map_expr", "identity", "reduce_type"),
}


@pytest.mark.parametrize("case, expected", [(case, expected) for _, case, expected in CASES], ids=[c[0] for c in CASES])
def test_plain_path_accepts_a_subset_of_the_model_and_agrees_on_the_data(
    case: tuple[str, dict[str, Any]], expected: str
) -> None:
    kind, fields = case
    plain = plain_from_fields(kind, dict(fields))
    model, error = _model(kind, dict(fields))
    if error is not None:
        assert plain is None, f"the plain path accepted what the model rejects: {error}"
    if plain is not None:
        assert model is not None
        assert plain.KIND == kind
        assert plain.to_data() == model.to_data()
        assert list(plain.to_data()) == list(model.to_data())  # same keys in the same order
        assert parse_spec(plain.to_data()) == model  # what kernel.spec gives for a plain spec
        assert _param_rows(plain) == _param_rows(model)
        assert plain.placeholders == model.placeholders
        assert plain.output_only_placeholders == model.output_only_placeholders
        for attribute in _ATTRIBUTES[kind]:
            assert getattr(plain, attribute) == getattr(model, attribute), attribute
    got = "error" if error is not None else "plain" if plain is not None else "model"
    assert got == expected


def test_plain_path_never_raises_on_odd_input() -> None:
    assert plain_from_fields("raw", {"name": "k"}) is None
    assert plain_from_fields("nonsense", dict(_EW)) is None
    assert plain_from_fields(None, dict(_EW)) is None  # type: ignore[arg-type]  # a wrong kind is declined
    assert plain_from_fields("elementwise", {}) is None


# -- rendering a plain spec -------------------------------------------------------------------------------


@kspec.fuse(kernel_name="fused_sqd")
def _fused_sqd(x: Any, y: Any) -> Any:
    return (x - y) * (x - y)


@kspec.fuse(kernel_name="fused_sop")
def _fused_sop(x: Any, y: Any) -> Any:
    return np.sum(x * y, axis=-1)


_A1 = np.zeros(4, np.float32)
_A2 = np.zeros((3, 4), np.float32)

# (id, model, binding, scalars)
RENDER_CASES: list[tuple[str, Any, dict[str, str], tuple[str, ...]]] = [
    ("squared-diff", rc.SQUARED_DIFF, {}, ()),
    ("placeholders-f16", rc.GENERIC, {"T": "float16"}, ()),
    ("placeholders-c128", rc.GENERIC, {"T": "complex128"}, ()),
    ("scalar-input", rc.AXPY, {"T": "float32"}, ("a",)),
    ("param-n", rc.SCALE_N, {"T": "float64"}, ("n",)),
    ("raw-param", rc.REVERSE, {"T": "float64"}, ()),
    ("preamble-loop-prep-after-loop", rc.RUNNING, {"T": "float32"}, ()),
    ("reduction-identity", rc.L2NORM, {"T": "float32"}, ()),
    ("reduction-reduce-type", rc.L2NORM_HALF, {}, ()),
    ("reduction-complex", rc.ABS2, {}, ()),
    ("reduction-no-identity", rc.MAX_NO_IDENTITY, {"T": "int8"}, ()),
    ("reduction-struct", rc.ARGMAX, {}, ()),
    ("reduction-placeholder-reduce-type", ReductionSpec(**{**_RED, "reduce_type": "T", "identity": 0}),
     {"T": "float64"}, ()),
    ("ctor-crlf-options", ElementwiseSpec(**{**_EW, "operation": "z = x;\r\nz += y;", "options": ("-O3",)}), {}, ()),
    ("fuse-elementwise", _fused_sqd.spec(_A1, _A1), {}, ()),
    ("fuse-reduction", _fused_sop.spec(_A2, _A1), {}, ()),
]


@pytest.mark.parametrize("model, types, scalars", [c[1:] for c in RENDER_CASES], ids=[c[0] for c in RENDER_CASES])
def test_plain_spec_renders_the_same_module_as_its_model(
    model: Any, types: dict[str, str], scalars: tuple[str, ...]
) -> None:
    plain = plain_spec(model.to_data())
    assert plain is not None and not isinstance(plain, type(model))
    from_plain = render(specialize(plain, types, scalars=scalars))
    from_model = render(specialize(model, types, scalars=scalars))
    assert from_plain.source == from_model.source
    assert from_plain.key == from_model.key
    assert from_plain.name_expressions == from_model.name_expressions
    assert from_plain.needs == from_model.needs
    assert from_plain.abi == from_model.abi


# -- the constructors -------------------------------------------------------------------------------------


def _ctor_kernels() -> list[tuple[Any, Any, tuple[Any, ...]]]:
    """(kernel made by a constructor, the same kernel made from its model, call arguments)."""
    x = np.ones(4, np.float32)
    ew_args = dict(in_params="T x, raw T w", out_params="T z", operation="z = x + w[0]", name="addw",
                   preamble="// p\r\n", options=("-O3",), loop_prep="int k = 0;")
    red_args = dict(in_params="T x", out_params="T y", map_expr="x * x", reduce_expr="a + b",
                    post_map_expr="y = sqrt(a)", identity=0, name="l2n", reduce_type="T")
    env = dict(cupy_headers=True)  # what the constructors add: CuPy's implicit kernel environment
    return [
        (kspec.ElementwiseKernel(**ew_args), kspec.ElementwiseKernel.from_spec(ElementwiseSpec(**ew_args, **env)), (x, x)),
        (kspec.ReductionKernel(**red_args), kspec.ReductionKernel.from_spec(ReductionSpec(**red_args, **env)), (x,)),
    ]


def test_constructor_serves_a_plain_spec_and_behaves_as_the_model() -> None:
    for kernel, from_model, args in _ctor_kernels():
        assert type(kernel._spec).__name__.startswith("Plain")  # no Pydantic model was built
        # the constructors' kernels also fix each raw array's rank and contiguity (kspec::RankedView)
        plain = kernel.specialization(*args)
        layouts = {op.name: (op.raw_ndim, op.raw_c_contiguous) for op in plain.operands if op.raw_ndim >= 0}
        assert layouts == ({"w": (1, True)} if kernel.nin == 2 else {})
        model = from_model.specialization(*args)
        ranked = specialize(from_model.spec, model.types, scalars=model.scalars, raw_layouts=layouts)
        assert kernel.source(*args) == render(ranked).source
        assert plain.key == ranked.key
        assert kernel._key == from_model._key  # the spec's content key (memoised specializations, prepared calls)
        assert (kernel.name, kernel.options, kernel.preamble, kernel.nin, kernel.nout, kernel.reduce_dims) == (
            from_model.name, from_model.options, from_model.preamble, from_model.nin, from_model.nout,
            from_model.reduce_dims)
        assert type(kernel._spec).__name__.startswith("Plain")  # rendering did not validate it either
        spec = kernel.spec  # validated on first access: the model, equal to the one the model kernel holds
        assert isinstance(spec, (ElementwiseSpec, ReductionSpec)) and spec == from_model.spec
        assert kernel._spec is spec and kernel.spec is spec  # once
        rebuilt = pickle.loads(pickle.dumps(kernel))
        assert rebuilt.spec == spec and rebuilt.source(*args) == kernel.source(*args)


def test_constructor_errors_still_come_from_the_model_with_cupys_phrases() -> None:
    with pytest.raises(kspec.InvalidNameError, match='^Invalid kernel name: "int": '):
        kspec.ElementwiseKernel("T x", "T y", "y = x", "int")
    with pytest.raises(kspec.ReservedNameError, match="^Can not use 'i' as a parameter name: "):
        kspec.ElementwiseKernel("T i", "T y", "y = i", "k")
    with pytest.raises(kspec.SpecError, match="reduce_expr is empty"):
        kspec.ReductionKernel("T x", "T y", "x", "", "y = a", "0")
    with pytest.raises(kspec.DuplicateNameError, match="appears twice"):
        kspec.ElementwiseKernel("T x", "T x", "x = x", "k")
