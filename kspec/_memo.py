"""Facts that are costly to compute and rarely change, memoized on disk once per install (a leaf module).

A process that serves kernels from binaries or from the binary cache must not hash kspec's template tree,
load NVRTC or ask cuda.pathfinder where the CUDA headers are: each costs milliseconds to tens of
milliseconds, and the answers change only when something is installed. So they are computed once, written
as small JSON files in :func:`memo_dir` and reused while a *stamp* of what they depend on
(paths with size and mtime, environment variables) is unchanged. Stamps use ``stat`` only: cheaper than
reading, and an edit in place changes the mtime. A memo that cannot be read or written is recomputed;
nothing here raises for I/O.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ._atomic import write_atomic
from ._digest import sha256

MEMO_FORMAT = 1  # bump when what a memo holds changes meaning


def user_cache_dir() -> Path:
    """The first directory of :func:`user_cache_dirs`."""
    return user_cache_dirs()[0]


def user_cache_dirs() -> tuple[Path, ...]:
    """``KSPEC_CACHE_DIR`` (one directory, or several separated by ``os.pathsep``), else the platform's
    per-user cache directory + kspec. Never empty. Read on every call; worked out once per value (every
    kernel's first call asks)."""
    return _resolved("cache", os.environ.get("KSPEC_CACHE_DIR", ""))


def _resolved(what: str, text: str) -> tuple[Path, ...]:
    """The directories of an environment value (``what``: ``cache`` or ``memo``), once per value and home."""
    key = (what, text, os.environ.get("HOME"), os.environ.get("XDG_CACHE_HOME"), os.environ.get("LOCALAPPDATA"))
    found = _RESOLVED.get(key)
    if found is None:
        if what == "cache":
            found = split_dirs(text) or (_platform_cache_dir(),)
        elif text:
            found = (Path(os.path.abspath(os.path.expanduser(text))),)
        else:
            base = _platform_cache_dir()
            found = (base.with_name(base.name + "-meta"),)
        if len(_RESOLVED) > 64:
            _RESOLVED.clear()
        _RESOLVED[key] = found
    return found


_RESOLVED: dict[tuple[str, str, str | None, str | None, str | None], tuple[Path, ...]] = {}


def split_dirs(text: str) -> tuple[Path, ...]:
    """``"a:b:~/c"`` (``os.pathsep``) -> absolute paths in order; empty items and repeats are dropped."""
    found: list[Path] = []
    for item in text.split(os.pathsep):
        if item.strip():
            path = Path(os.path.abspath(os.path.expanduser(item)))
            if path not in found:
                found.append(path)
    return tuple(found)


def memo_dir() -> Path:
    """``KSPEC_MEMO_DIR``, else ``kspec-meta`` beside the platform's kspec cache directory. Never inside the
    binary cache directory: that one may be shared (``KSPEC_CACHE_DIR``) and holds only cache entries."""
    return _resolved("memo", os.environ.get("KSPEC_MEMO_DIR") or "")[0]


def _platform_cache_dir() -> Path:
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.join(os.path.expanduser("~"), "AppData", "Local")
        return Path(base, "kspec", "Cache")
    if sys.platform == "darwin":
        return Path(os.path.expanduser("~"), "Library", "Caches", "kspec")
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # the XDG spec says to ignore a relative value
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "kspec")


def path_stamp(path: str | os.PathLike[str]) -> str:
    """``size:mtime_ns`` of a path, or ``-`` when it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return "-"
    return f"{st.st_size}:{st.st_mtime_ns}"


def memoized(name: str, stamp: str, compute: Callable[[], Any]) -> Any:
    """The JSON value stored under ``name`` when it was stored with this ``stamp``; else ``compute()``,
    stored for the next process. ``name`` must be a plain file name."""
    path = memo_dir() / f"{name}.json"
    try:
        data = json.loads(path.read_bytes())
        if isinstance(data, dict) and data.get("format") == MEMO_FORMAT and data.get("stamp") == stamp:
            return data["value"]
    except (OSError, ValueError, KeyError):
        pass
    value = compute()
    store(name, stamp, value)
    return value


def store(name: str, stamp: str, value: Any) -> None:
    """Write (or overwrite) the memo ``name``."""
    path = memo_dir() / f"{name}.json"
    try:
        write_atomic(path, json.dumps({"format": MEMO_FORMAT, "stamp": stamp, "value": value}).encode())
    except OSError:  # a read-only home: compute again next time, still correct
        pass


def _tree_files(root: str) -> list[tuple[str, os.stat_result]]:
    """(relative POSIX path, stat) of every file under ``root``, ``__pycache__`` skipped, in path order.
    os.scandir, not pathlib: this runs in every process that serves a kernel (a few hundred us saved)."""
    found: list[tuple[list[str], str, os.stat_result]] = []
    pending: list[tuple[str, list[str]]] = [(root, [])]
    while pending:
        directory, parts = pending.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.is_dir():
                    if entry.name != "__pycache__":
                        pending.append((entry.path, [*parts, entry.name]))
                elif entry.is_file():
                    rel = [*parts, entry.name]
                    found.append((rel, "/".join(rel), entry.stat()))
    found.sort(key=lambda item: item[0])  # by path components: the order pathlib sorts paths in
    return [(rel, st) for _parts, rel, st in found]


def _hash_tree(root: str, files: Iterable[tuple[str, os.stat_result]]) -> str:
    digest = sha256()
    for rel, _st in files:
        digest.update(rel.encode() + b"\0")
        with open(os.path.join(root, *rel.split("/")), "rb") as handle:
            digest.update(sha256(handle.read()).digest())
    return digest.hexdigest()


def tree_digest(root: str) -> str:
    """sha256 over every file under ``root`` (relative path and content, ``__pycache__`` skipped), computed
    once per install: memoized on disk under a stamp of every file's path, size and mtime.

    Why a stamp of the files and not of the directories: editing a template in place changes only the
    file's mtime. Walking and stat-ing the ~15 files of kspec's templates costs a fraction of reading and
    hashing them, and no process after the first reads a template it does not render. Callers memoize
    the result in-process.
    """
    if not os.path.isdir(root):
        return sha256(b"").hexdigest()
    files = _tree_files(root)
    stamp = sha256("\0".join(f"{rel}={st.st_size}:{st.st_mtime_ns}" for rel, st in files).encode()).hexdigest()
    name = "tree-" + sha256(os.path.abspath(root).encode()).hexdigest()[:24]
    value = memoized(name, stamp, lambda: _hash_tree(root, files))
    return str(value)
