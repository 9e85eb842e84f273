"""The state of one function being translated: its C++ lines, its C names, its locals and what each Python
name is bound to, and the lookup of a name (local, closure, global, Python builtin).

Design choices (documented for users in kspec.jit's docstring):

* Locals are declared once at the top of the C++ function (Python's function scope), so a local first
  assigned inside an ``if`` or a loop is visible after it (``declarations``, filled by :meth:`declare_local`).
* Every statement is preceded by a ``#line`` directive when its Python line changes, so NVRTC's messages
  and the debugger name the Python file and line (:meth:`emit`).
"""

from __future__ import annotations

import ast
from typing import Any

from ._builtins import PYTHON_BUILTINS
from ._errors import JitError, JitNameError, JitUnsupportedError
from ._markers import lift
from ._module import ModuleState, c_name
from ._source import FunctionSource
from ._types import JitType, Scalar
from ._values import Const, Value


class FunctionState:
    """Base of the translator: what it holds about one function for one signature, and its output."""

    function_name = ""  # a device function's C name (set by whoever creates its translator)

    def __init__(self, source: FunctionSource, types: tuple[JitType, ...], module: ModuleState, *, device: bool) -> None:
        self.src = source
        self.loc = source.location
        self.module = module
        self.device = device
        self.types = types
        self.lines: list[str] = []
        self.indent = 1
        self.bindings: dict[str, Any] = {}  # Python name -> Value (C local/param) | Const | TupleValue | alias
        self.local_types: dict[str, Scalar] = {}
        self.declarations: list[str] = []
        self.shared_declarations: list[str] = []
        self.prologue: list[str] = []
        self.params: list[str] = []
        self.return_type: JitType | None = None
        self.last_line = -1
        self.temp_counter = 0
        self.taken: set[str] = set()
        self.name_hint: str | None = None
        self.dynamic_alignment = 0

    # -- errors and output -------------------------------------------------------------------------------

    def error(self, cls: type[JitError], node: ast.AST | None, message: str) -> JitError:
        return self.loc.error(cls, node, message)

    def emit(self, text: str, node: ast.AST | None = None) -> None:
        if node is not None:
            line = self.loc.line_of(node)
            if line != self.last_line:
                self.lines.append(f'#line {line} "{self.loc.filename}"')
                self.last_line = line
        self.lines.append("    " * self.indent + text)

    def fresh_name(self, stem: str) -> str:
        """A C name not used yet in this function, close to ``stem``."""
        name, k = c_name(stem), 1
        while name in self.taken:
            name, k = f"{c_name(stem)}_{k}", k + 1
        self.taken.add(name)
        return name

    def declare_local(self, name: str, t: Scalar, node: ast.AST) -> None:
        self.module.note_type(t)
        self.local_types[name] = t
        cname = self.fresh_name(name)
        self.declarations.append(f"{t.ctype} {cname};")
        self.bindings[name] = Value(cname, t)

    def temp(self, stem: str) -> str:
        self.temp_counter += 1
        return f"_{stem}{self.temp_counter}"

    # -- names -------------------------------------------------------------------------------------------

    def lookup(self, name: str, node: ast.AST) -> Any:
        found = self.bindings.get(name)
        if found is not None:
            return found
        if name in self.src.closure:
            return lift(self.src.closure[name])
        if name in self.src.globals:
            return lift(self.src.globals[name])
        builtins = self.src.globals.get("__builtins__")
        table = builtins if isinstance(builtins, dict) else getattr(builtins, "__dict__", {})
        if name in table and name in PYTHON_BUILTINS:
            return Const(table[name])
        if name in table:
            raise self.error(JitUnsupportedError, node, f"the Python builtin {name!r} is not available in jit kernels (supported: {', '.join(sorted(PYTHON_BUILTINS))})")
        assigned_later = any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in ast.walk(self.src.tree))
        hint = "it is assigned only later in the function" if assigned_later else "not a parameter, local, global, or kspec.jit builtin"
        raise self.error(JitNameError, node, f"Unbound name: {name} ({hint})")

