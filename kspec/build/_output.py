"""The output of an ahead-of-time build: one binary per (kernel, instantiation, arch) and a manifest.

``manifest.json`` is written last and atomically, so a reader never sees a manifest naming a missing file.
A file whose bytes are already there is not rewritten (an editable install rebuilt by the hatch hook keeps
its binaries' mtimes).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import __version__
from .._atomic import write_atomic
from ._precompile import BuildResult

MANIFEST_NAME = "manifest.json"
MANIFEST_VERSION = 1


def binary_path(result: BuildResult) -> str:
    """Where a result's binary goes, relative to the output directory (POSIX separators)."""
    unit = result.unit
    label = unit.label if unit.label != "-" else "default"
    suffix = result.program.format if result.program is not None else "cubin"
    return f"{unit.spec.name}/{label}.{unit.arch}.{suffix}"


def manifest_entry(result: BuildResult) -> dict[str, Any]:
    assert result.program is not None
    unit, program = result.unit, result.program
    return {
        "kernel": unit.spec.name,
        "kind": unit.spec.KIND,
        "instantiation": dict(unit.types),
        "scalars": sorted(unit.scalars),
        "arch": unit.arch,
        "format": program.format,
        "file": binary_path(result),
        "lowered_names": dict(program.lowered_names),
        "source_sha256": result.source_sha256,
        "specialization_key": result.key,
        "nvrtc_version": list(program.nvrtc_version),
        "registers": result.registers,
    }


def write_output(results: Sequence[BuildResult], out_dir: str | os.PathLike[str]) -> Path:
    """Write the binaries of the successful results and the manifest; returns the manifest's path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    for result in results:
        if result.program is None:
            continue
        rel = binary_path(result)
        _write_if_changed(out / rel, result.program.binary)
        entries.append(manifest_entry(result))
    previous = read_manifest(out)
    manifest = {"kspec_manifest": MANIFEST_VERSION, "kspec_version": __version__, "entries": entries}
    path = out / MANIFEST_NAME
    _write_if_changed(path, (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())
    # Binaries of an earlier build that this one no longer has would only mislead a reader of the directory.
    kept = {e["file"] for e in entries}
    for old in previous.get("entries", []) if previous else []:
        stale = old.get("file")
        if isinstance(stale, str) and stale not in kept:
            (out / stale).unlink(missing_ok=True)
    return path


def _write_if_changed(path: Path, data: bytes) -> None:
    try:
        if path.read_bytes() == data:
            return
    except OSError:
        pass
    write_atomic(path, data)


def read_manifest(out_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The manifest in a build directory, or None when there is none (or it is not a kspec manifest)."""
    path = Path(out_dir) / MANIFEST_NAME
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("kspec_manifest") == MANIFEST_VERSION else None
