"""The binary cache: an in-process dict in front of one file per entry on disk.

An entry file (its name and layout: :mod:`._entry`) holds the binary with its name-expression ->
lowered-name map and metadata, so a cached module is usable on its own. A file that is short, has the wrong
magic, format or key, or fails its digest is a miss, never an error; the next ``put`` replaces it. The
directory may be shared with other files (``KSPEC_CACHE_DIR`` or ``kspec cache --dir`` pointed at one):
``info`` counts and ``clear`` removes only files named ``<key>.kbin`` that start with the magic, and kspec's
own old temporary files (:mod:`._clear`); ``clear_report`` says what it could not remove, and why.
Writes go to a temporary file in the same directory and are renamed into place, so readers (other
processes included) see either no entry or a whole one.

``KSPEC_CACHE_DIR`` may name several directories (``os.pathsep``-separated; :mod:`._dirs`): a lookup
reads each in order and the first whole entry wins; writes go to the first writable one, and only that one
is touched on hits, trimmed and has its counts updated. When none can be written the cache keeps entries in
memory, with one ``CacheWarning``.

The directory's total size is capped (``KSPEC_CACHE_MAX_BYTES``, default 1 GiB) by LRU eviction, and hits
and misses are counted across processes: both live in :mod:`._stats`.
"""

from __future__ import annotations

import atexit
import os
import threading
import warnings
import weakref
from dataclasses import replace
from collections.abc import Sequence
from pathlib import Path

from ..._named_tuple import NamedTuple
from ..._atomic import write_atomic
from ..._errors import CacheWarning, KspecValueError
from ..._memo import user_cache_dir, user_cache_dirs
from . import _dirs
from ._dirs import CacheEntry, DirectoryInfo, directory_info, list_entries
from ._stats import MAX_ENTRY_HITS, max_bytes_from_env, merged_hits, read_entry_hits, read_stats, touch, update_stats
from ._clear import ClearReport, clear_directory
from ._entry import ENTRY_SUFFIX, KEY_RE, decode_entry, encode_entry, read_regular
from .._program import CompiledProgram

_TMP_SUFFIX = ".tmp"  # write_atomic's temporary files; clear (._clear) removes old ones by this name

_warned_lock = threading.Lock()
_warned_dirs: set[str] = set()


class CacheInfo(NamedTuple):  # not a dataclass: defining one costs ~0.5 ms of every compiling process's start-up
    """What ``BinaryCache.info()`` reports. ``directory`` (the one written) is None for an in-memory cache;
    ``entries`` and ``total_bytes`` count every directory, ``directories`` each one in lookup order."""

    directory: Path | None
    entries: int
    total_bytes: int
    max_bytes: int | None = None  # the cap (None: no cap)
    hits: int = 0  # lookups served (this cache's directory: every process's, since `since`)
    misses: int = 0
    evictions: int = 0  # entries removed to keep under the cap
    since: float = 0.0  # Unix time the counts start from (0.0: nothing counted yet)
    directories: tuple[DirectoryInfo, ...] = ()


_PathLike = str | os.PathLike[str]


