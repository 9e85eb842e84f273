"""The binary cache's directories: which may be written, what each holds (kspec's entry files only).

A cache may have several directories (``KSPEC_CACHE_DIR=/opt/image-cache:~/.cache/kspec``): lookups read
them in order, writes go to the first writable one. A read-only directory (baked into a container image, a
read-only network mount) serves hits only: nothing is written, touched, trimmed or cleared there.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..._named_tuple import NamedTuple
from ._entry import entry_key, file_kind, read_entry_header, starts_with_magic


def writable(directory: Path) -> bool:
    """Whether kspec could write entries in ``directory``: it is a directory this process may write (a
    read-only mount answers no), or it does not exist and its nearest existing parent is one (the first
    write creates it). Creates nothing; ``os.access`` only, so it is cheap enough to ask once per cache.
    As root a directory of mode 0o555 is writable, as it really is."""
    existing = directory
    while not os.path.lexists(existing) and existing.parent != existing:
        existing = existing.parent
    return os.path.isdir(existing) and os.access(existing, os.W_OK | os.X_OK)


# Why a file named like an entry was left: said, but not a failure (the directory may be shared: it may be a user's)
NOT_AN_ENTRY = ("named like a kspec entry but does not start with kspec's magic (empty, damaged, or another tool's "
                "file); it was left: remove it by hand if it is a damaged entry")


def scan(directory: Path) -> tuple[list[Path], list[tuple[Path, str]]]:
    """(entry files, problems) of one directory. Entry files are named ``<key>.kbin`` and start with kspec's
    magic: the directory may be shared with other files (``KSPEC_CACHE_DIR=~/work``), and nothing else is
    counted or removed. A directory that does not exist is empty; one that cannot be listed is a problem, and
    so is anything named like an entry that is not a regular file (a directory, a link, a FIFO: kspec writes
    none, so it leaves them, and says so), that cannot be read, or that does not start with the magic (nothing
    shows that kspec wrote it: an empty or garbage file where a binary was)."""
    try:
        names = list(directory.iterdir())
    except FileNotFoundError:
        return [], []
    except OSError as exc:
        return [], [(directory, exc.strerror or str(exc))]
    entries: list[Path] = []
    problems: list[tuple[Path, str]] = []
    for path in names:
        if entry_key(path.name) is None:
            continue
        try:
            mode = os.lstat(path).st_mode  # lstat: a link is reported as one, never followed
        except FileNotFoundError:
            continue  # removed meanwhile
        except OSError as exc:
            problems.append((path, exc.strerror or str(exc)))
            continue
        if not stat.S_ISREG(mode):
            problems.append((path, f"not a regular file but {file_kind(mode)}; kspec writes none, so it was left"))
            continue
        try:
            if starts_with_magic(path, empty_ok=False):
                entries.append(path)
            else:  # empty, cut short or overwritten: named like an entry, but nothing shows kspec wrote it
                problems.append((path, NOT_AN_ENTRY))
        except FileNotFoundError:
            continue
        except OSError as exc:  # another user's entry of mode 0o600 in a shared directory, say
            problems.append((path, unreadable(exc)))
    return entries, problems


def unreadable(exc: OSError) -> str:
    """Why a file named like kspec's was left: it could not be read, so nothing shows that kspec wrote it."""
    return f"cannot be read ({exc.strerror or exc}), so kspec cannot tell that it wrote it; it was left"


class DirectoryInfo(NamedTuple):
    """One directory of a cache, as ``BinaryCache.info()`` reports it."""

    path: Path
    entries: int
    total_bytes: int
    writable: bool  # the probe's answer (see ``writable``)
    written: bool  # the directory this cache writes its entries to


class CacheEntry(NamedTuple):
    """One entry file, as ``BinaryCache.entries()`` lists it (from its header; the binary is not read)."""

    key: str
    kernel: str  # the kernel's name ("" for entries written before kspec recorded it)
    arch: str
    format: str
    size: int
    directory: Path
    hits: int  # hits counted in the written directory's stats file (every process's, since the last clear)


def directory_info(directory: Path, *, written: bool) -> DirectoryInfo:
    entries, total = 0, 0
    for path in scan(directory)[0]:
        try:
            total += path.stat().st_size
        except OSError:
            continue
        entries += 1
    return DirectoryInfo(directory, entries, total, writable(directory), written)


def list_entries(directories: tuple[Path, ...], hits: dict[str, int]) -> list[CacheEntry]:
    """The entries of ``directories`` in lookup order; a key found in two directories is listed once, where
    a lookup finds it (the first)."""
    seen: set[str] = set()
    found = []
    for directory in directories:
        for path in sorted(scan(directory)[0]):
            key = entry_key(path.name)
            header = read_entry_header(path)
            if key is None or key in seen or header is None:
                continue
            seen.add(key)
            try:
                size = path.stat().st_size
            except OSError:
                continue
            kernel = header.get("kernel")
            found.append(CacheEntry(key, kernel if isinstance(kernel, str) else "", str(header.get("arch", "")),
                                    str(header.get("format", "")), size, directory, hits.get(key, 0)))  # fmt: skip
    return found
