"""Clearing one cache directory: remove what kspec wrote there, and say what could not be removed, and why.

kspec removes only its own files: entry files (``<key>.kbin`` starting with its magic) and its old temporary
files (``.<key>.XXXXXXXX.tmp``, empty or starting with the magic, older than an hour). The directory may be
shared (``KSPEC_CACHE_DIR=~/work``), so a file kspec cannot read is not removed: nothing would show that it
is kspec's. Links are never followed (kspec writes none): one named like an entry is left and reported, so
nothing outside the directory is read for a decision or removed. ``unlink`` of a name in the directory
removes that name only, never what a link leads to.
"""

from __future__ import annotations

import os
import re
import stat
import time
from pathlib import Path

from ..._named_tuple import NamedTuple
from ._dirs import scan, unreadable
from ._stats import update_stats
from ._entry import starts_with_magic

# A temporary file this old is an orphan of a killed writer; `clear` removes it. Younger ones may be in use.
ORPHAN_AGE_S = 3600.0
# write_atomic's temporary names: "." + the key's first 16 characters + "." + mkstemp's 8 + ".tmp"
_TMP_RE = re.compile(r"\.[0-9A-Za-z_.-]{1,16}\.[0-9A-Za-z_]{8}\.tmp")


class ClearReport(NamedTuple):
    """What ``BinaryCache.clear_report()`` did: entries removed, what it could not remove as (path, why)
    pairs (``why``: the OS error's text, or what the file is and why kspec left it), and the directories it
    left alone because they are read-only (only with several directories)."""

    removed: int
    failed: list[tuple[Path, str]]
    skipped: tuple[Path, ...] = ()


def clear_directory(directory: Path) -> tuple[int, list[tuple[Path, str]]]:
    """Remove kspec's entries and old temporary files from ``directory`` and reset its counts; return how
    many entries were removed and what could not be removed (sorted by path). One failure does not stop
    the others."""
    paths, failed = scan(directory)
    if directory.is_dir():
        update_stats(directory, reset=True)
    removed = 0
    for path in paths:
        try:
            path.unlink()
            removed += 1
        except FileNotFoundError:
            pass  # another process removed it first
        except OSError as exc:
            failed.append((path, exc.strerror or str(exc)))
    failed += _remove_orphans(directory)
    return removed, sorted(failed)


def _remove_orphans(directory: Path) -> list[tuple[Path, str]]:
    """Remove kspec's temporary files older than ``ORPHAN_AGE_S``; return those it could not remove."""
    cutoff = time.time() - ORPHAN_AGE_S
    try:
        candidates = [p for p in directory.iterdir() if _TMP_RE.fullmatch(p.name)]
    except OSError:
        return []  # scan() already reported the listing
    failed: list[tuple[Path, str]] = []
    for path in candidates:
        try:
            st = os.lstat(path)  # lstat: a link (kspec writes none) is not kspec's, and is never followed
            if not stat.S_ISREG(st.st_mode) or st.st_mtime >= cutoff:
                continue
            if not starts_with_magic(path, empty_ok=True):
                continue  # someone else's file with a name like kspec's temporary ones
        except FileNotFoundError:
            continue  # renamed into place or removed meanwhile
        except OSError as exc:
            failed.append((path, unreadable(exc)))
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            failed.append((path, exc.strerror or str(exc)))
    return failed
