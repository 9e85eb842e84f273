"""The one error tree of kspec.

Every exception kspec raises on purpose derives from :class:`KspecError`. User mistakes also derive from
the built-in ``TypeError`` / ``ValueError`` (and ``OverflowError`` / ``NotImplementedError``) so code
written against CuPy's exceptions keeps catching them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from numpy.exceptions import AxisError as _NumpyAxisError


def kernel_label(name: str, detail: object = None) -> str:
    """``kernel 'name'``, or ``kernel 'name' (detail)``: the one spelling of how a message names a kernel,
    so every layer's messages read alike (tests and the error docs match them). Call it only when raising,
    or where a label is built once (a prepared call, a loaded module), never per kernel call."""
    return f"kernel '{name}'" if detail is None else f"kernel '{name}' ({detail})"


def about_kernel(name: str, message: str) -> str:
    """``kernel 'name': message``, a message about one kernel (its label is :func:`kernel_label`'s)."""
    return f"{kernel_label(name)}: {message}"


class KspecError(Exception):
    """Root of every error kspec raises on purpose."""


class KspecTypeError(KspecError, TypeError):
    """A call or constructor argument has the wrong type (the message names the parameter)."""


class KspecValueError(KspecError, ValueError):
    """A call or constructor argument has a wrong value (the message names the parameter)."""


class KspecFileNotFoundError(KspecError, FileNotFoundError):
    """A file an argument names does not exist (the message names the parameter and the path)."""


class KspecOverflowError(KspecError, OverflowError):
    """A Python scalar does not fit the declared type of its parameter."""


class AxisError(KspecValueError, _NumpyAxisError):
    """An ``axis`` argument names an axis the array does not have. A ``numpy.exceptions.AxisError`` (which
    CuPy re-exports as ``cupy.exceptions.AxisError``), so also a ValueError and an IndexError. kspec raises
    it with its whole message, and ``axis`` / ``ndim`` (the attributes NumPy's has) when they are known."""

    def __init__(self, message: str, *, axis: int | None = None, ndim: int | None = None) -> None:
        super().__init__(message)  # NumPy's one-argument form: the message as it is
        self.axis, self.ndim = axis, ndim

    def __str__(self) -> str:  # NumPy's __str__ rebuilds a message from axis and ndim when they are set
        return str(self.args[0]) if self.args else ""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_axis_error, (type(self), str(self), self.axis, self.ndim))


def _rebuild_axis_error(cls: type[AxisError], message: str, axis: int | None, ndim: int | None) -> AxisError:
    return cls(message, axis=axis, ndim=ndim)


class KspecNotImplementedError(KspecError, NotImplementedError):
    """A CuPy feature kspec deliberately does not provide (the message says what to do instead)."""


class FuseError(KspecTypeError):
    """A function given to ``kspec.fuse`` did something a trace cannot turn into a kernel: data-dependent
    control flow, an operation that is not elementwise or a reduction, a dtype NumPy has no loop for. The
    message names the function and the line of the call."""


class FuseValueError(FuseError, ValueError):
    """A :class:`FuseError` where NumPy and CuPy raise a ValueError: an output that the result does not
    broadcast to, an assignment into a traced array other than ``x[:] = v`` / ``x[...] = v``."""


class FuseIndexError(FuseError, IndexError):
    """A :class:`FuseError` where NumPy and CuPy raise an IndexError: more indices than the array has dims."""


class SpecError(KspecError, ValueError):
    """A kernel spec is invalid. Carries where: the spec file, the kernel and the field.

    ``str(err)`` reads ``file: kernel 'name': field 'f': what is wrong``; parts that are unknown
    (a spec built in Python has no file) are left out.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        kernel: str | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.file = str(file) if file is not None else None
        self.kernel = kernel
        self.field = field
        super().__init__(message)

    def located(
        self, *, file: str | Path | None = None, kernel: str | None = None, field: str | None = None
    ) -> "SpecError":
        """Return a copy of this error with the missing location parts filled in."""
        err = type(self)(
            self.message,
            file=self.file if self.file is not None else file,
            kernel=self.kernel if self.kernel is not None else kernel,
            field=self.field if self.field is not None else field,
        )
        return err

    def __str__(self) -> str:
        where = []
        if self.file:
            where.append(_printable(self.file))
        if self.kernel:
            where.append(kernel_label(_printable(self.kernel)))
        if self.field:
            where.append(f"field '{_printable(self.field)}'")
        return ": ".join([*where, self.message])

    def __reduce__(self) -> tuple[Any, ...]:  # keep the location through pickling (multiprocessing, pytest-xdist)
        return (_rebuild_spec_error, (type(self), self.message, self.file, self.kernel, self.field))


def _printable(text: str) -> str:
    """A file name or kernel name as a message shows it: escaped when it holds a newline, a NUL or a lone
    surrogate (an undecodable file name), which would break the report or the terminal's encoding."""
    return text if text.isprintable() else repr(text)[1:-1]


def _rebuild_spec_error(
    cls: type[SpecError], message: str, file: str | None, kernel: str | None, field: str | None
) -> SpecError:
    return cls(message, file=file, kernel=kernel, field=field)


class UnknownDtypeError(SpecError):
    """A type name is neither a dtype of kspec's table nor a one-letter placeholder."""


class InvalidNameError(SpecError):
    """A kernel or parameter name is not a C identifier, or is a C/C++ keyword."""


class ReservedNameError(SpecError):
    """A parameter uses a name kspec's templates define (``i``, or a leading underscore)."""


class DuplicateNameError(SpecError):
    """Two parameters, or two kernels of one namespace, share a name."""