class BinaryCache:
    """Compiled programs by cache key: in memory, and on disk under ``directory`` (None: memory only; a
    sequence: several directories, looked up in order, the first writable one written).

    Never raises for I/O: an unreadable entry is a miss; a cache that cannot write any of its directories
    gives one ``CacheWarning`` per process and directories, after which it keeps entries in memory only.
    Constructing one touches no disk.
    """

    def __init__(self, directory: _PathLike | Sequence[_PathLike] | None, *, max_bytes: int | None = None) -> None:
        """``max_bytes``: the cap on the written directory's entry files; None reads ``KSPEC_CACHE_MAX_BYTES``
        (default 1 GiB) at each write, 0 means no cap."""
        given = () if directory is None else (directory,) if isinstance(directory, (str, os.PathLike)) else directory
        directories: list[Path] = []
        for item in given:
            path = Path(os.path.abspath(os.path.expanduser(item)))
            if path not in directories:
                directories.append(path)
        self._directories = tuple(directories)
        self._directory = directories[0] if directories else None  # the first: where a single-directory cache writes
        self._probed: dict[int, bool] = {}  # directory index -> writable (asked once, when first needed)
        self._failed: set[int] = set()  # directories a write failed in: not tried again by this cache
        self._memory: dict[str, CompiledProgram] = {}
        self._writable = self._directory is not None
        if max_bytes is not None and (not isinstance(max_bytes, int) or max_bytes < 0):
            raise KspecValueError(f"max_bytes: expected a number of bytes >= 0 (0: no cap), got {max_bytes!r}")
        self._max_bytes = max_bytes
        # Counts not yet added to the directory's stats file (see _stats: flushed at a write and at exit)
        self._hits = self._misses = 0
        self._key_hits: dict[str, int] = {}  # hits per entry key, pending like the counts
        self._counted_in = os.getpid()  # a forked child must not flush its parent's counts again
        self._count_lock = threading.Lock()  # a build's compile threads share one cache

    def __repr__(self) -> str:
        where = "memory only" if self._directory is None else os.pathsep.join(map(str, self._directories))
        return f"BinaryCache({where})"

    @property
    def directory(self) -> Path | None:
        """The directory entries are written to: the first writable one (the first one when none is, or
        when there is only one); None for a memory-only cache."""
        index = self._write_index()
        return self._directory if index is None else self._directories[index]

    @property
    def directories(self) -> tuple[Path, ...]:
        """Every directory, in lookup order (empty for a memory-only cache)."""
        return self._directories

    def _write_index(self) -> int | None:
        """The index of the directory written: the first not failed whose probe says writable (a single
        directory is always tried: its write's error is what the warning reports). None: none is left."""
        for index in range(len(self._directories)):
            if index in self._failed:
                continue
            if len(self._directories) == 1:
                return index
            if index not in self._probed:
                self._probed[index] = _dirs.writable(self._directories[index])
            if self._probed[index]:
                return index
        return None

    @property
    def max_bytes(self) -> int | None:
        """The cap on the entry files' total size now (None: no cap)."""
        if self._max_bytes is not None:
            return self._max_bytes or None
        return max_bytes_from_env()

    def _count(self, key: str, hit: bool) -> None:
        with self._count_lock:
            if self._counted_in != os.getpid():
                self._hits = self._misses = 0
                self._key_hits = {}
                self._counted_in = os.getpid()
            if hit:
                self._hits += 1
                if key in self._key_hits or len(self._key_hits) < MAX_ENTRY_HITS:
                    self._key_hits[key] = self._key_hits.get(key, 0) + 1
            else:
                self._misses += 1
            first = self._hits + self._misses == 1
        if first and self._directory is not None:
            _unflushed.add(self)

    def _take_counts(self) -> tuple[int, int, dict[str, int]]:
        """This process's counts not yet flushed, now zero (the caller gives them back if the flush fails)."""
        with self._count_lock:
            if self._counted_in != os.getpid():
                return 0, 0, {}
            taken = self._hits, self._misses, self._key_hits
            self._hits = self._misses = 0
            self._key_hits = {}
            return taken

    def _give_back(self, hits: int, misses: int, key_hits: dict[str, int]) -> None:
        with self._count_lock:
            self._hits += hits
            self._misses += misses
            self._key_hits = merged_hits(self._key_hits, key_hits)

    def flush_counts(self) -> None:
        """Add this process's hit and miss counts to the written directory's stats file (done at exit anyway)."""
        directory = self.directory
        if directory is None:
            return
        hits, misses, key_hits = self._take_counts()
        if (hits or misses) and not update_stats(directory, hits=hits, misses=misses, entry_hits=key_hits):
            self._give_back(hits, misses, key_hits)

    def _name(self, key: str) -> str:
        if not isinstance(key, str) or not KEY_RE.fullmatch(key):
            raise KspecValueError(f"key: expected a hex digest from cache_key(), got {key!r}")
        return f"{key}{ENTRY_SUFFIX}"

    def get(self, key: str) -> CompiledProgram | None:
        """The cached program (``compile_ms == 0.0``), or None. Directories are read in order; a file that
        is absent, unreadable, torn or damaged is a miss there, and the next directory is read."""
        program = self._memory.get(key)
        if program is not None or self._directory is None:
            self._count(key, program is not None)
            return program
        name = self._name(key)
        for index, directory in enumerate(self._directories):
            path = directory / name
            try:
                data = read_regular(path)
            except OSError:  # absent, unreadable, not a regular file, or the "directory" is a file
                continue
            program = decode_entry(data, key)
            if program is not None:
                self._memory[key] = program
                if index == self._write_index():  # a read-only directory's entries are neither touched nor trimmed
                    touch(path)  # the LRU clock: a used entry is the last to be evicted
                break
        self._count(key, program is not None)
        return program

    def put(self, key: str, program: CompiledProgram, *, kernel: str = "") -> None:
        """Store ``program`` in memory and, while a directory is writable, on disk (``kernel``: the kernel's
        name, recorded in the entry for ``kspec cache info --by-kernel``)."""
        program = replace(program, compile_ms=0.0) if program.compile_ms else program
        name = self._name(key) if self._directory is not None else None
        self._memory[key] = program
        if name is None or not self._writable:
            return
        data = encode_entry(key, program, kernel=kernel)
        error: OSError | None = None
        while (index := self._write_index()) is not None:
            path = self._directories[index] / name
            try:
                write_atomic(path, data, tmp_suffix=_TMP_SUFFIX)
                break
            except OSError as exc:
                if decode_entry(_read_or_empty(path), key) is not None:
                    return  # another process put the same entry first (os.replace over an open file on Windows)
                self._failed.add(index)  # the probe said writable, the write says otherwise: try the next one
                error = exc
        else:
            self._writable = False
            _warn_once(self._directories, error)
            return
        # Counts and the bytes written go to the stats file under its lock, which trims the directory to the
        # cap when enough was written since the last trim; never the entry just written.
        hits, misses, key_hits = self._take_counts()
        if not update_stats(path.parent, hits=hits, misses=misses, written=len(data), max_bytes=self.max_bytes,
                            keep=key, entry_hits=key_hits):  # fmt: skip
            self._give_back(hits, misses, key_hits)

    def info(self) -> CacheInfo:
        """The written directory, number of entries and their total size in bytes over every directory (of
        the memory layer when no directory), each directory's, and the counts of the written one."""
        pending = (self._hits, self._misses) if self._counted_in == os.getpid() else (0, 0)
        if self._directory is None:
            total = sum(len(p.binary) for p in self._memory.values())
            return CacheInfo(None, len(self._memory), total, None, *pending)
        written = self.directory
        writes = self._writable and self._write_index() is not None
        each = tuple(directory_info(d, written=writes and d == written) for d in self._directories)
        stats = read_stats(written)  # every process's flushed counts, plus this one's pending ones
        return CacheInfo(written, sum(d.entries for d in each), sum(d.total_bytes for d in each), self.max_bytes,
                         stats.hits + pending[0], stats.misses + pending[1], stats.evictions, stats.since, each)  # fmt: skip

    def entries(self) -> list[CacheEntry]:
        """Every entry of every directory (a key in two, once: where a lookup finds it), with its kernel's
        name and its hits (the written directory's stats file, plus this process's pending ones)."""
        hits = merged_hits(read_entry_hits(self.directory), self._key_hits if self._counted_in == os.getpid() else {})
        return list_entries(self._directories, hits)

    def clear(self) -> int:
        """Remove every entry (memory and disk); return how many were removed (on disk, when there is a disk)."""
        return self.clear_report().removed

    def clear_report(self) -> ClearReport:
        """Remove every entry kspec wrote (memory and disk) and say what could not be removed, and why
        (``failed``: (path, reason) pairs; one failure does not stop the others). With several directories
        only the writable ones are cleared; the others are reported as ``skipped``."""
        in_memory = len(self._memory)
        self._memory.clear()
        self._take_counts()  # the counts start again with the empty cache
        if self._directory is None:
            return ClearReport(in_memory, [])
        removed, failed, skipped = 0, [], []
        for directory in self._directories:
            if len(self._directories) > 1 and not _dirs.writable(directory):
                skipped.append(directory)
                continue
            count, problems = clear_directory(directory)
            removed += count
            failed += problems
        return ClearReport(removed, failed, tuple(skipped))


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
        return read_regular(path)
    except OSError:
        return b""


