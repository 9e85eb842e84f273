"""The binary cache's size cap (LRU eviction) and its hit/miss counts, shared by concurrent processes.

**Cap.** ``KSPEC_CACHE_MAX_BYTES`` (default 1 GiB; ``0``: no cap) bounds the total size of the entry files.
"Least recently used" is the entry file's mtime: a write sets it and a hit read from disk sets it again
(``os.utime``, one system call; atime is unreliable under ``noatime``/``relatime`` mounts). Scanning the
directory costs a ``stat`` per entry, too much for every ``put``, so the cache trims only after
``cap / 16`` bytes were written since the last trim, counted across processes in the stats file, and then
down to 90% of the cap so that the next trim is not one entry away. A trim removes the oldest entry files
with ``unlink`` (atomic; a process that has one open keeps reading it, and a vanished file is skipped),
re-``stat``\\ s each before removing it (one read meanwhile keeps it), never touches temporary files (an
entry being written is a ``.<key>.XXXXXXXX.tmp`` until its atomic rename) nor the entry its own ``put``
just wrote. Only kspec's entry files count toward the cap or are removed.

**Counts.** Each process counts hits and misses in memory and adds them to ``.kspec-stats.json`` in the
cache directory when it writes an entry (it takes the stats lock then anyway) and at exit: one small
locked read-modify-write per process rather than a write per lookup, which would tax the serving path.
Counts of a process killed before exiting are lost; that is the price of not writing on every hit.
Hits are also counted per entry key (``entry_hits``, for ``kspec cache info --by-kernel``), in the same
update; the file keeps the ``MAX_ENTRY_HITS`` keys with the most hits (a long-lived cache with more
distinct entries than that forgets the least used ones' counts, so the file stays small), and a process
holds at most as many pending keys. With several cache directories (``KSPEC_CACHE_DIR=a:b``) the counts
go to the stats file of the directory written, whichever directory served the hit.

**Lock.** ``fcntl.flock`` on the stats file itself (POSIX; released by the kernel if a process dies), taken
with a bounded wait: a stopped process holding it delays a flush by at most ``_LOCK_WAIT_S``, after which
the counts stay pending for the next flush. Without ``fcntl`` (Windows) updates are unlocked and may
lose counts when processes race; entries are unaffected.
"""

from __future__ import annotations

import json
import os
import stat
import re
import time
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from ..._named_tuple import NamedTuple
from ..._errors import CacheWarning
from ._entry import ENTRY_SUFFIX, entry_key, is_entry_file

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

DEFAULT_MAX_BYTES = 1 << 30  # 1 GiB: hundreds to thousands of modules (a module is 10 KiB to a few MiB)
MAX_BYTES_ENV = "KSPEC_CACHE_MAX_BYTES"
STATS_NAME = ".kspec-stats.json"
_TRIM_EVERY_FRACTION = 16  # trim after cap / 16 bytes written since the last trim
_LOW_WATER = 0.9  # a trim goes down to 90% of the cap
_LOCK_WAIT_S = 2.0
MAX_ENTRY_HITS = 4096  # per-entry hit counts kept in the stats file (and pending in one process)
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
          "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}  # fmt: skip
_SIZE_RE = re.compile(r"\s*(\d+)\s*([a-zA-Z]*)\s*")
_warned_values: set[str] = set()