class InstantiationError(SpecError):
    """A declared instantiation names an unknown placeholder or leaves one unbound."""


class SpecFileError(SpecError):
    """A spec file cannot be read: bad syntax, unknown keys, an unsupported schema version."""


class SpecErrorGroup(SpecError):
    """Several spec errors found at once (``kspec validate`` reports every one)."""

    def __init__(self, errors: list[SpecError]) -> None:
        self.errors = list(errors)
        first = self.errors[0]
        super().__init__(
            "\n".join(str(e) for e in self.errors),
        )
        self.file, self.kernel, self.field = first.file, first.kernel, first.field

    def located(
        self, *, file: str | Path | None = None, kernel: str | None = None, field: str | None = None
    ) -> "SpecErrorGroup":
        """A group whose members each get the missing location parts (a group has no location of its own)."""
        return SpecErrorGroup([e.located(file=file, kernel=kernel, field=field) for e in self.errors])

    def __str__(self) -> str:
        return f"{len(self.errors)} spec errors:\n" + "\n".join(f"  {e}" for e in self.errors)

    def __reduce__(self) -> tuple[Any, ...]:
        return (SpecErrorGroup, (self.errors,))


class BuildHookError(KspecValueError):
    """An option of the hatchling build hook is wrong; the message names it in full, as
    ``tool.hatch.build.hooks.kspec.<option>: what is wrong``."""


class CompileError(KspecError, RuntimeError):
    """NVRTC rejected a kernel. Carries the log, the kernel name and the source with line numbers."""

    def __init__(self, message: str, *, kernel: str | None = None, log: str = "", source: str = "") -> None:
        self.kernel = kernel
        self.log = log
        self.source = source
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_compile_error, (self.args[0], self.kernel, self.log, self.source))


def _rebuild_compile_error(message: str, kernel: str | None, log: str, source: str) -> CompileError:
    return CompileError(message, kernel=kernel, log=log, source=source)


class CompileTimeoutError(CompileError):
    """A compile ran past its time limit (``kspec build --compile-timeout``) and was stopped."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_timeout, (self.args[0], self.kernel))


def _rebuild_timeout(message: str, kernel: str | None) -> CompileTimeoutError:
    return CompileTimeoutError(message, kernel=kernel)


class CompileForbiddenError(KspecError, RuntimeError):
    """A kernel would compile at run time and the compile policy is ``never`` (``KSPEC_COMPILE=never`` or
    ``kspec.compile_policy("never")``). Raised before anything compiles; the message names the kernel, its
    specialization, the architecture and what would have produced the binary (a ``kspec build`` line)."""

    def __init__(self, message: str, *, kernel: str | None = None) -> None:
        self.kernel = kernel
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_forbidden, (self.args[0], self.kernel))


def _rebuild_forbidden(message: str, kernel: str | None) -> CompileForbiddenError:
    return CompileForbiddenError(message, kernel=kernel)


class NvrtcNotFoundError(KspecError, RuntimeError):
    """NVRTC (the ``nvidia-cuda-nvrtc`` wheel or a CUDA toolkit) is needed to compile and was not found."""


class NvccNotFoundError(KspecNotImplementedError):
    """``backend="nvcc"`` was asked for and no nvcc was found (the message says where kspec looked). A
    NotImplementedError (so a RuntimeError) as before nvcc was supported."""


class LaunchError(KspecError, RuntimeError):
    """The driver refused a launch, a module load or a memory operation."""


class CaptureError(KspecError, RuntimeError):
    """A call cannot be recorded into a CUDA graph: its kernel would compile or load its module (its first
    call with these argument types, or on this device) while the stream it launches on is capturing, or a
    capture (:func:`kspec.capture`) was misused. Raised before anything runs; the message names the kernel
    and says what to do (call it once before capturing)."""


class NoDeviceError(KspecError, RuntimeError):
    """No CUDA driver or device is available; the message says what was looked for."""


class HostCompilerNotFoundError(NvrtcNotFoundError):
    """The CPU device needs a host C++ compiler (``c++``, ``g++``, ``clang++``, or ``pip install
    "kspec[cpu]"`` for zig's) and none was found; the message says where kspec looked."""


class HostUnsupportedError(KspecNotImplementedError):
    """A kernel uses something the CPU device cannot run (textures, inline PTX, grid-wide cooperative sync);
    raised before anything runs, naming the construct, the kernel and the source line."""


class KernelFaultError(LaunchError):
    """A kernel running on the CPU device faulted (``__trap()``, a failed ``assert``, a C++ exception); the
    message names the kernel, the block and the thread."""


class KernelIndexError(KernelFaultError, IndexError):
    """A kernel on the CPU device indexed an array out of its bounds; the message names the kernel, the
    block, the thread, the index and the size."""


class CacheWarning(UserWarning):
    """The binary cache cannot be written; kspec goes on with an in-memory cache."""


class CompileWarning(UserWarning):
    """A kernel compiles at run time under ``KSPEC_COMPILE=warn``: once per specialization (cache key)."""


class PerformanceWarning(UserWarning):
    """kspec does something more slowly than it could, once per process; the message says why and what to install."""


class UninitializedOutputWarning(UserWarning):
    """An elementwise kernel with an empty operation allocated its outputs and wrote nothing to them: they come
    back uninitialised (as CuPy returns them)."""


class BinaryWarning(UserWarning):
    """A precompiled binary does not match its manifest's sha256; kspec compiles the kernel instead."""


class BuildOutputError(KspecValueError):
    """A build's output directory (``kspec build -o``) cannot be used: not a directory kspec owns, not
    writable, or a path inside it is in the way. Raised before anything is compiled."""
