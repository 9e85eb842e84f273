"""The binary cache: an in-process dict in front of one file per entry on disk.

An entry file (its name and layout: :mod:`._entry`) holds the binary with its name-expression ->
lowered-name map and metadata, so a cached module is usable on its own. A file that is short, has the wrong
magic, format or key, or fails its digest is a miss, never an error; the next ``put`` replaces it. The
directory may be shared with other files (``KSPEC_CACHE_DIR`` or ``kspec cache --dir`` pointed at one):
``info`` counts and ``clear`` removes only files named ``<key>.kbin`` that start with the magic, and kspec's
own old temporary files (``.<key>.XXXXXXXX.tmp``, empty or starting with the magic); ``clear_report`` says
what it could not remove. Writes go to a temporary file in the same directory and are renamed into place,
so readers (other processes included) see either no entry or a whole one.

The directory's total size is capped (``KSPEC_CACHE_MAX_BYTES``, default 1 GiB) by LRU eviction, and hits
and misses are counted across processes: both live in :mod:`._cache_stats`.
"""

from __future__ import annotations

import atexit
import os
import re
import threading
import time
import warnings
import weakref
from dataclasses import replace
from typing import NamedTuple
from pathlib import Path

from .._atomic import write_atomic
from .._errors import CacheWarning, KspecValueError
from .._memo import user_cache_dir
from ._cache_stats import max_bytes_from_env, read_stats, touch, update_stats
from ._entry import ENTRY_SUFFIX, KEY_RE, decode_entry, encode_entry, entry_key, has_magic, is_entry_file
from ._program import CompiledProgram

_TMP_SUFFIX = ".tmp"
# A temporary file this old is an orphan of a killed writer; `clear` removes it. Younger ones may be in use.
_ORPHAN_AGE_S = 3600.0
# write_atomic's temporary names: "." + the key's first 16 characters + "." + mkstemp's 8 + ".tmp"
_TMP_RE = re.compile(r"\.[0-9A-Za-z_.-]{1,16}\.[0-9A-Za-z_]{8}\.tmp")

_warned_lock = threading.Lock()
_warned_dirs: set[str] = set()


class CacheInfo(NamedTuple):  # not a dataclass: defining one costs ~0.5 ms of every compiling process's start-up
    """What ``BinaryCache.info()`` reports. ``directory`` is None for an in-memory cache."""

    directory: Path | None
    entries: int
    total_bytes: int
    max_bytes: int | None = None  # the cap (None: no cap)
    hits: int = 0  # lookups served (this cache's directory: every process's, since `since`)
    misses: int = 0
    evictions: int = 0  # entries removed to keep under the cap
    since: float = 0.0  # Unix time the counts start from (0.0: nothing counted yet)


