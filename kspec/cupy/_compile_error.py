"""kspec's CompileError as CuPy's ``CompileException`` too, while the switch is on.

Code written for CuPy catches ``cupy.cuda.compiler.CompileException`` where a kernel may not compile and another
implementation serves (cuCIM's separable filters fall back from a shared-memory RawModule to an elementwise
kernel for dtypes the first cannot hold, float16 among them). Under the switch the compile is kspec's, so its
error is made an instance of both: kspec's attributes (``kernel``, ``log``, ``source``) and CuPy's (``name``,
``options``, ``backend``, ``dump()``). The class is made once CuPy's compiler module is imported (never
imported from here: the switch may be armed inside CuPy's own import); until then failures raise CompileError.
"""

from __future__ import annotations

import sys
from .._errors import CompileError

_made: dict[int, type[CompileError]] = {}  # id(CuPy's CompileException) -> the class joining both


def compile_error_type() -> type[CompileError]:
    """The class a failed compile raises now (see the module docstring)."""
    cupy_type = getattr(sys.modules.get("cupy.cuda.compiler"), "CompileException", None)
    if not isinstance(cupy_type, type) or not issubclass(cupy_type, Exception):
        return CompileError
    joined = _made.get(id(cupy_type))
    if joined is None:
        joined = _made[id(cupy_type)] = _join(cupy_type)
    return joined


def _join(cupy_type: type[Exception]) -> type[CompileError]:
    class CupyCompileError(CompileError, cupy_type):  # type: ignore[misc,valid-type]
        """A failed compile of kspec's, also CuPy's CompileException (kspec/cupy/_compile_error.py)."""

        def __init__(self, message: str, *, kernel: str | None = None, log: str = "", source: str = "") -> None:
            CompileError.__init__(self, message, kernel=kernel, log=log, source=source)
            # CuPy's attributes, which its handlers and dump() read
            self._msg, self.name, self.options, self.backend = message, kernel or "", (), "nvrtc"

        def __str__(self) -> str:
            return str(self.args[0]) if self.args else ""

        def __repr__(self) -> str:
            return f"{type(self).__name__}({self.kernel!r})"

    CupyCompileError.__module__ = __name__
    return CupyCompileError
