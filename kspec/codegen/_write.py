"""Bringing a directory up to date with a set of generated files (``kspec generate`` and the hatch hook).

Only the files whose bytes differ are rewritten (atomically: readers see the old file or the new one), so
an unchanged file keeps its mtime and a rebuild does not invalidate anything that watches it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .._atomic import write_all_atomic


def sync_files(files: Mapping[str, str | bytes], out: Path, *, check: bool) -> list[tuple[Path, bool]]:
    """Write each ``files`` entry (relative name -> text or bytes) under ``out`` when its content changed.

    Returns the files that were out of date, in ``files`` order, as ``(path, missing)``: ``missing`` is True
    when the file did not exist. With ``check`` nothing is written (the caller reports the stale files).
    An ``OSError`` (``out`` is a file, cannot be written, the disk is full) leaves every file as it was.
    """
    changed: list[tuple[Path, bool]] = []
    to_write: list[tuple[Path, bytes]] = []
    for name, content in files.items():
        target = out / name
        data = content.encode() if isinstance(content, str) else bytes(content)
        try:
            current: bytes | None = target.read_bytes()
        except OSError:
            current = None
        if current == data:
            continue
        changed.append((target, current is None))
        to_write.append((target, data))
    if not check:
        write_all_atomic(to_write)  # all written, or (an OSError) none changed
    return changed