class BinaryCache:
    """Compiled programs by cache key: in memory, and on disk under ``directory`` (None: memory only).

    Never raises for I/O: an unreadable entry is a miss; a directory that cannot be written gives one
    ``CacheWarning`` per process and directory, after which this cache keeps entries in memory only.
    Constructing one touches no disk.
    """

    def __init__(self, directory: str | os.PathLike[str] | None, *, max_bytes: int | None = None) -> None:
        """``max_bytes``: the cap on the directory's entry files; None reads ``KSPEC_CACHE_MAX_BYTES`` (default
        1 GiB) at each write, 0 means no cap."""
        self._directory = None if directory is None else Path(os.path.abspath(os.path.expanduser(directory)))
        self._memory: dict[str, CompiledProgram] = {}
        self._writable = self._directory is not None
        if max_bytes is not None and (not isinstance(max_bytes, int) or max_bytes < 0):
            raise KspecValueError(f"max_bytes: expected a number of bytes >= 0 (0: no cap), got {max_bytes!r}")
        self._max_bytes = max_bytes
        # Counts not yet added to the directory's stats file (see _cache_stats: flushed at a write and at exit)
        self._hits = self._misses = 0
        self._counted_in = os.getpid()  # a forked child must not flush its parent's counts again
        self._count_lock = threading.Lock()  # a build's compile threads share one cache

    def __repr__(self) -> str:
        where = "memory only" if self._directory is None else str(self._directory)
        return f"BinaryCache({where})"

    @property
    def directory(self) -> Path | None:
        return self._directory

    @property
    def max_bytes(self) -> int | None:
        """The cap on the entry files' total size now (None: no cap)."""
        if self._max_bytes is not None:
            return self._max_bytes or None
        return max_bytes_from_env()

    def _count(self, hit: bool) -> None:
        with self._count_lock:
            if self._counted_in != os.getpid():
                self._hits = self._misses = 0
                self._counted_in = os.getpid()
            if hit:
                self._hits += 1
            else:
                self._misses += 1
            first = self._hits + self._misses == 1
        if first and self._directory is not None:
            _unflushed.add(self)

    def _take_counts(self) -> tuple[int, int]:
        """This process's counts not yet flushed, now zero (the caller gives them back if the flush fails)."""
        with self._count_lock:
            if self._counted_in != os.getpid():
                return 0, 0
            taken = self._hits, self._misses
            self._hits = self._misses = 0
            return taken

    def _give_back(self, hits: int, misses: int) -> None:
        with self._count_lock:
            self._hits += hits
            self._misses += misses

    def flush_counts(self) -> None:
        """Add this process's hit and miss counts to the directory's stats file (done at exit anyway)."""
        if self._directory is None:
            return
        hits, misses = self._take_counts()
        if (hits or misses) and not update_stats(self._directory, hits=hits, misses=misses):
            self._give_back(hits, misses)

    def _path(self, key: str) -> Path:
        assert self._directory is not None
        if not isinstance(key, str) or not KEY_RE.fullmatch(key):
            raise KspecValueError(f"key: expected a hex digest from cache_key(), got {key!r}")
        return self._directory / f"{key}{ENTRY_SUFFIX}"

    def get(self, key: str) -> CompiledProgram | None:
        """The cached program (``compile_ms == 0.0``), or None."""
        program = self._memory.get(key)
        if program is not None or self._directory is None:
            self._count(program is not None)
            return program
        path = self._path(key)
        try:
            data = path.read_bytes()
        except OSError:  # absent, unreadable, or the "directory" is a file
            self._count(False)
            return None
        program = decode_entry(data, key)
        self._count(program is not None)
        if program is not None:
            self._memory[key] = program
            touch(path)  # the LRU clock: a used entry is the last to be evicted
        return program

    def put(self, key: str, program: CompiledProgram) -> None:
        """Store ``program`` in memory and, while the directory is writable, on disk."""
        program = replace(program, compile_ms=0.0) if program.compile_ms else program
        path = self._path(key) if self._directory is not None else None
        self._memory[key] = program
        if path is None or not self._writable:
            return
        data = encode_entry(key, program)
        try:
            write_atomic(path, data, tmp_suffix=_TMP_SUFFIX)
        except OSError as exc:
            if decode_entry(_read_or_empty(path), key) is not None:
                return  # another process put the same entry first (os.replace over an open file on Windows)
            self._writable = False
            _warn_once(path.parent, exc)
            return
        # Counts and the bytes written go to the stats file under its lock, which trims the directory to the
        # cap when enough was written since the last trim; never the entry just written.
        hits, misses = self._take_counts()
        if not update_stats(path.parent, hits=hits, misses=misses, written=len(data), max_bytes=self.max_bytes, keep=key):
            self._give_back(hits, misses)

    def _entry_files(self) -> list[Path]:
        """The entry files kspec wrote: named ``<key>.kbin`` and starting with kspec's magic. The directory
        may be shared with other files (``KSPEC_CACHE_DIR=~/work``): nothing else is counted or removed."""
        return self._scan()[0]

    def _scan(self) -> tuple[list[Path], list[tuple[Path, str]]]:
        """(entry files, problems): a directory that exists but cannot be listed is a problem to report."""
        if self._directory is None:
            return [], []
        try:
            names = list(self._directory.iterdir())
        except FileNotFoundError:
            return [], []
        except OSError as exc:
            return [], [(self._directory, exc.strerror or str(exc))]
        found = []
        for p in names:
            if entry_key(p.name) is not None and is_entry_file(p):
                found.append(p)
        return found, []

    def info(self) -> CacheInfo:
        """Directory, number of entries and their total size in bytes (of the memory layer when no directory)."""
        pending = (self._hits, self._misses) if self._counted_in == os.getpid() else (0, 0)
        if self._directory is None:
            total = sum(len(p.binary) for p in self._memory.values())
            return CacheInfo(None, len(self._memory), total, None, *pending)
        entries, total = 0, 0
        for path in self._entry_files():
            try:
                total += path.stat().st_size
            except OSError:
                continue
            entries += 1
        stats = read_stats(self._directory)  # every process's flushed counts, plus this one's pending ones
        return CacheInfo(self._directory, entries, total, self.max_bytes, stats.hits + pending[0],
                         stats.misses + pending[1], stats.evictions, stats.since)  # fmt: skip

    def clear(self) -> int:
        """Remove every entry (memory and disk); return how many were removed (on disk, when there is a disk)."""
        return self.clear_report().removed

    def clear_report(self) -> "ClearReport":
        """Remove every entry kspec wrote (memory and disk) and say what could not be removed, and why."""
        in_memory = len(self._memory)
        self._memory.clear()
        self._take_counts()  # the counts start again with the empty cache
        if self._directory is None:
            return ClearReport(in_memory, [])
        paths, failed = self._scan()
        if self._directory.is_dir():
            update_stats(self._directory, reset=True)
        removed = 0
        for path in paths:
            try:
                path.unlink()
                removed += 1
            except FileNotFoundError:
                pass  # another process removed it first
            except OSError as exc:
                failed.append((path, exc.strerror or str(exc)))
        self._remove_orphans()
        return ClearReport(removed, failed)

    def _remove_orphans(self) -> None:
        assert self._directory is not None
        cutoff = time.time() - _ORPHAN_AGE_S
        try:
            candidates = [p for p in self._directory.iterdir() if _TMP_RE.fullmatch(p.name)]
        except OSError:
            return
        for path in candidates:
            try:
                # only kspec's own temporary files: its name pattern, and empty or starting with its magic
                if path.stat().st_mtime < cutoff and has_magic(path, empty_ok=True):
                    path.unlink()
            except OSError:
                pass


