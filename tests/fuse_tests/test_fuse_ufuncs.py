"""kspec.fuse's ufunc library: NumPy 2's dtype resolution, and every loop's C++ compiling with NVRTC (no GPU)."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

from kspec import KspecOverflowError, KspecTypeError, KspecValueError
from kspec.compiler import CompileOptions, compile_source
from kspec.dtypes import BY_NAME
from kspec.fuse._ufunc_table import NOT_SUPPORTED
from kspec.fuse._ufuncs import SUPPORTED, UfuncTypeError, cast, emit, headers, literal, resolve
from helpers.ufunc_kernels import kernel_source

NUMPY_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                "float16", "float32", "float64", "complex64", "complex128")
WEAK = (bool, int, float, complex)
WEAK_VALUE = {bool: True, int: 1, float: 1.5, complex: 1.5 + 0.5j}
ALL_DTYPES = NUMPY_DTYPES + ("bfloat16",)


def every_loop() -> dict[tuple[str, tuple[str, ...]], tuple[str, ...]]:
    """(ufunc, loop inputs) -> loop outputs for every loop reachable from same-typed operands, plus the
    mixed loops NumPy has (ldexp's int exponents, int64/uint64 comparisons)."""
    loops = {}
    for name, (nin, _) in SUPPORTED.items():
        candidates = [(d,) * nin for d in ALL_DTYPES]
        if name == "ldexp":
            candidates += [(f, e) for f in ("float16", "bfloat16", "float32", "float64") for e in ("int32", "int64")]
        if name in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"):
            candidates += [("int64", "uint64"), ("uint64", "int64")]
        for ops in candidates:
            try:
                loop_in, loop_out = resolve(name, ops)
            except UfuncTypeError:
                continue
            loops[(name, loop_in)] = loop_out
    return loops


# ------------------------------------------------------------------------------------------------ the table
def test_supported_is_every_elementwise_numpy_ufunc():
    numpy_ufuncs = {u.__name__: u for u in vars(np).values() if isinstance(u, np.ufunc)}
    for name, (nin, nout) in SUPPORTED.items():
        assert (numpy_ufuncs[name].nin, numpy_ufuncs[name].nout) == (nin, nout), name
    # A ufunc a new NumPy adds must be decided on, not silently missing.
    assert set(numpy_ufuncs) == set(SUPPORTED) | set(NOT_SUPPORTED)


# ------------------------------------------------------------------------------------------------ resolution
def _numpy_result(ufunc: np.ufunc, ops: tuple) -> tuple[str, ...] | None:
    """Output dtypes of really calling ``ufunc`` (arrays for dtype names, Python values for weak types)."""
    args = [np.ones(2, dtype=op) if isinstance(op, str) else WEAK_VALUE[op] for op in ops]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            out = ufunc(*args)
        except TypeError:
            return None
    outs = out if isinstance(out, tuple) else (out,)
    return tuple(np.asarray(o).dtype.name for o in outs)


@pytest.mark.parametrize("name", sorted(SUPPORTED))
def test_resolve_matches_numpy_over_the_dtype_matrix(name):
    ufunc = getattr(np, name)
    nin = SUPPORTED[name][0]
    checked = 0
    for ops in itertools.product(NUMPY_DTYPES + WEAK, repeat=nin):
        if all(op in WEAK for op in ops):
            continue  # NumPy computes on Python scalars only outside any array: not a kernel
        expected = _numpy_result(ufunc, ops)
        if expected is None:
            with pytest.raises(UfuncTypeError, match=f"ufunc '{name}' not supported for the input types"):
                resolve(name, ops)
            continue
        loop_in, loop_out = resolve(name, ops)
        assert loop_out == expected, (name, ops)
        # The loop is a fixed point: emit() re-resolves it, and the inputs only widen.
        assert resolve(name, loop_in) == (loop_in, loop_out), (name, ops)
        for op, dt in zip(ops, loop_in):
            if isinstance(op, str):
                assert np.can_cast(op, dt, "same_kind") or name in ("logical_and", "logical_or", "logical_xor", "logical_not"), (name, ops, loop_in)
        checked += 1
    assert checked > 0


@pytest.mark.parametrize("name", sorted(SUPPORTED))
def test_bfloat16_follows_float16_rules(name):
    nin = SUPPORTED[name][0]
    for ops in itertools.product(("bfloat16", "float16", "int8", "int16", "float32", "complex64", int, float), repeat=nin):
        if "bfloat16" not in ops:
            continue
        if "float16" in ops:
            stand_in = tuple("float32" if op in ("bfloat16", "float16") else op for op in ops)
            expected = _resolved_or_none(name, stand_in)
        else:
            stand_in = tuple("float16" if op == "bfloat16" else op for op in ops)
            got = _resolved_or_none(name, stand_in)
            expected = None if got is None else tuple(tuple("bfloat16" if d == "float16" else d for d in part) for part in got)
        assert _resolved_or_none(name, ops) == expected, (name, ops)


def _resolved_or_none(name, ops):
    try:
        return resolve(name, ops)
    except UfuncTypeError:
        return None


def test_bfloat16_examples():
    assert resolve("add", ["bfloat16", "bfloat16"]) == (("bfloat16", "bfloat16"), ("bfloat16",))
    assert resolve("add", ["bfloat16", float]) == (("bfloat16", "bfloat16"), ("bfloat16",))
    assert resolve("add", ["bfloat16", "int8"]) == (("bfloat16", "bfloat16"), ("bfloat16",))
    assert resolve("add", ["bfloat16", "int16"]) == (("float32", "float32"), ("float32",))
    assert resolve("multiply", ["bfloat16", "float16"]) == (("float32", "float32"), ("float32",))
    assert resolve("frexp", ["bfloat16"]) == (("bfloat16",), ("bfloat16", "int32"))
    assert resolve("isnan", ["bfloat16"]) == (("bfloat16",), ("bool",))
    assert resolve("sin", ["int8"]) == (("float16",), ("float16",))  # no bfloat16 operand: NumPy's float16


def test_resolve_weak_scalars_and_dtype_argument():
    assert resolve("add", ["int8", int]) == (("int8", "int8"), ("int8",))
    assert resolve("add", ["uint8", float]) == (("float64", "float64"), ("float64",))
    assert resolve("add", ["float32", complex]) == (("complex64", "complex64"), ("complex64",))
    assert resolve("true_divide", ["int16", "int16"]) == (("float64", "float64"), ("float64",))
    assert resolve("abs", ["complex128"]) == (("complex128",), ("float64",))
    assert resolve("add", ["int8", "int8"], dtype="float32") == (("float32", "float32"), ("float32",))
    assert resolve("ldexp", ["float32", int]) == (("float32", "int32"), ("float32",))
    assert resolve("equal", ["int8", "uint64"]) == (("int64", "uint64"), ("bool",))


@pytest.mark.parametrize(("name", "ops"), [
    ("bitwise_and", ["float32", "float32"]), ("invert", ["float64"]), ("subtract", ["bool", "bool"]),
    ("negative", ["bool"]), ("arctan2", ["complex64", "complex64"]), ("left_shift", ["uint64", "int64"]),
    ("ldexp", ["float32", "uint64"]), ("gcd", ["float32", "int8"]),
])
def test_missing_loops_raise_a_type_error_naming_ufunc_and_dtypes(name, ops):
    with pytest.raises(UfuncTypeError, match=f"ufunc '{name}' not supported for the input types") as info:
        resolve(name, ops)
    assert isinstance(info.value, KspecTypeError) and isinstance(info.value, TypeError)
    for op in ops:
        assert op in str(info.value)


def test_bad_arguments():
    with pytest.raises(KspecValueError, match="matmul.*not elementwise"):
        resolve("matmul", ["float32", "float32"])
    with pytest.raises(KspecValueError, match="not a NumPy ufunc"):
        resolve("frobnicate", ["float32"])
    with pytest.raises(KspecTypeError, match="takes 2 operand"):
        resolve("add", ["float32"])
    with pytest.raises(KspecTypeError, match="operand 0"):
        resolve("sin", ["float128"])
    with pytest.raises(UfuncTypeError, match="no loop"):
        emit("add", ["int8", "int8"], ["int16"], ["a", "b"])
    with pytest.raises(KspecTypeError, match="2 input"):
        emit("add", ["int8", "int8"], ["int8"], ["a"])


# ------------------------------------------------------------------------------------------------ casts, literals
def test_cast_and_literal_text():
    assert cast("x", "float32", "float32") == "x"
    assert cast("x", "float64", "bool") == "(x != 0)"
    assert cast("z", "complex64", "float32") == "(z).real()"
    assert cast("z", "complex128", "int8") == "kspec::uf::float_to_int<signed char>((z).real())"
    assert literal(True, "bool") == "true"
    assert literal(-2**63, "int64") == "(-9223372036854775807LL - 1LL)"
    assert literal(2**64 - 1, "uint64") == "18446744073709551615ULL"
    assert literal(0.1, "float16") == "__float2half_rn(0.099975586f)"  # rounded once, from the double
    assert literal(float("-inf"), "float32") == "(-__int_as_float(0x7f800000))"
    with pytest.raises(KspecOverflowError, match="out of bounds for int8"):
        literal(128, "int8")
    with pytest.raises(KspecTypeError):
        literal(1.5, "int32")


def test_bfloat16_literal_rounds_half_to_even():
    # 1 + 2**-8 lies halfway between bfloat16 neighbours 1 and 1 + 2**-7: ties go to the even one (1).
    assert literal(1 + 2**-8, "bfloat16") == "__float2bfloat16_rn(1.0f)"
    assert literal(1 + 3 * 2**-8, "bfloat16") == "__float2bfloat16_rn(1.015625f)"
    assert literal(3.5e38, "bfloat16") == "__ushort_as_bfloat16((unsigned short)0x7f80U)"


def test_headers_name_the_heavy_types():
    assert headers(["float32", "int8"]) == "#include <kspec/ufunc.cuh>"
    text = headers(["float16", "complex128"])
    assert "#include <kspec/ufunc.cuh>" in text and "__half" in text and "complex<" in text


# ------------------------------------------------------------------------------------------------ NVRTC


def _compile(name: str, source: str, needs) -> None:
    program = compile_source(source, name=name, options=CompileOptions(arch="sm_90"), needs=needs)
    assert "warning" not in program.log.lower(), program.log


def _groups() -> dict[str, list[tuple[str, tuple[str, ...], tuple[str, ...]]]]:
    groups: dict[str, list] = {}
    for (name, loop_in), loop_out in every_loop().items():
        groups.setdefault(loop_in[0], []).append((name, loop_in, loop_out))
    return groups


@pytest.mark.parametrize("group", ALL_DTYPES)
def test_every_loop_compiles_with_exact_types(group):
    """One kernel per first-operand dtype holds every loop of every ufunc; static_assert checks each
    expression's C type against the loop's output dtype."""
    loops = _groups()[group]
    used: set[str] = set()
    lines = []
    for k, (name, loop_in, loop_out) in enumerate(loops):
        used |= set(loop_in) | set(loop_out)
        exprs = emit(name, loop_in, loop_out, [f"v_{d}" for d in loop_in])
        for j, (expr, out) in enumerate(zip(exprs, loop_out)):
            c_type = BY_NAME[out].c_type
            lines.append(f"KSPEC_CHECK({c_type}, {expr});")
            lines.append(f"p_{out}[{k * 2 + j}] = {expr};  // {name}")
    assert len({name for name, _, _ in loops}) >= 10
    source, needs = kernel_source(f"ufuncs_{group}", used, lines)
    _compile(f"ufuncs_{group}", source, needs)


def test_every_cast_and_literal_compiles_with_exact_types():
    lines = []
    for src, dst in itertools.product(ALL_DTYPES, repeat=2):
        expr = cast(f"v_{src}", src, dst)
        lines.append(f"KSPEC_CHECK({BY_NAME[dst].c_type}, {expr}); p_{dst}[1] = {expr};")
    values = [True, 0, -1, 7, 0.5, -0.0, 1e-30, 3.4e38, float("inf"), float("-inf"), float("nan"), 1.5 - 2j]
    for dst in ALL_DTYPES:
        for value in values:
            try:
                expr = literal(value, dst)
            except (KspecTypeError, KspecOverflowError):
                continue
            lines.append(f"KSPEC_CHECK({BY_NAME[dst].c_type}, {expr}); p_{dst}[2] = {expr};")
    for dst in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
        info = np.iinfo(dst)
        for value in (int(info.min), int(info.max)):
            lines.append(f"KSPEC_CHECK({BY_NAME[dst].c_type}, {literal(value, dst)});")
    source, needs = kernel_source("casts", set(ALL_DTYPES), lines)
    _compile("casts", source, needs)


def test_plain_float32_kernel_does_not_pull_heavy_headers():
    source, needs = kernel_source("plain", {"float32", "bool", "int32"}, [
        f"p_float32[0] = {emit('floor_divide', ['float32', 'float32'], ['float32'], ['v_float32', 'v_float32'])[0]};",
        f"p_bool[0] = {emit('isnan', ['float32'], ['bool'], ['v_float32'])[0]};",
    ])
    assert needs == () and "KSPEC_NEED" not in source
    _compile("plain", source, needs)  # ufunc.cuh's fp16/bf16/complex parts stay out without the macros


def test_fused_style_elementwise_spec_renders_and_compiles():
    """The lead's path: an ElementwiseSpec whose preamble is headers(); an int8 -> float16 -> float32
    chain needs the fp16 parts although no operand is float16 (the preamble names __half)."""
    from kspec.render import render, specialize
    from kspec.render._variants import VariantKey, name_expression
    from kspec.spec import ElementwiseSpec

    (h_in, h_out) = resolve("sin", ["int8"])
    t0 = cast("x", "int8", h_in[0])
    t1 = emit("sin", h_in, h_out, ["t0"])[0]
    spec = ElementwiseSpec(
        name="fused_sin", in_params="int8 x", out_params="float32 y",
        operation=f"const __half t0 = {t0};\nconst __half t1 = {t1};\ny = {cast('t1', 'float16', 'float32')}",
        preamble=headers(["int8", "float16", "float32"]),
    )
    s = specialize(spec)
    assert "fp16" in s.needs
    module = render(s)
    name = name_expression(module.name, VariantKey("contig", "int32", 0, 1))
    program = compile_source(module.source, name=module.name, options=CompileOptions(arch="sm_90"),
                             name_expressions=[name], needs=module.needs)
    assert program.lowered_names[name]
