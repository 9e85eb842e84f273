"""The CPU device's fault guard: kspec_host/signals.cc, built once by the host compiler and loaded here.

Host modules run kernel code inside the library's ``kspec_host_guarded`` (through the function pointers of
each launch, templates/include_host/kspec_host/entry.h), which turns a kernel thread's SIGSEGV, SIGBUS or SIGFPE
into a fault record instead of a dead process. Built on first use, kept in the binary cache like any host binary
(kspec/compiler/host/_library.py), loaded for the life of the process.
"""

from __future__ import annotations

import ctypes
import os
import tempfile
import threading
import warnings

_lock = threading.Lock()
_pointers: tuple[int, int] | None = None
_keep: list[ctypes.CDLL] = []  # the library stays loaded: its handler is installed for the process


def guard_pointers() -> tuple[int, int]:
    """(kspec_host_guarded, kspec_host_describe) as addresses; (0, 0) where the library could not be built
    (kernels then run unguarded, with a warning once)."""
    global _pointers
    if _pointers is not None:
        return _pointers
    with _lock:
        if _pointers is None:
            _pointers = _load()
    return _pointers


def _load() -> tuple[int, int]:
    from ..._errors import KspecError
    from ..._resources import templates_dir
    from ...compiler import compile_host_library

    source_path = templates_dir() / "include_host" / "kspec_host" / "signals.cc"
    try:
        program = compile_host_library(source_path.read_text(encoding="utf-8"), "kspec_host_signals")
    except (KspecError, OSError) as exc:
        warnings.warn(f"kspec's CPU device runs kernels without its fault guard (a kernel's SIGSEGV will end the "
                      f"process): building kspec_host/signals.cc failed: {exc}", RuntimeWarning, stacklevel=3)  # fmt: skip
        return (0, 0)
    fd, path = tempfile.mkstemp(prefix="kspec-host-signals-", suffix=".so")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(program.binary)
        library = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
    finally:
        os.unlink(path)  # mapped now; nothing to clean up at exit
    _keep.append(library)
    guarded = ctypes.cast(library.kspec_host_guarded, ctypes.c_void_p).value or 0
    describe = ctypes.cast(library.kspec_host_describe, ctypes.c_void_p).value or 0
    return (guarded, describe)
