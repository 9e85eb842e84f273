"""Arguments and output helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from .._errors import SpecError
from ..spec import find_spec_files

DEFAULT_SPECS = "specs"


def add_spec_paths(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="*",
        default=[DEFAULT_SPECS],
        metavar="PATH",
        help=f"spec files or directories (default: {DEFAULT_SPECS}/)",
    )


def error(message: str) -> None:
    print(f"kspec: error: {message}", file=sys.stderr)


def note(message: str) -> None:
    """Something the user may want to know that is not an error (stderr: stdout may be --json)."""
    print(f"kspec: note: {message}", file=sys.stderr)


def spec_files_or_report(paths: list[str]) -> list[Path] | None:
    """The spec files under ``paths``, or None after reporting why there are none or why some could not be
    searched (a broken symbolic link, an unreadable directory: one error line each; the caller exits 1)."""
    found: tuple[list[Path], list[SpecError]] = find_spec_files(paths)  # a lazy export: untyped to mypy
    files, errors = found
    for exc in errors:
        error(str(exc))
    if errors:
        return None
    if not files:
        error(f"no spec files (*.toml, *.json) in {' '.join(paths)}")
        return None
    return files


def directory_problem(directory: Path) -> str | None:
    """Why ``directory`` cannot be written to, or created and then written to, as the end of a sentence
    that starts with its name ("is not a directory", "cannot be written: ..."), or None. Creates nothing:
    a probe file is made and removed at once in the directory, or in its nearest existing parent."""
    existing = directory
    while not existing.exists() and existing.parent != existing:
        if existing.is_symlink():
            return f"cannot be created: {str(existing)!r} is a symbolic link that leads nowhere"
        existing = existing.parent
    if not existing.is_dir():
        return "is not a directory" if existing == directory else f"cannot be created: {str(existing)!r} is not a directory"
    try:
        fd, probe = tempfile.mkstemp(prefix=".kspec-probe.", suffix=".tmp", dir=existing)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        what = "cannot be written" if existing == directory else f"cannot be created in {str(existing)!r}"
        return f"{what}: {exc.strerror or exc}"
    return None
