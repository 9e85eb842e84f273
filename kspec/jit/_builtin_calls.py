"""The C++ of the larger builtins: range loops, warp shuffles, math functions (atomics: _atomics.py; cooperative
groups: _groups.py)."""

from __future__ import annotations

import ast
from typing import Any

from ._errors import JitTypeError, JitUnsupportedError
from ._types import BOOL, FLOAT32, FLOAT64, INT64, UINT64, UINT32, Array, Shared, can_hold, common_type, scalar_of
from ._values import Const, ScalarValue, TupleValue, Value, cast, const_to_value, is_number

# -- range loops -----------------------------------------------------------------------------------------


def emit_range_loop(tr: Any, node: ast.For) -> None:
    """``for i in range(start, stop, step, unroll=...)`` -> a C++ for loop (stop and step evaluated once)."""
    call = node.iter
    assert isinstance(call, ast.Call)
    args = [tr.expr(a) for a in call.args]
    kwargs = {k.arg: tr.expr(k.value) for k in call.keywords}
    unroll = kwargs.pop("unroll", Const(None))
    if kwargs or not 1 <= len(args) <= 3:
        raise tr.error(JitTypeError, call, "range(stop), range(start, stop) or range(start, stop, step), with unroll= as the only keyword")
    start, stop, step = (Const(0), args[0], Const(1)) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else Const(1))
    assert isinstance(node.target, ast.Name)  # stmt_For checked it
    name = node.target.id
    for v in (start, stop, step):
        if isinstance(v, Const) and not (isinstance(v.value, int) or (is_number(v.value) and scalar_of(type(v.value)).is_int)):
            raise tr.error(JitTypeError, call, f"range() takes integers, got {v.value!r}")
    bounds = [v if isinstance(v, Const) else tr.scalar(v, call, None) for v in (start, stop, step)]
    values = [v for v in bounds if not isinstance(v, Const)]
    for v in values:
        if not v.type.is_int:
            raise tr.error(JitTypeError, call, f"range() takes integers, got a {v.type}")
    declared = tr.local_types.get(name)
    if values:
        loop_type = values[0].type
        for v in values[1:]:
            loop_type = common_type(loop_type, v.type)
    else:
        loop_type = declared or INT64
    if declared is None:
        tr.declare_local(name, loop_type, node)
        declared = loop_type
    elif not can_hold(declared, loop_type) and values:
        raise tr.error(JitTypeError, node.target, f"loop variable {name!r} is {declared} (fixed earlier) but range() yields {loop_type}")
    if isinstance(step, Const) and int(step.value) == 0:
        raise tr.error(JitTypeError, call, "range() step must not be zero")
    var = tr.bindings[name].code
    # The loop runs a signed 64-bit counter from 0 to the trip count, computed once, and derives the Python
    # variable from it. NVCC unrolls and pipelines such a loop whatever the bounds' types; `i += step` with
    # `i < stop` in an unsigned (wrapping) or narrow type it does not: a grid-stride copy measured 0.71-0.87
    # of copy bandwidth that way, 0.91 this way (H200, benchmarks/NOTES.md). The bounds are compared in a
    # 64-bit type that holds them all, as Python compares them (a negative int32 stop means no iteration).
    range_type = INT64 if all(map(_fits_int64, bounds)) else UINT64
    rt = range_type.ctype
    codes = [tr.scalar(v, call, range_type).code if isinstance(v, Const) else f"static_cast<{rt}>({v.code})" for v in bounds]
    tr.emit("{", node)
    tr.indent += 1
    counter = tr.temp("k")
    if all(isinstance(v, Const) for v in bounds):  # a constant trip count: NVCC unrolls it fully on request
        length, first, stride = str(len(range(*(int(v.value) for v in bounds)))), f"({codes[0]})", f"({codes[2]})"
    else:
        first, stop_name, stride = (tr.temp(stem) for stem in ("start", "stop", "step"))
        for name_, code in zip((first, stop_name, stride), codes):
            tr.emit(f"const {rt} {name_} = {code};")
        length = tr.temp("n")
        tr.emit(f"const long long {length} = kspec_jit::range_length<{rt}>({first}, {stop_name}, {stride});")
    pragma = _unroll_pragma(tr, unroll, call)
    if pragma:
        tr.emit(pragma)
    tr.emit(f"for (long long {counter} = 0; {counter} < {length}; ++{counter}) {{")
    tr.indent += 1
    index = counter if range_type == INT64 else f"static_cast<{rt}>({counter})"
    tr.emit(f"{var} = static_cast<{declared.ctype}>({first} + {index} * {stride});")
    tr.indent -= 1
    tr.block(node.body)
    tr.emit("}")
    tr.indent -= 1
    tr.emit("}")


