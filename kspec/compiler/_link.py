"""One front end for every arch: a module's PTX, compiled once, linked into each arch's CUBIN by nvJitLink.

NVRTC's front end (parsing and instantiating kspec's templates) is about 60% of a module's compile for one arch,
and ``kspec build`` used to pay it once per arch. Compiling the module once to PTX for the build's lowest arch
(``compute_80``) and letting nvJitLink (ptxas in-process, no GPU) make each arch's CUBIN from it takes 0.59x the
time for the default four archs (benchmarks/NOTES.md, v36). The CUBINs are what the driver would make from that
PTX on each GPU: the same code, except where a source branches on ``__CUDA_ARCH__``, which then sees the lowest
arch. So :func:`one_front_end` admits only modules that do not (kspec's own templates never do; user code and
raw modules may, and compile per arch as before).

nvJitLink comes with ``kspec[nvrtc]`` (cuda-toolkit's ``nvjitlink`` extra, the same release as NVRTC); where it is
missing or older than NVRTC, :func:`link_available` says no and builds compile per arch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from types import ModuleType

from .._errors import CompileError
from ._arch import arch_number
from ._program import CompiledProgram

_lock = threading.Lock()
_module: list[ModuleType | None] = []  # [cuda.bindings.nvjitlink or None], once looked up


def _nvjitlink() -> ModuleType | None:
    with _lock:
        if not _module:
            try:
                from cuda.bindings import nvjitlink

                nvjitlink.version()  # opens the library: cuda.pathfinder raises where it is not installed
                _module.append(nvjitlink)
            except Exception:  # noqa: BLE001  # no binding, no library, an old one: compile per arch
                _module.append(None)
        return _module[0]


def link_available() -> bool:
    """Whether nvJitLink can be used here (its binding and library load)."""
    return _nvjitlink() is not None


def one_front_end(source: str, archs: Sequence[str], options: Sequence[str]) -> str | None:
    """The PTX arch (``compute_XX``) a module compiled for ``archs`` should be compiled for once, or None where
    it must compile per arch: a single arch, an arch with a feature suffix (``sm_90a``), a PTX target, user
    options that choose an arch or relocatable code, a source that branches on ``__CUDA_ARCH__``, no nvJitLink."""
    if len(set(archs)) < 2 or any(not a.startswith("sm_") or not a[3:].isdigit() for a in archs):
        return None
    if any(o.startswith(("-arch", "--gpu-architecture", "-rdc", "--relocatable", "-dlto", "-dc")) for o in options):
        return None
    if "__CUDA_ARCH" in source or not link_available():
        return None
    return f"compute_{min(arch_number(a) for a in archs)}"


def link_ptx(ptx: CompiledProgram, arch: str, name: str) -> CompiledProgram:
    """The CUBIN for ``arch`` (``sm_XX``) of a module's PTX (``ptx.format == "ptx"``): nvJitLink runs ptxas;
    the GIL is released while it does, so threads link in parallel. Raises CompileError with nvJitLink's log."""
    nvjitlink = _nvjitlink()
    if nvjitlink is None or ptx.format != "ptx":
        raise CompileError(f"kernel {name!r}: cannot link for {arch}: nvJitLink is not available or no PTX was given",
                           kernel=name)
    start = time.perf_counter()
    options = [f"-arch={arch}"]
    handle = nvjitlink.create(len(options), options)
    try:
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, ptx.binary, len(ptx.binary), f"{name}.ptx")
            nvjitlink.complete(handle)
            size = nvjitlink.get_linked_cubin_size(handle)
            cubin = bytearray(size)
            nvjitlink.get_linked_cubin(handle, cubin)
        except Exception as exc:  # nvJitLinkError: the log says what ptxas found
            log = _error_log(nvjitlink, handle)
            raise CompileError(f"kernel {name!r}: nvJitLink could not make the {arch} binary from its PTX: {exc}\n{log}",
                               kernel=name, log=log) from None
    finally:
        nvjitlink.destroy(handle)
    return CompiledProgram(
        binary=bytes(cubin), format="cubin", arch=arch, lowered_names=ptx.lowered_names, log=ptx.log,
        nvrtc_version=ptx.nvrtc_version, compile_ms=ptx.compile_ms + (time.perf_counter() - start) * 1e3,
    )


def _error_log(nvjitlink: ModuleType, handle: int) -> str:
    try:
        size = nvjitlink.get_error_log_size(handle)
        log = bytearray(size)
        nvjitlink.get_error_log(handle, log)
        return log.rstrip(b"\0").decode("utf-8", "replace")
    except Exception:  # noqa: BLE001  # the log is a courtesy
        return ""
