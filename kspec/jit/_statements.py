"""Statements: control flow, returns, and assignment to locals, tuples and array elements.

A local's type is fixed by its first assignment; a later assignment of another type is an error, unless the
new type converts to it without loss (uint32 into an int64 local, a literal into any numeric local). Arrays,
shared memory, groups and tuples are bound to names, not copied (Python's semantics).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

from ._builtin_calls import emit_range_loop
from ._builtins import range as jit_range
from ._errors import JitTypeError, JitUnsupportedError, JitValueError
from ._expressions import ExpressionTranslator
from ._module import c_name
from ._types import Scalar, Void, can_hold
from ._values import Const, TupleValue, Value, cast, is_number, literal

# The operators of an augmented assignment that C++'s compound assignment spells the same way.
_AUG_OPERATORS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
                  ast.LShift: "<<", ast.RShift: ">>"}


class StatementTranslator(ExpressionTranslator):
    """Base of FunctionTranslator (which adds the function around the body): everything that emits code
    without yielding a value."""

    def block(self, statements: list[ast.stmt]) -> None:
        self.indent += 1
        for stmt in statements:
            self.statement(stmt)
        self.indent -= 1

    def statement(self, node: ast.stmt) -> None:
        method = getattr(self, f"stmt_{type(node).__name__}", None)
        if method is None:
            raise self.error(JitUnsupportedError, node, f"the {type(node).__name__} statement is not supported in jit kernels")
        method(node)

    def stmt_Pass(self, node: ast.Pass) -> None:
        pass

    def stmt_Break(self, node: ast.Break) -> None:
        self.emit("break;", node)

    def stmt_Continue(self, node: ast.Continue) -> None:
        self.emit("continue;", node)

    def stmt_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # a docstring
        value = self.expr(node.value)
        if isinstance(value, Value):
            self.emit(f"{value.code};", node)

    def stmt_Return(self, node: ast.Return) -> None:
        # The value is translated first, so an unknown name is a NameError before any return-type check.
        value = self.expr(node.value) if node.value is not None else Const(None)
        if isinstance(value, Const) and value.value is None:  # `return` and `return None`
            if self.device and self.return_type not in (None, Void()):
                raise self.error(JitTypeError, node, f"returns nothing here but {self.return_type} elsewhere")
            if self.device:
                self.return_type = Void()
            self.emit("return;", node)
            return
        if not self.device:
            raise self.error(JitTypeError, node, "a kernel cannot return a value (write results into an array); only device functions (rawkernel(device=True)) return values")
        value = self.scalar(value, node.value or node, self.return_type if isinstance(self.return_type, Scalar) else None)
        if self.return_type is None:
            self.return_type = value.type
        elif self.return_type != value.type:
            if not (isinstance(self.return_type, Scalar) and isinstance(value.type, Scalar) and can_hold(self.return_type, value.type)):
                raise self.error(JitTypeError, node, f"returns {value.type} here but {self.return_type} at an earlier return; cast one of them")
            value = Value(cast(value, self.return_type), self.return_type)
        self.emit(f"return {value.code};", node)

    def stmt_If(self, node: ast.If) -> None:
        test = self.condition(node.test)
        if isinstance(test, Const):  # a compile-time condition keeps only the branch taken
            self.block_inline(node.body if test.value else node.orelse)
            return
        self.emit(f"if ({test.code}) {{", node)
        self.block(node.body)
        orelse = node.orelse
        while len(orelse) == 1 and isinstance(orelse[0], ast.If):
            elif_node = orelse[0]
            elif_test = self.condition(elif_node.test)
            code = elif_test.code if isinstance(elif_test, Value) else ("true" if elif_test.value else "false")
            self.emit(f"}} else if ({code}) {{", elif_node)
            self.block(elif_node.body)
            orelse = elif_node.orelse
        if orelse:
            self.emit("} else {")
            self.block(orelse)
        self.emit("}")

    def block_inline(self, statements: list[ast.stmt]) -> None:
        for stmt in statements:
            self.statement(stmt)

    def stmt_While(self, node: ast.While) -> None:
        if node.orelse:
            raise self.error(JitUnsupportedError, node, "while ... else is not supported")
        test = self.condition(node.test)
        code = test.code if isinstance(test, Value) else ("true" if test.value else "false")
        self.emit(f"while ({code}) {{", node)
        self.block(node.body)
        self.emit("}")

    def stmt_For(self, node: ast.For) -> None:
        if node.orelse:
            raise self.error(JitUnsupportedError, node, "for ... else is not supported")
        if not (isinstance(node.iter, ast.Call) and isinstance(self.expr(node.iter.func), Const)
                and self.expr(node.iter.func).value in (range, jit_range)):
            raise self.error(JitUnsupportedError, node.iter, "jit kernels loop over range(...) only")
        if not isinstance(node.target, ast.Name):
            raise self.error(JitUnsupportedError, node.target, "the loop variable must be a plain name")
        emit_range_loop(self, node)

    def stmt_Assign(self, node: ast.Assign) -> None:
        self.name_hint = node.targets[0].id if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) else None
        value = self.expr(node.value)
        self.name_hint = None
        if len(node.targets) > 1 and isinstance(value, Value) and isinstance(value.type, Scalar):
            tmp = self.temp("chain")  # a = b = expr evaluates expr once
            self.declarations.append(f"{value.type.ctype} {tmp};")
            self.emit(f"{tmp} = {value.code};", node)
            value = Value(tmp, value.type)
        for target in node.targets:
            self.assign(target, value, node)

    def stmt_AnnAssign(self, node: ast.AnnAssign) -> None:
        raise self.error(JitUnsupportedError, node, "annotated assignments are not supported; cast the value instead (x = numpy.float32(0))")

    def stmt_AugAssign(self, node: ast.AugAssign) -> None:
        op = _AUG_OPERATORS.get(type(node.op))
        target = self.expr(node.target) if not isinstance(node.target, ast.Name) else self.lookup(node.target.id, node.target)
        if not isinstance(target, Value) or not isinstance(target.type, Scalar):
            raise self.error(JitTypeError, node.target, "augmented assignment needs a scalar local or an array element")
        right = self.expr(node.value)
        if op is None or target.type.name == "float16":
            combined = self.binary(node.op, target, right, node)  # Python-level semantics, then convert back
            self.emit(f"{target.code} = {cast(combined, target.type)};", node)
            return
        right = self.scalar(right, node.value, target.type)
        # C++ compound assignment: the usual arithmetic conversions, then back to the target's type
        # (so `smem[tid] += smem[tid + s]` with tid uint32 and s int64 is fine, as in CUDA C++).
        self.emit(f"{target.code} {op}= {right.code};", node)

    # -- assignment --------------------------------------------------------------------------------------

    def assign(self, target: ast.expr, value: Any, node: ast.stmt) -> None:
        if isinstance(target, ast.Name):
            self.assign_name(target.id, value, target)
        elif isinstance(target, (ast.Tuple, ast.List)):
            items: Sequence[Any] = self.unpack(value, len(target.elts), node)
            if any(isinstance(i, Value) and isinstance(i.type, Scalar) for i in items):
                # Evaluate the whole right side before assigning (a, b = b, a swaps).
                temps = []
                for item in items:
                    if isinstance(item, Value) and isinstance(item.type, Scalar):
                        tmp = self.temp("t")
                        self.declarations.append(f"{item.type.ctype} {tmp};")
                        self.emit(f"{tmp} = {item.code};", node)
                        temps.append(Value(tmp, item.type))
                    else:
                        temps.append(item)
                items = temps
            for sub, item in zip(target.elts, items):
                self.assign(sub, item, node)
        elif isinstance(target, ast.Subscript):
            element = self.expr(target)
            if not isinstance(element, Value) or not isinstance(element.type, Scalar):
                raise self.error(JitTypeError, target, "only array elements can be assigned to")
            right = self.scalar(value, node, element.type)
            self.emit(f"{element.code} = {cast(right, element.type)};", node)
        elif isinstance(target, ast.Attribute):
            raise self.error(JitUnsupportedError, target, "attributes cannot be assigned in jit kernels")
        else:
            raise self.error(JitUnsupportedError, target, "unsupported assignment target")

    def unpack(self, value: Any, count: int, node: ast.AST) -> tuple[Any, ...]:
        if isinstance(value, TupleValue):
            items = value.items
        elif isinstance(value, Const) and isinstance(value.value, tuple):
            items = tuple(Const(v) for v in value.value)
        else:
            raise self.error(JitValueError, node, f"{self.describe(value)} cannot be unpacked: only tuples (.shape, .strides, grid(2), grid(3)) can")
        if len(items) > count:
            raise self.error(JitValueError, node, f"too many values to unpack (expected {count}, got {len(items)})")
        if len(items) < count:
            raise self.error(JitValueError, node, f"not enough values to unpack (expected {count}, got {len(items)})")
        return items

    def assign_name(self, name: str, value: Any, node: ast.AST) -> None:
        if isinstance(value, TupleValue) or (isinstance(value, Value) and not isinstance(value.type, Scalar)) or (
            isinstance(value, Const) and not is_number(value.value)
        ):
            # arrays, shared memory, groups, modules and tuples are bound, not copied (Python's semantics).
            if name in self.local_types:
                raise self.error(JitTypeError, node, f"{name!r} is a {self.local_types[name]} local; it cannot be rebound to a {self.describe(value)}")
            if isinstance(value, TupleValue):
                value = self.materialize_tuple(name, value, node)
            self.bindings[name] = value
            return
        declared = self.local_types.get(name)
        if declared is None:
            if name in self.bindings:
                raise self.error(JitTypeError, node, f"{name!r} is a {self.describe(self.bindings[name])}; it cannot become a scalar")
            scalar_value = self.scalar(value, node, None)
            declared = scalar_value.type
            assert isinstance(declared, Scalar)
            self.declare_local(name, declared, node)
        elif isinstance(value, Const) and declared.kind in "iu" and isinstance(value.value, int) and not isinstance(value.value, bool):
            scalar_value = Value(literal(value.value, declared), declared)  # `k = 0` into an int local: no cast
        else:
            scalar_value = self.scalar(value, node, declared)
            if scalar_value.type != declared and not (isinstance(value, Const) or can_hold(declared, scalar_value.type)):
                line = self.loc.line_of(node)
                raise self.error(
                    JitTypeError, node,
                    f"local {name!r} is {declared} (fixed by its first assignment) but line {line} assigns a "
                    f"{scalar_value.type}; a local keeps one type: cast the value (numpy.{declared}(...)) or use "
                    "another name",
                )
        self.emit(f"{self.bindings[name].code} = {cast(scalar_value, declared)};", node)

    def materialize_tuple(self, name: str, value: TupleValue, node: ast.AST) -> TupleValue:
        """Copy a tuple's scalar items into locals so that later changes of their sources do not leak in."""
        items = []
        for k, item in enumerate(value.items):
            if isinstance(item, Value) and isinstance(item.type, Scalar):
                cname = f"{c_name(name)}_{k}"
                if cname not in self.taken:
                    self.declarations.append(f"{item.type.ctype} {cname};")
                    self.taken.add(cname)
                self.emit(f"{cname} = {item.code};", node)
                items.append(Value(cname, item.type))
            else:
                items.append(item)
        return TupleValue(tuple(items))

    @staticmethod
    def describe(value: Any) -> str:
        if isinstance(value, Value):
            return str(value.type)
        if isinstance(value, TupleValue):
            return "tuple"
        return type(value.value).__name__ if isinstance(value, Const) else type(value).__name__
