"""Calls of ``rawkernel(device=True)`` functions: each (function, argument types) becomes one ``__device__``
function in the kernel's module, translated once and emitted before its callers."""

from __future__ import annotations

import ast
from typing import Any

from ._errors import JitTypeError, JitUnsupportedError
from ._types import Array, Group, JitType, Scalar, Shared, Void
from ._values import Const, TupleValue, Value


def device_call(tr: Any, function: Any, args: list[Any], node: ast.AST) -> Value[JitType]:
    from ._module import c_name
    from ._translate import FunctionTranslator  # translate imports builtins, which import us
    from ._source import read_function

    typed: list[Value[JitType]] = []
    for position, arg in enumerate(args):
        if isinstance(arg, TupleValue):
            raise tr.error(JitUnsupportedError, node, f"argument {position}: tuples cannot be passed to device functions; pass their items")
        if isinstance(arg, Const):
            arg = tr.scalar(arg, node, None)
        if not isinstance(arg.type, (Scalar, Array, Shared, Group)):
            raise tr.error(JitTypeError, node, f"argument {position} of type {arg.type} cannot be passed to a device function")
        typed.append(arg)
    types: tuple[JitType, ...] = tuple(a.type for a in typed)
    module = tr.module
    key = (id(function.func), types)
    found = module.device_names.get(key)
    if found is None:
        if id(function.func) in module.in_progress:
            raise tr.error(JitUnsupportedError, node, f"{function.__name__!r} calls itself: recursion is not supported in jit device functions")
        module.in_progress.add(id(function.func))
        try:
            callee = FunctionTranslator(read_function(function.func), types, module, device=True)
            base = c_name(function.__name__)
            name, k = base, 1
            while name in module.used_names:
                name, k = f"{base}_{k}", k + 1
            module.used_names.add(name)
            callee.function_name = name
            code = callee.translate()
        finally:
            module.in_progress.discard(id(function.func))
        module.device_functions.append(code)
        found = module.device_names[key] = (name, callee.return_type or Void())
    name, return_type = found
    return Value(f"{name}({', '.join(a.code for a in typed)})", return_type)