def _fits_int64(bound: Const | ScalarValue) -> bool:
    """Every value of a range() bound converts to int64 (false only for uint64 and huge constants)."""
    if isinstance(bound, Const):
        return -(1 << 63) <= int(bound.value) < (1 << 63)
    return can_hold(INT64, bound.type)


def _unroll_pragma(tr: Any, unroll: Any, node: ast.AST) -> str:
    if not isinstance(unroll, Const):
        raise tr.error(JitTypeError, node, "unroll= must be known at compile time (None, True, False or an int)")
    value = unroll.value
    if value is None:
        return ""
    if value is True:
        return "#pragma unroll"
    if value is False:
        return "#pragma unroll(1)"
    if isinstance(value, int) and value >= 1:
        return f"#pragma unroll({value})"
    raise tr.error(JitTypeError, node, f"unroll= must be None, True, False or a positive int, got {value!r}")


# -- array elements (atomics, memcpy_async) ---------------------------------------------------------------


def element(tr: Any, array: Any, index: Any, node: ast.AST, what: str) -> ScalarValue:
    """``array[index]`` (an int, or a tuple of ints for an n-d array) of an array or shared memory, as the
    atomics and ``cg.memcpy_async`` take it; ``what`` names the argument in errors."""
    if not (isinstance(array, Value) and isinstance(array.type, (Array, Shared))):
        raise tr.error(JitTypeError, node, f"{what} must be an array or shared memory")
    indices = list(index.items) if isinstance(index, TupleValue) else [index]
    codes = []
    for item in indices:
        value = const_to_value(item, INT64) if isinstance(item, Const) else tr.scalar(item, node, None)
        if not value.type.is_int:
            raise tr.error(JitTypeError, node, f"the index of {what} must be an integer, got {value.type}")
        codes.append(value.code)
    t = array.type
    ndim = 1 if isinstance(t, Shared) else t.ndim
    if len(codes) != ndim:
        raise tr.error(JitTypeError, node, f"{what}: a {ndim}-d array takes {ndim} indices, got {len(codes)}")
    code = f"{array.code}[{codes[0]}]" if ndim == 1 else f"{array.code}({', '.join(codes)})"
    return Value(code, t.dtype)


# -- warp shuffles -------------------------------------------------------------------------------------------

_SHUFFLE_TYPES = ("int32", "uint32", "int64", "uint64", "float16", "float32", "float64")


