"""Finding the spec files under the paths a command or ``kspec.load`` names.

A directory is searched recursively, symbolic links to files and to directories included. What cannot be
searched is reported rather than skipped, each as a :class:`kspec.SpecFileError` naming the path: a
symbolic link that leads nowhere (its target is missing, or it refers to itself), a link back to a
directory being searched (a loop), a directory that cannot be listed, an entry named ``*.toml`` /
``*.json`` that is not a regular file (a FIFO would block the reader). Editor lock files (``.#name``, which
Emacs makes as links that lead nowhere) are not spec files and are passed over.
"""

from __future__ import annotations

from .._tuning import RECORD_SUFFIX

import errno
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from .._errors import KspecTypeError, SpecFileError

SPEC_SUFFIXES = (".toml", ".json")


def find_spec_files(paths: str | Path | Iterable[str | Path]) -> tuple[list[Path], list[SpecFileError]]:
    """The spec files named by ``paths`` (files as given, directories searched, in sorted order, each file
    once), and what could not be searched. A path that does not exist is an error of the second list."""
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]  # bytes too: refused below, with its type named
    found: list[Path] = []
    errors: list[SpecFileError] = []
    seen: set[Path] = set()
    walked: set[Path] = set()  # directories searched, by real path: one reached twice is searched once

    def add(path: Path) -> None:
        real = path.resolve()
        if real not in seen:  # `validate D D/a.toml` names a.toml twice: read it once
            seen.add(real)
            found.append(path)

    for raw in paths:
        if not isinstance(raw, (str, os.PathLike)):
            raise KspecTypeError(f"path: expected a spec file or directory (str or os.PathLike), got {type(raw).__name__}")
        path = Path(raw)
        if path.is_dir():
            _walk(path, {path.resolve()}, walked, add, errors)
        elif path.is_file():
            add(path)
        elif path.is_symlink():
            errors.append(_broken_link(path))
        elif path.exists():
            errors.append(SpecFileError("not a regular file or a directory", file=path))
        else:
            errors.append(SpecFileError(f"no such spec file or directory: {str(path)!r}", file=path))
    return found, errors


def _walk(directory: Path, ancestors: set[Path], walked: set[Path], add: Callable[[Path], None],
          errors: list[SpecFileError]) -> None:
    walked.add(directory.resolve())
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError as exc:
        errors.append(SpecFileError(f"cannot read this directory: {exc.strerror or exc}; its spec files were not searched",
                                    file=directory))  # fmt: skip
        return
    for entry in entries:
        path = Path(entry.path)
        if entry.name.startswith(".#"):  # an editor's lock file (Emacs: a link to user@host.pid), never a spec
            continue
        try:
            mode = os.stat(entry.path).st_mode  # follows a symbolic link
        except OSError:
            if entry.is_symlink():
                errors.append(_broken_link(path))
            else:  # removed while searching
                errors.append(SpecFileError("vanished while the directory was searched", file=path))
            continue
        if stat.S_ISDIR(mode):
            real = path.resolve()
            if real in ancestors:
                errors.append(SpecFileError(
                    f"symbolic link to {str(real)!r}, a directory that contains it: a loop; not followed", file=path
                ))  # fmt: skip
                continue
            if real not in walked:
                _walk(path, ancestors | {real}, walked, add, errors)
        elif path.suffix in SPEC_SUFFIXES and not path.name.endswith(RECORD_SUFFIX):  # a tuning record is no spec file
            if stat.S_ISREG(mode):
                add(path)
            else:
                errors.append(SpecFileError("named like a spec file but is not a regular file", file=path))


def _broken_link(path: Path) -> SpecFileError:
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    try:
        os.stat(path)
        why = f"leads to {target!r}, which cannot be read"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            why = f"refers to itself (through {target!r}): a loop"
        elif exc.errno == errno.ENOENT:
            why = f"leads to {target!r}, which does not exist"
        else:
            why = f"leads to {target!r}, which cannot be read: {exc.strerror or exc}"
    return SpecFileError(f"symbolic link that {why}", file=path)

