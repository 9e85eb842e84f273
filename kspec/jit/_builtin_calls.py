"""The C++ of the larger builtins: range loops, atomics, warp shuffles, math functions."""

from __future__ import annotations

import ast
from typing import Any

from ._errors import JitTypeError, JitUnsupportedError
from ._types import BOOL, FLOAT32, FLOAT64, INT64, UINT32, Array, Shared, can_hold, common_type, scalar_of
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
    typed = [v for v in (start, stop, step) if not isinstance(v, Const)]
    for v in (start, stop, step):
        if isinstance(v, Const) and not (isinstance(v.value, int) or (is_number(v.value) and scalar_of(type(v.value)).is_int)):
            raise tr.error(JitTypeError, call, f"range() takes integers, got {v.value!r}")
    values = [tr.scalar(v, call, None) for v in typed]
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
    var = tr.bindings[name].code
    # A counter narrower than 64 bits runs as a hidden signed 64-bit one: Python's range never wraps around,
    # and a signed counter (whose overflow is undefined) lets NVCC unroll and pipeline the loop, which an
    # unsigned 32-bit one, bound to wrap, does not (a grid-stride copy: 0.78 -> 0.88 of copy bandwidth, H100).
    wide = declared.is_int and declared.itemsize < 8
    counter = tr.temp("r") if wide else var
    counter_type = "long long" if wide else declared.ctype
    codes = []
    for v in (start, stop, step):
        code = tr.scalar(v, call, declared).code if isinstance(v, Const) else cast(tr.scalar(v, call, None), declared)
        codes.append(f"static_cast<long long>({code})" if wide and not isinstance(v, Const) else code)
    start_code, stop_code, step_code = codes
    if isinstance(step, Const):
        if int(step.value) == 0:
            raise tr.error(JitTypeError, call, "range() step must not be zero")
        test = f"{counter} < {{stop}}" if int(step.value) > 0 else f"{counter} > {{stop}}"
    elif declared.kind == "u":
        test = f"{counter} < {{stop}}"
    else:
        test = f"({{step}} > 0 ? {counter} < {{stop}} : {counter} > {{stop}})"
    tr.emit("{", node)
    tr.indent += 1
    if not isinstance(stop, Const):
        stop_name = tr.temp("stop")
        tr.emit(f"const {counter_type} {stop_name} = {stop_code};")
        stop_code = stop_name
    if not isinstance(step, Const):
        step_name = tr.temp("step")
        tr.emit(f"const {counter_type} {step_name} = {step_code};")
        step_code = step_name
    pragma = _unroll_pragma(tr, unroll, call)
    if pragma:
        tr.emit(pragma)
    head = f"{counter_type} {counter}" if wide else var
    tr.emit(f"for ({head} = {start_code}; {test.format(stop=stop_code, step=step_code)}; {counter} += {step_code}) {{")
    if wide:
        tr.indent += 1
        tr.emit(f"{var} = static_cast<{declared.ctype}>({counter});")
        tr.indent -= 1
    tr.block(node.body)
    tr.emit("}")
    tr.indent -= 1
    tr.emit("}")


def _unroll_pragma(tr: Any, unroll: Any, node: ast.AST) -> str:
    if not isinstance(unroll, Const):
        raise tr.error(JitTypeError, node, "unroll= must be known at compile time (None, True, False or an int)")
    value = unroll.value
    if value is None:
        return ""
    if value is True:
        return "#pragma unroll"
    if value is False:
        return "#pragma unroll 1"
    if isinstance(value, int) and value >= 1:
        return f"#pragma unroll {value}"
    raise tr.error(JitTypeError, node, f"unroll= must be None, True, False or a positive int, got {value!r}")


# -- atomics -----------------------------------------------------------------------------------------------

# dtypes each atomic takes; those in _VIA_ULL go through an unsigned long long* cast (same bits).
ATOMIC_TYPES = {
    "add": ("int32", "uint32", "int64", "uint64", "float16", "float32", "float64"),
    "sub": ("int32", "uint32", "int64", "uint64", "float32", "float64"),
    "exch": ("int32", "uint32", "int64", "uint64", "float32"),
    "min": ("int32", "uint32", "int64", "uint64"),
    "max": ("int32", "uint32", "int64", "uint64"),
    "inc": ("uint32",),
    "dec": ("uint32",),
    "cas": ("int32", "uint32", "int64", "uint64"),
    "and": ("int32", "uint32", "int64", "uint64"),
    "or": ("int32", "uint32", "int64", "uint64"),
    "xor": ("int32", "uint32", "int64", "uint64"),
}
_VIA_ULL = {"add": {"int64"}, "sub": set(), "exch": {"int64"}, "cas": {"int64"}, "and": {"int64"}, "or": {"int64"}, "xor": {"int64"}}


def _element(tr: Any, array: Any, index: Any, node: ast.AST) -> ScalarValue:
    if not (isinstance(array, Value) and isinstance(array.type, (Array, Shared))):
        raise tr.error(JitTypeError, node, "the first argument of an atomic must be an array or shared memory")
    indices = list(index.items) if isinstance(index, TupleValue) else [index]
    codes = []
    for item in indices:
        value = const_to_value(item, INT64) if isinstance(item, Const) else tr.scalar(item, node, None)
        if not value.type.is_int:
            raise tr.error(JitTypeError, node, f"atomic index must be an integer, got {value.type}")
        codes.append(value.code)
    t = array.type
    ndim = 1 if isinstance(t, Shared) else t.ndim
    if len(codes) != ndim:
        raise tr.error(JitTypeError, node, f"a {ndim}-d array takes {ndim} indices, got {len(codes)}")
    code = f"{array.code}[{codes[0]}]" if ndim == 1 else f"{array.code}({', '.join(codes)})"
    return Value(code, t.dtype)


def atomic(tr: Any, op: str, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> ScalarValue:
    count = 4 if op == "cas" else 3
    if kwargs or len(args) != count:
        spelled = "atomic_cas(array, index, compare, value)" if op == "cas" else f"atomic_{op}(array, index, value)"
        raise tr.error(JitTypeError, node, f"{spelled}: takes {count} positional arguments")
    element = _element(tr, args[0], args[1], node)
    t = element.type
    if t.name not in ATOMIC_TYPES[op]:
        raise tr.error(JitTypeError, node, f"atomic_{op} is not available for {t} in CUDA (it takes: {', '.join(ATOMIC_TYPES[op])})")
    operands = [cast(tr.scalar(a, node, t), t) for a in args[2:]]
    address = f"&{element.code}"
    if t.name in _VIA_ULL.get(op, set()):
        ull = "unsigned long long"
        address = f"reinterpret_cast<{ull}*>({address})"
        operands = [f"static_cast<{ull}>({o})" for o in operands]
    if op == "sub" and t.name not in ("int32", "uint32"):
        fn, operands = "atomicAdd", [f"({t.ctype})(-{operands[0]})"]
        if t.name == "int64":
            address = f"reinterpret_cast<unsigned long long*>(&{element.code})"
            operands = [f"static_cast<unsigned long long>(-{cast(tr.scalar(args[2], node, t), t)})"]
        elif t.name == "uint64":
            operands = [f"(0ULL - {cast(tr.scalar(args[2], node, t), t)})"]
    else:
        fn = "atomic" + {"exch": "Exch", "cas": "CAS"}.get(op, op.title())
    code = f"{fn}({address}, {', '.join(operands)})"
    if "reinterpret_cast<unsigned long long*>" in address:
        code = f"static_cast<{t.ctype}>({code})"
    return Value(code, t)


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
