"""The captured directory's call-path code: the sources of the generated code (dispatchers, launches, raw-kernel
packers: kspec/_generated_code.py) that the captured kernels' calls used, in one text file beside the spec files.
``kspec build`` compiles them into its output, so that a process served by the build loads them instead of
compiling them on each kernel's first call. Merged like the spec files: a re-run adds what it used, ``prune``
keeps only that."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .._generated_code import SOURCES_FILE, format_sources, read_sources, storable_sources


def write_call_path(directory: Path, sources: Mapping[str, str], *, replace: bool = False) -> int:
    """Merge ``sources`` into the directory's call-path file (``replace``: instead of what it held); returns how
    many sources the file holds. Written only when its text changes; removed when it would hold none."""
    merged = storable_sources(dict(sources) if replace else {**read_sources(directory), **sources})
    path = directory / SOURCES_FILE
    if not merged:
        path.unlink(missing_ok=True)
        return 0
    text = format_sources(merged)
    try:
        unchanged = path.read_text(encoding="utf-8") == text
    except (OSError, UnicodeDecodeError):
        unchanged = False
    if not unchanged:
        from .._atomic import write_atomic

        write_atomic(path, text.encode("utf-8"))
    return len(merged)