def _warn_once(directories: tuple[Path, ...], exc: OSError | None) -> None:
    where = os.pathsep.join(map(str, directories))
    with _warned_lock:
        if where in _warned_dirs:
            return
        _warned_dirs.add(where)
    why = "none is writable" if exc is None else f"{exc.__class__.__name__}: {exc}"
    at = f"at {where}" if len(directories) == 1 else f"in any of its directories {where}"
    warnings.warn(
        f"kspec cannot write its binary cache {at} ({why}); compiled kernels are kept in memory for this "
        "process only. Set KSPEC_CACHE_DIR to a writable directory (or add one to its list).",
        CacheWarning,
        stacklevel=4,
    )


def default_cache_dir() -> Path:
    """The first directory of ``KSPEC_CACHE_DIR``, else the platform's per-user cache directory + kspec."""
    return user_cache_dir()


def default_cache_dirs() -> tuple[Path, ...]:
    """Every directory of ``KSPEC_CACHE_DIR`` (``os.pathsep``-separated), else the platform's one."""
    return user_cache_dirs()


_registry_lock = threading.Lock()
_registry: dict[tuple[Path, ...], BinaryCache] = {}


def default_cache() -> BinaryCache:
    """The process's cache for the current ``default_cache_dirs()`` (the variable is read on every call)."""
    directories = default_cache_dirs()
    with _registry_lock:
        cache = _registry.get(directories)
        if cache is None:
            cache = _registry[directories] = BinaryCache(directories)
        return cache
