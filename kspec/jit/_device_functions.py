"""Calls made inside kernels to device functions and to plain Python functions.

A ``rawkernel(device=True)`` function becomes one C++ ``__device__`` function per (function object, argument
types), named after its Python qualified name and signature (``TestCase_test_g_f_int32_int32``; a second
function of the same qualified name, such as one made by the same factory with other closure values, gets
``_2``). Every device function is declared before any is defined, so calls between them compile in any
order, recursion included. A recursive call needs the function's return type: known up front for a function
that returns no value, otherwise fixed by a ``return`` translated before the call (a base case first).

A plain Python function called inside a kernel with arguments known at compile time runs at compile time
(as in cupyx.jit): ``g(10)(x, y)``, where ``g`` makes a device function, and recursion through such
factories (``g(step * 2)(x)`` under ``if step < 256:``) unfold while translating.

Both take the calling function's translator as a :class:`CallingTranslator`, which also makes the translator
of a device function called: this module sits below the translator and imports none of it.
"""

from __future__ import annotations

import ast
import re
import types as pytypes
from typing import Any, Protocol

from ._errors import JitError, JitRecursionError, JitTypeError, JitUnsupportedError, SourceLocation
from ._markers import lift
from ._module import DeviceFunction, ModuleState, c_name
from ._source import FunctionSource, read_function, returns_value
from ._types import Array, Dim3Type, Group, JitType, Scalar, Shared, Void, signature_tag
from ._values import Const, ScalarValue, TupleValue, Value

_PASSABLE = (Scalar, Array, Shared, Group, Dim3Type)


class DeviceTranslator(Protocol):
    """What a call needs of the translator of the device function it calls."""

    function_name: str
    return_type: JitType | None

    def translate(self) -> str: ...

    def head(self) -> str: ...


class CallingTranslator(Protocol):
    """What a call needs of the translator of the function that makes it (FunctionTranslator, which passes
    itself): errors, scalars, the translation unit, and translators for the device functions it calls. Taking
    them from the caller keeps this module below the translator, which reaches it through the builtins."""

    loc: SourceLocation
    module: ModuleState

    def error(self, cls: type[JitError], node: ast.AST | None, message: str) -> JitError: ...

    def scalar(self, value: Any, node: ast.AST, against: Scalar | None) -> ScalarValue: ...

    def device_translator(self, source: FunctionSource, types: tuple[JitType, ...]) -> DeviceTranslator: ...


def device_function_name(func: Any, types: tuple[JitType, ...]) -> str:
    """A readable C identifier for ``func`` at ``types``: its qualified name without ``<locals>``, then the
    signature (no double underscores, which C++ reserves)."""
    parts = [p for p in getattr(func, "__qualname__", func.__name__).split(".") if p != "<locals>"]
    stem = re.sub(r"_+", "_", re.sub(r"\W", "_", "_".join(parts + [signature_tag(types)]))).strip("_")
    return stem if stem and not stem[0].isdigit() else f"f_{stem}"


def device_call(tr: CallingTranslator, function: Any, args: list[Any], node: ast.AST) -> Value[JitType]:
    """``function(*args)`` for a ``rawkernel(device=True)`` function: its C call, translating it first."""
    typed: list[Value[JitType]] = []
    for position, arg in enumerate(args):
        if isinstance(arg, TupleValue):
            raise tr.error(JitUnsupportedError, node, f"argument {position}: tuples cannot be passed to device functions; pass their items")
        if isinstance(arg, Const):
            arg = tr.scalar(arg, node, None)
        if not isinstance(arg.type, _PASSABLE):
            raise tr.error(JitTypeError, node, f"argument {position} of type {arg.type} cannot be passed to a device function")
        typed.append(arg)
    types: tuple[JitType, ...] = tuple(a.type for a in typed)
    module = tr.module
    key = (function.func, types)
    entry = module.device_functions.get(key)
    if entry is None:
        base = c_name(device_function_name(function.func, types))
        name, k = base, 1
        while name in module.used_names:
            k += 1
            name = f"{base}_{k}"
        module.used_names.add(name)
        source = read_function(function.func)
        callee = tr.device_translator(source, types)
        callee.function_name = name
        if not returns_value(source.tree):
            callee.return_type = Void()  # known before the body: recursive calls may come first
        entry = module.device_functions[key] = DeviceFunction(name, callee)  # before translating: recursion finds it
        definition = callee.translate()
        if callee.return_type is None:  # every value-returning `return` sat in a branch dropped at compile time
            callee.return_type = Void()
        entry.prototype, entry.definition = callee.head() + ";", definition
    return_type = entry.translator.return_type
    if return_type is None:  # a recursive call before any return fixed the type
        raise tr.error(
            JitRecursionError, node,
            f"Recursive function is not supported here: {function.__name__!r} calls itself before its return type is "
            "known; return a value of a fixed type (the base case) before the recursive call",
        )
    return Value(f"{entry.name}({', '.join(a.code for a in typed)})", return_type)


def compile_time_call(tr: CallingTranslator, func: pytypes.FunctionType, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Any:
    """A plain Python function called inside a kernel: run it now, on arguments known at compile time."""
    if not all(isinstance(a, Const) for a in [*args, *kwargs.values()]):
        raise tr.error(
            JitTypeError, node,
            f"{func.__name__!r} is a Python function: inside a kernel it runs at compile time, so its arguments must be "
            "known then (literals, globals, closure variables); decorate it with @jit.rawkernel(device=True) to call it "
            "on the device",
        )
    try:
        result = func(*[a.value for a in args], **{k: v.value for k, v in kwargs.items()})
    except Exception as exc:
        exc.add_note(f"raised by {func.__name__}(), called at compile time at {tr.loc.filename}:{tr.loc.line_of(node)}")
        raise
    return lift(result)
