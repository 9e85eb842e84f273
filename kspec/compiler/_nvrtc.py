"""The thin layer over ``cuda.bindings.nvrtc``: loading it, its version, and one compile.

Only NVRTC is used -- never the driver or cuda.core, which initialise a GPU -- so all of this works on a
machine without one. The binding is imported on first use, never when kspec is imported: a deployed package
whose kernels were built into its wheel runs without NVRTC installed.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from types import MappingProxyType, ModuleType
from typing import Any

from .._named_tuple import NamedTuple
from .._errors import NvrtcNotFoundError

_INSTALL_HINT = "install it with `pip install kspec[nvrtc]` (or put a CUDA toolkit's NVRTC on the library path)"

_lock = threading.Lock()
_module: ModuleType | None = None
_version: tuple[int, int] | None = None


def load_nvrtc() -> ModuleType:
    """The ``cuda.bindings.nvrtc`` module with its library loaded, or NvrtcNotFoundError."""
    global _module, _version
    if _module is not None:
        return _module
    with _lock:
        if _module is not None:
            return _module
        try:
            from cuda.bindings import nvrtc
        except ImportError as exc:
            raise NvrtcNotFoundError(f"kspec needs cuda.bindings.nvrtc to compile kernels; {_INSTALL_HINT}") from exc
        try:
            # The shared library is only opened on the first call; cuda.pathfinder raises a RuntimeError
            # subclass when it cannot find libnvrtc.
            result, major, minor = nvrtc.nvrtcVersion()
        except (OSError, RuntimeError) as exc:
            raise NvrtcNotFoundError(f"NVRTC could not be loaded ({exc}); {_INSTALL_HINT}") from exc
        if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise NvrtcNotFoundError(f"nvrtcVersion failed with {result.name}; {_INSTALL_HINT}")
        _version = (int(major), int(minor))
        module: ModuleType = nvrtc
        _module = module
        return module


def library_path() -> str:
    """The path of the NVRTC library that was loaded ("" when it cannot be told): the toolchain memo
    (kspec/compiler/_toolchain.py) watches its size and mtime."""
    load_nvrtc()
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        return str(load_nvidia_dynamic_lib("nvrtc").abs_path or "")
    except Exception:  # an old pathfinder, or NVRTC found another way: the other stamps still apply
        return ""


def nvrtc_version() -> tuple[int, int]:
    """(major, minor) of the NVRTC library that compiles, e.g. (13, 0)."""
    load_nvrtc()
    assert _version is not None
    return _version


_supported: tuple[str, ...] | None = None


def supported_archs() -> tuple[str, ...]:
    """The ``sm_XX`` targets the running NVRTC accepts (``nvrtcGetSupportedArchs``), oldest first."""
    global _supported
    if _supported is None:
        nvrtc = load_nvrtc()
        result, archs = nvrtc.nvrtcGetSupportedArchs()
        _check(nvrtc, result, "nvrtcGetSupportedArchs")
        _supported = tuple(f"sm_{int(a)}" for a in sorted(archs))
    return _supported


def default_archs() -> list[str]:
    """kspec's DEFAULT_ARCHS that the running NVRTC supports: what a build compiles when not told."""
    from ._options import DEFAULT_ARCHS

    supported = set(supported_archs())
    return [a for a in DEFAULT_ARCHS if a in supported]


class NvrtcCallError(RuntimeError):
    """An NVRTC API call other than the compile itself failed (the compile layer wraps it in CompileError)."""


def _check(nvrtc: ModuleType, result: Any, call: str) -> None:
    if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise NvrtcCallError(f"{call} failed with {result.name}")


def _decode_log(raw: bytes | bytearray) -> str:
    return bytes(raw).rstrip(b"\x00").decode("utf-8", errors="replace").strip()


class NvrtcOutput(NamedTuple):
    """What one NVRTC run produced. ``error`` is the failing status name ("" on success)."""

    error: str
    log: str
    binary: bytes = b""
    lowered_names: Mapping[str, str] = MappingProxyType({})  # read-only: the default is shared


def run_nvrtc(
    source: str, program_name: str, args: Sequence[str], name_expressions: Sequence[str], *, ptx: bool
) -> NvrtcOutput:
    """Compile ``source`` once; the program is always destroyed, whatever happens."""
    nvrtc = load_nvrtc()
    result, prog = nvrtc.nvrtcCreateProgram(source.encode("utf-8"), program_name.encode("utf-8"), 0, [], [])
    _check(nvrtc, result, "nvrtcCreateProgram")
    try:
        for expression in name_expressions:
            (result,) = nvrtc.nvrtcAddNameExpression(prog, expression.encode("utf-8"))
            _check(nvrtc, result, f"nvrtcAddNameExpression({expression!r})")
        (compiled,) = nvrtc.nvrtcCompileProgram(prog, len(args), [a.encode("utf-8") for a in args])
        result, log_size = nvrtc.nvrtcGetProgramLogSize(prog)
        _check(nvrtc, result, "nvrtcGetProgramLogSize")
        # A bytearray, not b" " * n: NVRTC writes into the buffer, and b" " * 1 is CPython's shared b" ".
        log_buffer = bytearray(log_size)
        (result,) = nvrtc.nvrtcGetProgramLog(prog, log_buffer)
        _check(nvrtc, result, "nvrtcGetProgramLog")
        log = _decode_log(log_buffer)
        if compiled != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            return NvrtcOutput(error=compiled.name, log=log)

        lowered: dict[str, str] = {}
        for expression in name_expressions:
            result, name = nvrtc.nvrtcGetLoweredName(prog, expression.encode("utf-8"))
            _check(nvrtc, result, f"nvrtcGetLoweredName({expression!r})")
            lowered[expression] = name.decode("utf-8") if isinstance(name, bytes) else str(name)

        get_size, get = (
            (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX) if ptx else (nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN)
        )
        result, size = get_size(prog)
        _check(nvrtc, result, get_size.__name__)
        # Kept exactly as NVRTC returns it: PTX ends in the NUL that cuModuleLoadData expects.
        buffer = bytearray(size)
        (result,) = get(prog, buffer)
        _check(nvrtc, result, get.__name__)
        return NvrtcOutput(error="", log=log, binary=bytes(buffer), lowered_names=lowered)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
