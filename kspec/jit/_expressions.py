"""Expressions: operators with C++ semantics, names, attributes, subscripts and calls.

Where C++ and Python differ, kernels follow C++ (and kspec documents it): ``//`` and ``%`` of integers
truncate toward zero (Python floors), ``%`` of floats is ``fmod``; ``/`` is true division (ints -> float64);
``**`` is ``pow`` for floats and exact integer power for integers; ``and``/``or`` give bools; integers wrap.
"""

from __future__ import annotations

import ast
import operator
from typing import Any, Callable

import numpy as np

from ._builtins import call
from ._errors import JitTypeError, JitUnsupportedError
from ._function_state import FunctionState
from ._groups import GroupMethod
from ._markers import Dim3, dim3_attribute, lift
from ._types import BOOL, FLOAT32, FLOAT64, INT64, UINT32, Array, Dim3Type, Group, JitType, Scalar, Shared, common_type
from ._values import Const, ScalarValue, TupleValue, Value, cast, const_to_value, is_number

_BINARY = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
    ast.LShift: "<<", ast.RShift: ">>",
}
_COMPARE = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_FOLD = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow, ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
}


class ExpressionTranslator(FunctionState):
    """Base of StatementTranslator (and so of FunctionTranslator): everything that yields a value."""

    def expr(self, node: ast.expr) -> Any:
        method = getattr(self, f"expr_{type(node).__name__}", None)
        if method is None:
            raise self.error(JitUnsupportedError, node, f"{type(node).__name__} expressions are not supported in jit kernels")
        return method(node)

    def scalar(self, value: Any, node: ast.AST, against: Scalar | None) -> ScalarValue:
        """``value`` as a typed scalar expression (a literal takes ``against``'s kind)."""
        if isinstance(value, Const) and is_number(value.value):
            result = const_to_value(value, against)
            self.module.note_type(result.type)
            return result
        if isinstance(value, Value) and isinstance(value.type, Scalar):
            return value
        what = "a tuple" if isinstance(value, TupleValue) else (
            f"a {value.type}" if isinstance(value, Value) else f"the Python object {value.value!r}")
        raise self.error(JitTypeError, node, f"expected a scalar value here, got {what}")

    def condition(self, node: ast.expr) -> Any:
        value = self.expr(node)
        if isinstance(value, Const) and is_number(value.value):
            return Const(bool(value.value))
        value = self.scalar(value, node, None)
        return Value(cast(value, BOOL) if value.type.name == "float16" else value.code, BOOL)

    # -- leaves ------------------------------------------------------------------------------------------

    def expr_Constant(self, node: ast.Constant) -> Any:
        if node.value is None or isinstance(node.value, str):
            return Const(node.value)
        return Const(node.value)

    def expr_Name(self, node: ast.Name) -> Any:
        return self.lookup(node.id, node)

    def expr_Tuple(self, node: ast.Tuple) -> TupleValue:
        return TupleValue(tuple(self.expr(e) for e in node.elts))

    # -- operators ---------------------------------------------------------------------------------------

    def expr_BinOp(self, node: ast.BinOp) -> Any:
        return self.binary(node.op, self.expr(node.left), self.expr(node.right), node)

    def binary(self, op: ast.operator, left: Any, right: Any, node: ast.AST) -> Any:
        if isinstance(left, Const) and isinstance(right, Const) and is_number(left.value) and is_number(right.value):
            try:
                with np.errstate(all="ignore"):  # NumPy scalars wrap as the device would
                    return Const(_FOLD[type(op)](left.value, right.value))  # constant folding
            except (KeyError, ZeroDivisionError, OverflowError, ValueError):
                pass
        if isinstance(left, Value) and isinstance(left.type, (Array, Shared)) or isinstance(right, Value) and isinstance(right.type, (Array, Shared)):
            raise self.error(JitTypeError, node, "arrays have no arithmetic in jit kernels (index them: x[i] + y[i])")
        a = self.scalar(left, node, right.type if isinstance(right, Value) and isinstance(right.type, Scalar) else None)
        b = self.scalar(right, node, a.type)
        if isinstance(left, Const):
            a = self.scalar(left, node, b.type)
        t = common_type(a.type, b.type)
        compute = FLOAT32 if t.name == "float16" and not isinstance(op, (ast.Add, ast.Sub, ast.Mult, ast.Div)) else t
        if isinstance(op, ast.Div):
            if t.is_int or t.kind == "b":
                t = compute = FLOAT64  # true division, as in Python
            return Value(f"({cast(a, compute)} / {cast(b, compute)})", t)
        if isinstance(op, ast.FloorDiv):
            if t.is_int:
                return Value(f"({a.code} / {b.code})", t)  # C++: truncates toward zero
            fn = "floorf" if compute == FLOAT32 else "floor"
            return Value(self.back(f"{fn}({cast(a, compute)} / {cast(b, compute)})", compute, t), t)
        if isinstance(op, ast.Mod):
            if t.is_int:
                return Value(f"({a.code} % {b.code})", t)  # C++: the sign of the dividend
            fn = "fmodf" if compute == FLOAT32 else "fmod"
            return Value(self.back(f"{fn}({cast(a, compute)}, {cast(b, compute)})", compute, t), t)
        if isinstance(op, ast.Pow):
            if t.is_int:
                return Value(f"kspec_jit::ipow<{t.ctype}>({cast(a, t)}, {cast(b, t)})", t)
            if t.kind == "c":
                return Value(f"pow({cast(a, t)}, {cast(b, t)})", t)
            if t.kind == "b":
                t = compute = INT64
                return Value(f"kspec_jit::ipow<long long>({cast(a, t)}, {cast(b, t)})", t)
            fn = "powf" if compute == FLOAT32 else "pow"
            return Value(self.back(f"{fn}({cast(a, compute)}, {cast(b, compute)})", compute, t), t)
        symbol = _BINARY.get(type(op))
        if symbol is None:
            raise self.error(JitUnsupportedError, node, f"the operator {type(op).__name__} is not supported (matrix product?)")
        if symbol in "&|^<<>>" and not (t.is_int or t.kind == "b"):
            raise self.error(JitTypeError, node, f"bitwise {symbol} needs integers, got {a.type} and {b.type}")
        if t.name == "float16":
            return Value(f"({a.code} {symbol} {b.code})", t)
        return Value(f"({self.operand(a, t)} {symbol} {self.operand(b, t)})", t)

    @staticmethod
    def operand(value: ScalarValue, t: Scalar) -> str:
        # half values meeting float/double convert explicitly (cuda_fp16's operators would be ambiguous)
        if isinstance(value.type, Scalar) and value.type.name == "float16" and t.name != "float16":
            return cast(value, t)
        return value.code

    @staticmethod
    def back(code: str, computed: Scalar, wanted: Scalar) -> str:
        return code if computed == wanted else cast(Value(code, computed), wanted)

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Any:
        operand = self.expr(node.operand)
        if isinstance(operand, Const) and is_number(operand.value):
            fold: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_, ast.Invert: operator.invert}
            return Const(fold[type(node.op)](operand.value))
        value = self.scalar(operand, node.operand, None)
        if isinstance(node.op, ast.Not):
            return Value(f"(!{cast(value, BOOL)})", BOOL)
        if isinstance(node.op, ast.Invert):
            if not (value.type.is_int or value.type.kind == "b"):
                raise self.error(JitTypeError, node, f"~ needs an integer, got {value.type}")
            t = common_type(value.type, value.type)
            return Value(f"(~{value.code})", t)
        symbol = "-" if isinstance(node.op, ast.USub) else "+"
        t = common_type(value.type, value.type) if value.type.name != "float16" else value.type
        return Value(f"({symbol}{value.code})", t)

    def expr_BoolOp(self, node: ast.BoolOp) -> Any:
        symbol = " && " if isinstance(node.op, ast.And) else " || "
        parts = [self.condition(v) for v in node.values]
        if all(isinstance(p, Const) for p in parts):
            return Const(all(p.value for p in parts) if symbol == " && " else any(p.value for p in parts))
        codes = [p.code if isinstance(p, Value) else ("true" if p.value else "false") for p in parts]
        return Value(f"({symbol.join(codes)})", BOOL)

    def expr_Compare(self, node: ast.Compare) -> Any:
        pieces: list[Const | Value[JitType]] = []
        left = self.expr(node.left)
        for op, right_node in zip(node.ops, node.comparators):
            right = self.expr(right_node)
            symbol = _COMPARE.get(type(op))
            if isinstance(op, (ast.Is, ast.IsNot)) and isinstance(left, Const) and isinstance(right, Const):
                pieces.append(Const((left.value is right.value) == isinstance(op, ast.Is)))  # `unroll is None`
                left = right
                continue
            if symbol is None:
                raise self.error(JitUnsupportedError, node, f"the comparison {type(op).__name__} is not supported (is / in need Python objects)")
            if isinstance(left, Const) and isinstance(right, Const):
                pieces.append(Const(bool(eval(f"a {symbol} b", {}, {"a": left.value, "b": right.value}))))  # noqa: S307
            else:
                a = self.scalar(left, node, right.type if isinstance(right, Value) and isinstance(right.type, Scalar) else None)
                b = self.scalar(right, node, a.type)
                t = common_type(a.type, b.type)
                pieces.append(Value(f"({self.operand(a, t)} {symbol} {self.operand(b, t)})", BOOL))
            left = right
        if all(isinstance(p, Const) for p in pieces):
            return Const(all(p.value for p in pieces if isinstance(p, Const)))
        return Value("(" + " && ".join(p.code if isinstance(p, Value) else ("true" if p.value else "false") for p in pieces) + ")", BOOL)

    def expr_IfExp(self, node: ast.IfExp) -> Any:
        test = self.condition(node.test)
        if isinstance(test, Const):
            return self.expr(node.body if test.value else node.orelse)
        body, orelse = self.expr(node.body), self.expr(node.orelse)
        a = self.scalar(body, node.body, orelse.type if isinstance(orelse, Value) and isinstance(orelse.type, Scalar) else None)
        b = self.scalar(orelse, node.orelse, a.type)
        if isinstance(body, Const):
            a = self.scalar(body, node.body, b.type)
        t = common_type(a.type, b.type)
        return Value(f"({test.code} ? {cast(a, t)} : {cast(b, t)})", t)

    # -- attributes and subscripts -----------------------------------------------------------------------

    def expr_Attribute(self, node: ast.Attribute) -> Any:
        base = self.expr(node.value)
        attr = node.attr
        if isinstance(base, Const):
            obj = base.value
            if isinstance(obj, Dim3):
                return dim3_attribute(self, obj, attr, node)
            try:
                return lift(getattr(obj, attr))
            except AttributeError:
                raise self.error(JitUnsupportedError, node, f"{type(obj).__name__} object has no attribute {attr!r}") from None
        if isinstance(base, Value) and isinstance(base.type, Array):
            return self.array_attribute(base, attr, node)
        if isinstance(base, Value) and isinstance(base.type, Group):
            return GroupMethod(base, attr)
        if isinstance(base, Value) and isinstance(base.type, Dim3Type):
            if attr not in ("x", "y", "z"):
                raise self.error(JitUnsupportedError, node, f"a dim3 has .x, .y and .z, not .{attr}")
            return Value(f"{base.code}.{attr}", UINT32)
        if isinstance(base, Value) and isinstance(base.type, Scalar) and base.type.kind == "c" and attr in ("real", "imag"):
            part = FLOAT64 if base.type.name == "complex128" else FLOAT32
            return Value(f"{base.code}.{attr}()", part)
        raise self.error(JitUnsupportedError, node, f"attribute {attr!r} is not supported on a {self.describe_value(base)}")

    def array_attribute(self, array: Value[JitType], attr: str, node: ast.AST) -> Any:
        t = array.type
        assert isinstance(t, Array)
        if attr == "ndim":
            return Const(t.ndim)
        if attr == "size":
            return Value(f"{array.code}.size()", INT64)
        if attr == "shape":
            return TupleValue(tuple(Value(f"{array.code}.shape[{k}]", INT64) for k in range(t.ndim)))
        if attr == "strides":
            return TupleValue(tuple(Value(f"{array.code}.strides[{k}]", INT64) for k in range(t.ndim)))
        if attr == "dtype":
            return Const(np.dtype(t.dtype.name))
        raise self.error(JitUnsupportedError, node, f"arrays in jit kernels have .shape, .strides, .size, .ndim and .dtype, not .{attr}")

    @staticmethod
    def describe_value(value: Any) -> str:
        if isinstance(value, Value):
            return str(value.type)
        if isinstance(value, TupleValue):
            return "tuple"
        return type(value.value).__name__

    def expr_Subscript(self, node: ast.Subscript) -> Any:
        base = self.expr(node.value)
        if isinstance(node.slice, ast.Slice):
            raise self.error(JitUnsupportedError, node, "slices are not supported in jit kernels; index one element at a time")
        index = self.expr(node.slice)
        if isinstance(base, TupleValue) or (isinstance(base, Const) and isinstance(base.value, tuple)):
            if not (isinstance(index, Const) and isinstance(index.value, int)):
                raise self.error(JitTypeError, node, "a tuple (such as .shape) is indexed with a constant int")
            items = base.items if isinstance(base, TupleValue) else tuple(Const(v) for v in base.value)
            try:
                return items[index.value]
            except IndexError:
                raise self.error(JitTypeError, node, f"index {index.value} is out of range for a tuple of {len(items)}") from None
        if not (isinstance(base, Value) and isinstance(base.type, (Array, Shared))):
            raise self.error(JitTypeError, node, f"only arrays, shared memory and tuples can be indexed, not a {self.describe_value(base)}")
        indices = list(index.items) if isinstance(index, TupleValue) else (
            [Const(v) for v in index.value] if isinstance(index, Const) and isinstance(index.value, tuple) else [index])
        codes = []
        for k, item in enumerate(indices):
            value = self.scalar(item, node.slice, None) if not isinstance(item, Const) else const_to_value(item, INT64)
            if not (value.type.is_int or value.type.kind == "b"):
                raise self.error(JitTypeError, node, f"index {k} is a {value.type}; array indices must be integers (cast with int(...))")
            codes.append(value.code)
        t = base.type
        ndim = 1 if isinstance(t, Shared) else t.ndim
        if len(codes) != ndim:
            raise self.error(JitTypeError, node, f"a {ndim}-d array takes {ndim} indices, got {len(codes)} (slices and fancy indexing are not supported)")
        if isinstance(t, Shared) or ndim == 1:
            return Value(f"{base.code}[{codes[0]}]", t.dtype)
        return Value(f"{base.code}({', '.join(codes)})", t.dtype)

    # -- calls -------------------------------------------------------------------------------------------

    def expr_Call(self, node: ast.Call) -> Any:
        function = self.expr(node.func)
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise self.error(JitUnsupportedError, node, "*args and **kwargs are not supported in calls")
        args = [self.expr(a) for a in node.args]
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords if k.arg is not None}  # None (**) refused above
        return call(self, function, args, kwargs, node)