def shuffle(tr: Any, kind: str, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> ScalarValue:
    width = kwargs.pop("width", args[3] if len(args) == 4 else Const(32))
    if kwargs or len(args) not in (3, 4):
        raise tr.error(JitTypeError, node, f"shfl_{kind}sync(mask, value, {'delta' if kind in ('up_', 'down_') else 'lane'}, width=32)")
    mask = cast(tr.scalar(args[0], node, UINT32), UINT32)
    value = tr.scalar(args[1], node, None)
    if value.type.name not in _SHUFFLE_TYPES:
        raise tr.error(JitTypeError, node, f"shfl_{kind}sync is not available for {value.type} (it takes: {', '.join(_SHUFFLE_TYPES)})")
    lane_type = UINT32 if kind in ("up_", "down_") else scalar_of("int32")
    lane = cast(tr.scalar(args[2], node, lane_type), lane_type)
    width_code = cast(tr.scalar(width, node, scalar_of("int32")), scalar_of("int32"))
    return Value(f"__shfl_{kind}sync({mask}, {value.code}, {lane}, {width_code})", value.type)


# -- math ------------------------------------------------------------------------------------------------

_UNARY = {
    "sqrt": "sqrt", "exp": "exp", "log": "log", "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin",
    "arcsin": "asin", "acos": "acos", "arccos": "acos", "atan": "atan", "arctan": "atan", "sinh": "sinh",
    "cosh": "cosh", "tanh": "tanh", "asinh": "asinh", "arcsinh": "asinh", "acosh": "acosh", "arccosh": "acosh",
    "atanh": "atanh", "arctanh": "atanh", "floor": "floor", "ceil": "ceil", "trunc": "trunc", "exp2": "exp2",
    "log2": "log2", "log10": "log10", "log1p": "log1p", "expm1": "expm1", "erf": "erf", "erfc": "erfc",
    "lgamma": "lgamma", "gamma": "tgamma", "cbrt": "cbrt", "rint": "rint", "fabs": "fabs", "absolute": "fabs",
    "abs": "fabs",
}
_BINARY = {"atan2": "atan2", "arctan2": "atan2", "hypot": "hypot", "pow": "pow", "power": "pow",
           "copysign": "copysign", "fmod": "fmod"}
_PREDICATES = {"isnan": "isnan", "isinf": "isinf", "isfinite": "isfinite"}
_COMPLEX_OK = {"sqrt", "exp", "log", "sin", "cos", "tan", "sinh", "cosh", "tanh", "abs", "absolute", "log10"}


def math_call(tr: Any, name: str, args: list[Any], node: ast.AST) -> Any:
    arity = 2 if name in _BINARY else 1
    if name not in _UNARY and name not in _BINARY and name not in _PREDICATES and name not in ("square", "negative", "sign", "reciprocal", "radians", "degrees", "deg2rad", "rad2deg"):
        raise tr.error(JitUnsupportedError, node, f"the function {name!r} is not supported in jit kernels")
    if len(args) != arity:
        raise tr.error(JitTypeError, node, f"{name}() takes {arity} argument(s), got {len(args)}")
    values = [tr.scalar(a, node, None) for a in args if not isinstance(a, Const)]
    anchor = values[0].type if values else None
    values = [tr.scalar(a, node, anchor) for a in args]
    t = values[0].type
    for v in values[1:]:
        t = common_type(t, v.type)
    if name == "abs" and t.is_int:
        if t.kind == "u" or t.kind == "b":
            return values[0]
        fn = "llabs" if t.itemsize == 8 else "abs"
        return Value(f"{fn}({cast(values[0], t)})", t)
    if name == "square":
        v = values[0]
        return tr.binary(ast.Mult(), v, v, node)
    if name == "negative":
        return Value(f"(-{values[0].code})", t)
    if t.kind == "c":
        if name not in _COMPLEX_OK:
            raise tr.error(JitTypeError, node, f"{name}() of a complex number is not supported")
        if name in ("abs", "absolute"):
            part = FLOAT64 if t.name == "complex128" else FLOAT32
            return Value(f"abs({values[0].code})", part)
        return Value(f"{name}({values[0].code})", t)
    # Integers compute in float64 (as Python's math does); float16 in float32, converted back.
    compute = FLOAT64 if (t.is_int or t.kind == "b") else (FLOAT32 if t.itemsize <= 4 else FLOAT64)
    result = t if t.is_float else FLOAT64
    operands = [cast(v, compute) for v in values]
    if name in _PREDICATES:
        return Value(f"{_PREDICATES[name]}({operands[0]})", BOOL)
    if name == "sign":
        x = operands[0]
        code = f"(({x} > 0) - ({x} < 0))"
        return Value(f"static_cast<{result.ctype}>({code})", result) if result != compute else Value(f"static_cast<{compute.ctype}>{code}", compute)
    if name == "reciprocal":
        code = f"({'1.0f' if compute == FLOAT32 else '1.0'} / {operands[0]})"
    elif name in ("radians", "deg2rad", "degrees", "rad2deg"):
        factor = "0.017453292519943295" if name in ("radians", "deg2rad") else "57.29577951308232"
        code = f"({operands[0]} * {factor}{'f' if compute == FLOAT32 else ''})"
    else:
        base = _UNARY.get(name) or _BINARY[name]
        fn = base + "f" if compute == FLOAT32 else base
        code = f"{fn}({', '.join(operands)})"
    return Value(code if compute == result else cast(Value(code, compute), result), result)
