"""The format of a ``kspec build`` output's ``manifest.json``: one leaf module for its writer and readers.

``kspec.build`` writes it; ``kspec.kernels`` (the binary store) and the hatch hook read it. Keeping the
format here, with no import of either side, is what lets a process that only serves binaries read a
manifest without importing the build machinery (render, spec models, Jinja).

Layout (version 2)::

    {"kspec_manifest": 2, "kspec_version": "...",
     "entries": [{"specialization_key", "file", "format", "arch", "sha256", "lowered_names", ...}, ...],
     "interfaces": {"<specialization_key>": <launch interface data (kspec.render.interface_to_data)>}}

``interfaces`` holds, per elementwise/reduction specialization, the launch interface computed at build
time (variants, name expressions, ABI), so a reader never derives it again; a reader that finds none (a
manifest written before it existed) derives it. Adding it kept the version: readers of version 2 ignore
fields they do not know.
"""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath
from typing import Any

MANIFEST_NAME = "manifest.json"
MANIFEST_VERSION = 2  # 2: entries carry the binary's sha256
BINARY_SUFFIXES = (".cubin", ".ptx")


def confined_file(out: Path, rel: object) -> Path | None:
    """``out / rel`` when ``rel`` is a relative POSIX path to a binary that stays inside ``out`` (symbolic
    links included), else None: what a manifest names is data from disk, never trusted as a path."""
    path = lexically_confined(out, rel)
    return path if path is not None and resolves_inside(out, path) else None


def lexically_confined(out: Path, rel: object) -> Path | None:
    """``out / rel`` when ``rel`` names a binary below ``out`` by its spelling alone (relative, no ``..``, a
    binary's suffix), else None. Symbolic links are not followed: see :func:`resolves_inside`."""
    if not isinstance(rel, str) or not rel or "\\" in rel or "\0" in rel:
        return None
    pure = PurePosixPath(rel)
    if pure.is_absolute() or any(part in ("", ".", "..") for part in rel.split("/")):
        return None
    if pure.suffix not in BINARY_SUFFIXES:
        return None
    return out.joinpath(*pure.parts)


def resolves_inside(out: Path, path: Path) -> bool:
    """Whether ``path`` stays inside ``out`` once symbolic links are followed (a stat per component: done
    for a file about to be read, not for every file a manifest lists)."""
    try:
        return path.resolve().is_relative_to(out.resolve())
    except (OSError, RuntimeError):  # a symlink loop
        return False


def read_manifest(out_dir: str | os.PathLike[str], *, any_version: bool = False) -> dict[str, Any] | None:
    """The manifest in a build directory, or None when there is none (or it is not a kspec manifest of this
    version; ``any_version``: of any version, which is what deciding whether kspec owns a directory needs)."""
    path = Path(out_dir) / MANIFEST_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    version = data.get("kspec_manifest")
    return data if (version == MANIFEST_VERSION or (any_version and isinstance(version, int))) else None


def manifest_document(version: str, entries: list[dict[str, Any]], interfaces: dict[str, Any]) -> dict[str, Any]:
    """The manifest's top-level table (the writer's side of the layout above)."""
    return {"kspec_manifest": MANIFEST_VERSION, "kspec_version": version, "entries": entries, "interfaces": interfaces}
