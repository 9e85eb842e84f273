"""Errors of kspec.jit: each names the Python file, line and construct, and says what to do.

They sit in kspec's error tree (so ``except kspec.KspecError`` catches them) and derive from the built-in
exception CuPy's jit raises for the same mistake (TypeError, NameError, NotImplementedError...).
"""

from __future__ import annotations

import ast

from .._errors import KspecNotImplementedError, KspecTypeError, KspecValueError


class JitError(Exception):
    """Mixin: ``where`` is ``file.py:LINE`` and ``construct`` the offending Python text."""

    where: str = ""
    construct: str = ""


class JitUnsupportedError(JitError, KspecNotImplementedError):
    """A Python construct (syntax, builtin, call) kernels cannot contain."""


class JitTypeError(JitError, KspecTypeError):
    """Types that do not fit: a local assigned another type, a float index, an atomic on a dtype CUDA lacks."""


class JitValueError(JitError, KspecValueError):
    """A value that does not fit: ``grid(4)``, unpacking a scalar or a tuple of another length."""


class JitNameError(JitError, KspecValueError, NameError):
    """A name the kernel uses is neither a local, a parameter, a global, nor a kspec.jit builtin."""


class JitRecursionError(JitError, KspecValueError):
    """A device function calls itself before its return type is known (cupyx.jit raises ValueError)."""


class JitSourceError(JitError, KspecValueError):
    """The function's source cannot be read (REPL, exec, lambda): inspect.getsource is what reads it."""


class SourceLocation:
    """Maps nodes of a function's parsed source back to its file: lines are offset by where it starts."""

    def __init__(self, filename: str, first_line: int, function: str) -> None:
        self.filename = filename
        self.first_line = first_line  # file line of the source's line 1
        self.function = function

    def line_of(self, node: ast.AST | None) -> int:
        lineno = getattr(node, "lineno", 1) if node is not None else 1
        return self.first_line + lineno - 1

    def error(self, cls: type[JitError], node: ast.AST | None, message: str) -> JitError:
        """``cls`` with ``file:line: in kernel 'f': `construct`: message``."""
        where = f"{self.filename}:{self.line_of(node)}"
        construct = _unparse(node)
        text = f"{where}: in {self.function!r}: "
        if construct:
            text += f"`{construct}`: "
        err = cls(text + message)
        err.where = where
        err.construct = construct
        return err


def _unparse(node: ast.AST | None) -> str:
    if node is None or isinstance(node, (ast.FunctionDef, ast.Module)):
        return ""
    try:
        text = ast.unparse(node)
    except Exception:  # a malformed node: the line number still says where
        return ""
    first = text.splitlines()[0] if text else ""
    return first if len(first) <= 80 else first[:77] + "..."
