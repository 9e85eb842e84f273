"""Reading a Python function for translation: its AST, file, first line, the names it can see, and what its
AST says before translation (the parameters it only reads, whether it returns a value)."""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass
from typing import Any, Callable

from ._errors import JitSourceError, SourceLocation


@dataclass
class FunctionSource:
    tree: ast.FunctionDef
    location: SourceLocation
    globals: dict[str, Any]
    closure: dict[str, Any]


_READ_HINT = (
    "kspec.jit reads the function's source with inspect.getsource, which cannot read functions typed into the "
    "Python REPL, made by exec(), or lambdas; define it with `def` in a .py file (or a notebook cell)"
)


def read_function(func: Callable[..., Any]) -> FunctionSource:
    """Parse ``func``'s source; JitSourceError saying why when it cannot be read."""
    name = getattr(func, "__name__", repr(func))
    code = getattr(func, "__code__", None)
    filename = code.co_filename if code is not None else "<unknown>"
    if name == "<lambda>":
        raise JitSourceError(f"{filename}:{code.co_firstlineno if code else '?'}: a lambda cannot be a jit kernel: {_READ_HINT}")
    try:
        lines, first_line = inspect.getsourcelines(func)
    except (OSError, TypeError) as exc:
        raise JitSourceError(f"{filename}: function {name!r}: its source cannot be read ({exc}): {_READ_HINT}") from None
    text = textwrap.dedent("".join(lines))
    try:
        module = ast.parse(text)
    except SyntaxError as exc:  # e.g. a function defined inside an expression
        raise JitSourceError(f"{filename}:{first_line}: function {name!r}: its source does not parse on its own ({exc.msg}): {_READ_HINT}") from None
    tree = next((n for n in module.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if not isinstance(tree, ast.FunctionDef):
        raise JitSourceError(f"{filename}:{first_line}: {name!r} is not a plain `def` function: {_READ_HINT}")
    # inspect.getsourcelines starts at the first decorator; AST lines count from the text's line 1.
    location = SourceLocation(filename, first_line, name)
    closure: dict[str, Any] = {}
    cells = getattr(func, "__closure__", None)
    if code is not None and cells:
        for var, cell in zip(code.co_freevars, cells):
            try:
                closure[var] = cell.cell_contents
            except ValueError:  # an empty cell: the name is assigned after the function was made
                pass
    return FunctionSource(tree, location, getattr(func, "__globals__", {}), closure)


def read_only_parameters(tree: ast.FunctionDef, names: list[str]) -> set[str]:
    """Parameters the kernel only reads through subscripts: never stored to, never passed to a call
    (atomics, device functions, memcpy_async) and never bound to another name."""
    written: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name):
            written.add(node.value.id)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Subscript) and isinstance(node.target.value, ast.Name):
            written.add(node.target.value.id)
        elif isinstance(node, ast.Call):
            written.update(a.id for a in [*node.args, *(k.value for k in node.keywords)] if isinstance(a, ast.Name))
        elif isinstance(node, (ast.Assign, ast.Return)) and isinstance(node.value, (ast.Name, ast.Tuple)):
            value = node.value
            items = value.elts if isinstance(value, ast.Tuple) else [value]
            written.update(i.id for i in items if isinstance(i, ast.Name))
    return set(names) - written


def returns_value(tree: ast.FunctionDef) -> bool:
    """Whether any ``return`` of the function gives a value (``return None`` does not)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Return) and node.value is not None:
            if not (isinstance(node.value, ast.Constant) and node.value.value is None):
                return True
    return False
