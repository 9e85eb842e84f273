"""Writing a file so that readers see the old content or the new, never half of it."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


def write_all_atomic(items: Sequence[tuple[Path, bytes]], *, tmp_suffix: str = ".tmp") -> None:
    """Write several files so that a failure leaves none of them changed: every file's bytes go to a
    temporary file beside it first (where a full disk or a read-only directory fails), and only when all of
    them are written are they renamed into place. Each file is replaced atomically; the set is not (a kill
    between two renames leaves some new files and some old ones, each whole)."""
    import tempfile  # here: a process that writes nothing does not load it (about 3 ms)

    written: list[tuple[str, Path]] = []
    try:
        for path, data in items:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.stem[:16]}.", suffix=tmp_suffix, dir=path.parent)
            written.append((tmp, path))
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        while written:
            tmp, path = written[0]
            os.replace(tmp, path)
            written.pop(0)
    except BaseException:
        for tmp, _ in written:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        raise


def write_atomic(path: Path, data: bytes, *, tmp_suffix: str = ".tmp") -> None:
    """Write ``data`` to a unique temporary file beside ``path``, then rename it over ``path``.

    The temporary name is unique per writer, so processes writing the same path never share a file; a
    failed write removes its temporary file and re-raises.
    """
    import tempfile  # here: a process that writes nothing does not load it (about 3 ms)

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem[:16]}.", suffix=tmp_suffix, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