def parse_size(text: str) -> int:
    """``"1073741824"``, ``"512M"``, ``"2GiB"`` (binary units, case-insensitive) -> bytes; ValueError else."""
    match = _SIZE_RE.fullmatch(text)
    if not match or match.group(2).lower() not in _UNITS:
        raise ValueError(f"expected a size in bytes such as 1073741824, 512M or 2GiB (0: no cap), got {text!r}")
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def max_bytes_from_env() -> int | None:
    """The cap ``KSPEC_CACHE_MAX_BYTES`` sets (None: no cap), read on every call. A value that does not
    parse gives one CacheWarning per value and the default: a typo must not stop kernels from running."""
    text = os.environ.get(MAX_BYTES_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_BYTES
    try:
        value = parse_size(text)
    except ValueError as exc:
        if text not in _warned_values:
            _warned_values.add(text)
            warnings.warn(f"{MAX_BYTES_ENV}: {exc}; using the default {DEFAULT_MAX_BYTES} bytes", CacheWarning, stacklevel=3)
        return DEFAULT_MAX_BYTES
    return value or None


class Stats(NamedTuple):
    """The persisted counts of one cache directory (since ``since``, a Unix time; 0.0: never written)."""

    hits: int = 0
    misses: int = 0
    evictions: int = 0
    evicted_bytes: int = 0
    since: float = 0.0


@contextmanager
def _locked_stats(directory: Path, *, exclusive: bool) -> Iterator[IO[str] | None]:
    """The stats file opened and locked (None when it cannot be opened or locked in time). Never creates
    the directory: a cache that was never written has no stats to keep."""
    path = directory / STATS_NAME
    # O_CREAT without O_TRUNC: the first writer creates it, nobody truncates another's. O_NONBLOCK: a FIFO of
    # that name must not hang the open (or a read); anything but a regular file is no stats file
    flags = (os.O_RDWR | os.O_CREAT if exclusive else os.O_RDONLY) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError:
        yield None
        return
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        yield None
        return
    handle: IO[str] = os.fdopen(fd, "r+" if exclusive else "r", encoding="utf-8")
    with handle:
        if fcntl is not None:
            mode = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
            deadline = time.monotonic() + _LOCK_WAIT_S
            while True:
                try:
                    fcntl.flock(handle.fileno(), mode)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        yield None
                        return
                    time.sleep(0.005)
                except OSError:  # a file system without locks (some network mounts): go on unlocked
                    break
        yield handle  # the lock goes with the file descriptor when the handle closes


def _parse(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text) if text.strip() else {}
    except ValueError:
        return {}  # damaged (e.g. an unlocked writer on Windows): start the counts again
    return data if isinstance(data, dict) else {}


def read_stats(directory: Path | None) -> Stats:
    """The persisted counts (zeros when there are none or they cannot be read)."""
    if directory is None:
        return Stats()
    with _locked_stats(directory, exclusive=False) as handle:
        data = _parse(handle.read()) if handle is not None else {}
    return _stats(data)


def read_entry_hits(directory: Path | None) -> dict[str, int]:
    """The persisted hit counts per entry key (empty when there are none or they cannot be read)."""
    if directory is None:
        return {}
    with _locked_stats(directory, exclusive=False) as handle:
        data = _parse(handle.read()) if handle is not None else {}
    return _entry_hits(data)


def _entry_hits(data: dict[str, Any]) -> dict[str, int]:
    raw = data.get("entry_hits")
    if not isinstance(raw, dict):
        return {}
    return {k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, int) and v > 0}


def merged_hits(counts: dict[str, int], more: Mapping[str, int]) -> dict[str, int]:
    """``counts`` plus ``more``, the ``MAX_ENTRY_HITS`` largest kept (ties: the first seen)."""
    merged = dict(counts)
    for key, n in more.items():
        merged[key] = merged.get(key, 0) + n
    if len(merged) > MAX_ENTRY_HITS:
        merged = dict(sorted(merged.items(), key=lambda item: -item[1])[:MAX_ENTRY_HITS])
    return merged


def _stats(data: dict[str, Any]) -> Stats:
    def num(name: str) -> int:
        value = data.get(name, 0)
        return value if isinstance(value, int) and value >= 0 else 0

    since = data.get("since", 0.0)
    return Stats(num("hits"), num("misses"), num("evictions"), num("evicted_bytes"),
                 float(since) if isinstance(since, (int, float)) else 0.0)  # fmt: skip


