"""The format of a ``kspec build`` output's ``manifest.json``: one leaf module for its writer and readers.

``kspec.build`` writes it; ``kspec.kernels`` (the binary store) and the hatch hook read it. Keeping the
format here, with no import of either side, is what lets a process that only serves binaries read a
manifest without importing the build machinery (render, spec models, Jinja).

Layout (version 2)::

    {"kspec_manifest": 2, "kspec_version": "...",
     "entries": [{"specialization_key", "file", "format", "arch", "sha256", "lowered_names",
                  "interface", ...}, ...]}

``interface`` (elementwise and reduction entries) names a small JSON file beside the binaries, one per
specialization: its launch interface computed at build time (variants, name expressions, ABI; data of
``kspec.render.interface_to_data``), so a process serving a binary reads the interface of the kernels it
calls and never derives it. A reader that finds none (a manifest written before it existed, or a file that
does not decode to the entry's specialization) derives it. Readers of version 2 ignore fields they do not
know, so adding it kept the version.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

MANIFEST_NAME = "manifest.json"
MANIFEST_VERSION = 2  # 2: entries carry the binary's sha256
BINARY_SUFFIXES = (".cubin", ".ptx", ".so")  # .so: CPU-device modules (kspec build --arch host)
INTERFACE_SUFFIX = ".interface.json"


def confined_file(out: Path, rel: object, suffixes: tuple[str, ...] = BINARY_SUFFIXES) -> Path | None:
    """``out / rel`` when ``rel`` is a relative POSIX path to a binary (a file ending in one of ``suffixes``)
    that stays inside ``out`` (symbolic links included), else None: what a manifest names is data from
    disk, never trusted as a path."""
    path = lexically_confined(out, rel, suffixes)
    return path if path is not None and resolves_inside(out, path) else None


def lexically_confined(out: Path, rel: object, suffixes: tuple[str, ...] = BINARY_SUFFIXES) -> Path | None:
    """``out / rel`` when ``rel`` names a file below ``out`` by its spelling alone (relative, no ``..``, ending
    in one of ``suffixes``), else None. Symbolic links are not followed: see :func:`resolves_inside`."""
    if not isinstance(rel, str) or not rel or "\\" in rel or "\0" in rel:
        return None
    parts = rel.split("/")  # an absolute path starts with an empty part
    if any(part in ("", ".", "..") for part in parts):
        return None
    if not any(parts[-1].endswith(suffix) and len(parts[-1]) > len(suffix) for suffix in suffixes):
        return None
    return out.joinpath(*parts)


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


def manifest_document(version: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The manifest's top-level table (the writer's side of the layout above)."""
    return {"kspec_manifest": MANIFEST_VERSION, "kspec_version": version, "entries": entries}


# A wheel's registration of its build output for lookup by content (read by kspec/kernels/binaries/_stores.py):
# the hatch hook installs <prefix>/share/kspec/binaries/<distribution>.json naming the directory, relative to the
# sys.path entry the package is installed in.
REGISTRATION_DIR = ("share", "kspec", "binaries")
REGISTRATION_VERSION = 1


def registration_document(binaries: str) -> dict[str, Any]:
    """The registration of a package's binaries directory (a relative POSIX path such as ``pkg/kernels/_binaries``)."""
    return {"kspec_binaries": REGISTRATION_VERSION, "binaries": binaries}
