"""The compile log: every kernel load of this process, where its code came from and how long it took.

A load is recorded where it happens: a precompiled binary (a BinaryStore, a wheel's ``_binaries``, a
RawModule's ``path=``) by the kernels layer, a binary-cache hit or a compile by ``compile_cached`` (for the
kernels that compile on their own). :func:`compile_log` gives the entries as :class:`CompileEvent`;
recording keeps plain tuples in a bounded deque (the last :data:`LOG_MAX` loads) and imports nothing, so a
process served by binaries pays a tuple per load. With ``KSPEC_LOG=compile`` (a comma-separated list may
name other things too) each load is also printed to stderr as one line::

    kspec compile: <source> <kernel> [<what>] <arch> <ms> ms[ (<reason>)]

e.g. ``kspec compile: compiled squared_diff [T=float32; variant ...] sm_90 21.408 ms (new specialization)``.
"""

from __future__ import annotations

import os
import sys
import threading
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._log_entry import CompileEvent

LOG_ENV = "KSPEC_LOG"
LOG_MAX = 10_000
SOURCES = ("binary", "cache", "compiled")
REASONS = ("no binary for this arch", "new specialization", "stale cache entry")

_lock = threading.Lock()
_entries: deque[tuple[str, str, str, str, float, str]] = deque(maxlen=LOG_MAX)


def _printing() -> bool:
    value = os.environ.get(LOG_ENV)
    return bool(value) and "compile" in (part.strip().lower() for part in value.split(","))  # type: ignore[union-attr]


def format_line(kernel: str, what: str, arch: str, source: str, ms: float, reason: str = "") -> str:
    """One load as ``KSPEC_LOG=compile`` prints it (the module doc gives the format)."""
    line = f"kspec compile: {source} {kernel} [{what}] {arch} {ms:.3f} ms"
    return f"{line} ({reason})" if reason else line


def record_load(kernel: str, what: str, arch: str, source: str, ms: float, reason: str = "") -> None:
    """Add one load to the log (``source``: 'binary', 'cache' or 'compiled'; ``reason`` for 'compiled')."""
    with _lock:
        _entries.append((kernel, what, arch, source, ms, reason))
    if _printing():
        print(format_line(kernel, what, arch, source, ms, reason), file=sys.stderr, flush=True)


def compile_log() -> list[CompileEvent]:
    """This process's kernel loads, oldest first (at most the last :data:`LOG_MAX`)."""
    from ._log_entry import CompileEvent

    with _lock:
        entries = list(_entries)
    return [CompileEvent(*entry) for entry in entries]


def clear_compile_log() -> None:
    """Forget the loads recorded so far."""
    with _lock:
        _entries.clear()
