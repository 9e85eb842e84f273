"""The one shape of a failed compile's error, NVRTC's, nvcc's (kspec/compiler/_compile.py) or the host
compiler's (kspec/compiler/host/_compiler.py): what failed, the compiler's log, the options and the numbered source."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .._errors import CompileError, about_kernel
from .._manifest import FAILURE_FORMAT
from ._program import CompiledProgram

# Which class a failed compile raises: CompileError, or a subclass an adapter gives (kspec.cupy's is also CuPy's
# CompileException, so code written for CuPy that catches a compile failure to fall back still catches it).
_error_types: list[Callable[[], type[CompileError]]] = []


def set_compile_error_type(provider: Callable[[], type[CompileError]] | None) -> None:
    """Failed compiles raise ``provider()`` (a CompileError subclass taking its arguments) from now on; None: the
    plain CompileError again."""
    _error_types[:] = [provider] if provider is not None else []


def number_lines(source: str) -> str:
    """The source with right-aligned line numbers, ``"  12 | code"``, as NVRTC's ``name.cu(12)`` refers to."""
    lines = source.splitlines() or [""]
    width = len(str(len(lines)))
    return "\n".join(f"  {number:>{width}} | {line}" for number, line in enumerate(lines, 1))


def indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def compile_failure(tool: str, log_name: str, name: str, arch: str, error: str, log: str, args: Sequence[str],
                    source: str, dump_note: str | None) -> CompileError:
    """The CompileError of a failed compile: what failed, the compiler's log, the options and the numbered source."""
    parts = [
        about_kernel(name, f"{tool} failed to compile it for {arch} ({error})"),
        f"{log_name} log:",
        indent(log) if log else "  (empty)",
        "options: " + " ".join(args),
        f"source ({name}.cu):",
        number_lines(source),
    ]
    if dump_note:
        parts.append(dump_note)
    return _error_type()("\n".join(parts), kernel=name, log=log, source=source)


def _error_type() -> type[CompileError]:
    return _error_types[0]() if _error_types else CompileError


def failed_program(error: CompileError, arch: str) -> CompiledProgram:
    """What a build stores of a compile that failed as its spec says it does: the error's message in place of a
    binary (format :data:`FAILURE_FORMAT`), which :func:`recorded_failure` raises again where it is served."""
    return CompiledProgram(binary=str(error).encode(), format=FAILURE_FORMAT, arch=arch, lowered_names={}, log=error.log,
                           nvrtc_version=(0, 0), compile_ms=0.0)


def recorded_failure(message: str, name: str) -> CompileError:
    """The CompileError of a compile that failed where the build ran (its stored message), raised where it is
    served, with no compiler: the class a compile's failure has here (CuPy's CompileException too, under
    kspec.cupy), so code that falls back on a failed compile does so as it did when captured."""
    return _error_type()(message, kernel=name)