class ClearReport(NamedTuple):
    """What ``BinaryCache.clear_report()`` did: entries removed, and the paths it could not remove (why)."""

    removed: int
    failed: list[tuple[Path, str]]


# Caches holding counts not yet in their stats file; flushed at exit (weak: a dropped cache is not kept).
_unflushed: "weakref.WeakSet[BinaryCache]" = weakref.WeakSet()


@atexit.register
def _flush_at_exit() -> None:
    for cache in list(_unflushed):
        try:
            cache.flush_counts()
        except Exception:  # noqa: BLE001 - counts are best effort; exit must not fail over them
            pass


def _read_or_empty(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _warn_once(directory: Path, exc: OSError) -> None:
    with _warned_lock:
        if str(directory) in _warned_dirs:
            return
        _warned_dirs.add(str(directory))
    warnings.warn(
        f"kspec cannot write its binary cache at {directory} ({exc.__class__.__name__}: {exc}); compiled "
        "kernels are kept in memory for this process only. Set KSPEC_CACHE_DIR to a writable directory.",
        CacheWarning,
        stacklevel=4,
    )


def default_cache_dir() -> Path:
    """``KSPEC_CACHE_DIR``, else the platform's per-user cache directory + kspec."""
    return user_cache_dir()


_registry_lock = threading.Lock()
_registry: dict[Path, BinaryCache] = {}


def default_cache() -> BinaryCache:
    """The process's cache for the current ``default_cache_dir()`` (the variable is read on every call)."""
    directory = default_cache_dir()
    with _registry_lock:
        cache = _registry.get(directory)
        if cache is None:
            cache = _registry[directory] = BinaryCache(directory)
        return cache