def update_stats(
    directory: Path, *, hits: int = 0, misses: int = 0, written: int = 0, max_bytes: int | None = None,
    keep: str | None = None, reset: bool = False, entry_hits: Mapping[str, int] | None = None,
) -> bool:
    """Add counts to the stats file under its lock and, when ``written`` bytes push the bytes written since
    the last trim past ``max_bytes / 16``, trim the cache there and then (``entry_hits``: hits per entry key,
added to the file's bounded table). False when the file could not be
    updated (the caller keeps its counts for the next try)."""
    with _locked_stats(directory, exclusive=True) as handle:
        if handle is None:
            return False
        data = {"pending_bytes": 0} if reset else _parse(handle.read())  # an empty cache needs no trim
        stats = _stats(data)
        # Bytes written since the last trim; None when no trim is on record (a new cache, or one written by
        # a kspec without the cap): the first write then trims, so an oversized old cache shrinks at once.
        pending = data.get("pending_bytes")
        pending = pending if isinstance(pending, int) and pending >= 0 else None
        evictions, evicted_bytes = stats.evictions, stats.evicted_bytes
        if written and max_bytes is not None:
            if pending is None or pending + written >= max(1, max_bytes // _TRIM_EVERY_FRACTION):
                count, size = trim(directory, max_bytes, keep=keep)
                evictions, evicted_bytes, pending = evictions + count, evicted_bytes + size, 0
            else:
                pending += written
        new = {
            "hits": stats.hits + hits,
            "misses": stats.misses + misses,
            "evictions": evictions,
            "evicted_bytes": evicted_bytes,
            "pending_bytes": pending,
            "since": stats.since or time.time(),
            "entry_hits": merged_hits({} if reset else _entry_hits(data), entry_hits or {}),
        }
        try:
            # In place under the lock: readers take the shared lock, so they never see half of it. (A rename
            # would swap the locked inode for an unlocked one.)
            handle.seek(0)
            handle.write(json.dumps(new, sort_keys=True))
            handle.truncate()
            handle.flush()
        except OSError:
            return False
    return True


def trim(directory: Path, max_bytes: int, *, keep: str | None = None) -> tuple[int, int]:
    """Remove the least recently used entry files until their total is at most 90% of ``max_bytes``
    (nothing when it is at most ``max_bytes``); returns (entries removed, bytes removed). Safe while other
    processes read, write and trim: see the module's docstring."""
    entries: list[tuple[int, int, str]] = []  # (mtime_ns, size, name)
    try:
        with os.scandir(directory) as listing:
            for item in listing:
                key = entry_key(item.name)
                if key is None or key == keep:
                    continue
                try:
                    st = item.stat(follow_symlinks=False)
                except OSError:
                    continue  # removed meanwhile
                entries.append((st.st_mtime_ns, st.st_size, item.name))
    except OSError:
        return 0, 0
    keep_size = _size(directory / f"{keep}{ENTRY_SUFFIX}") if keep else 0
    total = sum(size for _, size, _ in entries) + keep_size
    if total <= max_bytes:
        return 0, 0
    target = int(max_bytes * _LOW_WATER)
    removed = removed_bytes = 0
    for mtime_ns, size, name in sorted(entries):
        if total <= target:
            break
        path = directory / name
        try:
            st = path.stat()
        except OSError:
            total -= size  # another process removed it
            continue
        if st.st_mtime_ns != mtime_ns:
            continue  # used (or rewritten) since the scan: no longer the least recently used
        if not is_entry_file(path):
            # Someone else's file that only looks like an entry: not kspec's to remove, nor to count (the
            # scan reads names only; opening every file to check would cost more than the trim)
            total -= size
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            total -= size
            continue
        except OSError:
            continue  # cannot remove it (permissions): try the next
        total -= st.st_size
        removed += 1
        removed_bytes += st.st_size
    return removed, removed_bytes


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def touch(path: Path) -> None:
    """Mark an entry as just used (its mtime is the LRU clock); a read-only cache or a vanished file is fine."""
    try:
        os.utime(path)
    except OSError:
        pass
