"""The one shape of a failed compile's error, NVRTC's, nvcc's (kspec/compiler/_compile.py) or the host
compiler's (kspec/compiler/host/_compiler.py): what failed, the compiler's log, the options and the numbered source."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .._errors import CompileError, about_kernel

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
    error_type = _error_types[0]() if _error_types else CompileError
    return error_type("\n".join(parts), kernel=name, log=log, source=source)
