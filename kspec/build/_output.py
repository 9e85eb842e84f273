"""The output of an ahead-of-time build: one binary per (kernel, instantiation, arch) and a manifest.

``manifest.json`` is written last and atomically, and records each binary's sha256: a reader checks it,
so a manifest left by a build killed before its manifest write never serves a binary of the next build.
A file whose bytes are already there is not rewritten (an editable install rebuilt by the hatch hook keeps
its binaries' mtimes).

kspec writes only into a directory it owns: a new or empty one, one holding a manifest kspec wrote, or
the leftovers of a kspec build killed before its first manifest. It deletes only files a previous kspec
manifest lists, and only when their path stays inside the directory. File names are bounded whatever the
length of kernel and parameter names.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .. import __version__
from .._atomic import write_atomic
from .._errors import BuildOutputError
from .._manifest import BINARY_SUFFIXES as _BINARY_SUFFIXES
from .._manifest import INTERFACE_SUFFIX, MANIFEST_NAME, confined_file, manifest_document, read_manifest
from ._precompile import BuildResult, BuildUnit

# A path component kspec derives from a name stays this short (file systems allow 255 bytes); a longer
# name is cut and made unique by a digest of the whole name.
_COMPONENT_MAX = 64
_TMP = re.compile(r"\..+\.tmp\Z")  # what write_atomic leaves behind when its writer is killed
_WRITTEN = (*_BINARY_SUFFIXES, INTERFACE_SUFFIX)  # what a build writes below its kernel directories


def _component(text: str) -> str:
    if len(text) <= _COMPONENT_MAX:
        return text
    return f"{text[: _COMPONENT_MAX - 17]}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def unit_path(unit: BuildUnit, fmt: str | None = None) -> str:
    """Where a unit's binary goes, relative to the output directory (POSIX separators)."""
    label = unit.label if unit.label != "-" else "default"
    suffix = fmt or ("ptx" if unit.arch.startswith("compute_") else "cubin")
    return f"{_component(unit.spec.name)}/{_component(label)}.{unit.arch}.{suffix}"


def interface_path(unit: BuildUnit) -> str | None:
    """Where the launch interface of a unit's specialization goes (one file for all its architectures),
    relative to the output directory; None for a raw kernel (its launches need none)."""
    if unit.spec.KIND == "raw":
        return None
    label = unit.label if unit.label != "-" else "default"
    return f"{_component(unit.spec.name)}/{_component(label)}{INTERFACE_SUFFIX}"


def binary_path(result: BuildResult) -> str:
    """Where a result's binary goes, relative to the output directory (POSIX separators)."""
    return unit_path(result.unit, result.program.format if result.program is not None else None)


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
        "sha256": hashlib.sha256(program.binary).hexdigest(),
        "lowered_names": dict(program.lowered_names),
        "source_sha256": result.source_sha256,
        "specialization_key": result.key,
        "nvrtc_version": list(program.nvrtc_version),
        "registers": result.registers,
        **({"interface": rel} if (rel := interface_path(unit)) is not None else {}),
    }


def _is_kspec_manifest(path: Path) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and isinstance(data.get("kspec_manifest"), int) and "entries" in data


def _only_build_leftovers(out: Path) -> bool:
    """Whether ``out`` holds nothing but what a kspec build killed before its first manifest leaves."""
    for entry in out.iterdir():
        if entry.is_file() and _TMP.match(entry.name):
            continue
        if entry.is_dir() and not entry.is_symlink():
            if all(f.is_file() and (f.name.endswith(_WRITTEN) or _TMP.match(f.name)) for f in entry.iterdir()):
                continue
        return False
    return True


def check_output_dir(out_dir: str | os.PathLike[str], units: Iterable[BuildUnit] = ()) -> Path:
    """Make sure a build can write into ``out_dir`` (creating it), before anything is compiled.

    ``BuildOutputError`` when it is not a directory kspec owns (see the module docstring), cannot be
    created or written, or when a path a unit's binary needs is taken by a file or a directory.
    """
    out = Path(out_dir)
    try:
        if out.exists():
            if not out.is_dir():
                raise BuildOutputError(f"output {str(out)!r} exists and is not a directory")
            manifest = out / MANIFEST_NAME
            if manifest.exists() or manifest.is_symlink():
                if manifest.is_symlink() or not _is_kspec_manifest(manifest):
                    raise BuildOutputError(
                        f"output {str(out)!r} holds a {MANIFEST_NAME} that kspec did not write; kspec will not "
                        "overwrite it (choose another directory)"
                    )
            elif not _only_build_leftovers(out):
                raise BuildOutputError(
                    f"output {str(out)!r} is not empty and holds no kspec {MANIFEST_NAME}; kspec writes only into "
                    "a new or empty directory, or one it built before (choose another directory)"
                )
        else:
            out.mkdir(parents=True)
        fd, probe = tempfile.mkstemp(prefix=".kspec-probe.", suffix=".tmp", dir=out)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise BuildOutputError(f"output {str(out)!r} cannot be written: {exc.strerror or exc}") from None
    for unit in units:
        rel = unit_path(unit)
        kernel_dir = out / rel.split("/")[0]
        if kernel_dir.exists() and not kernel_dir.is_dir():
            raise BuildOutputError(f"{str(kernel_dir)!r} is a file where kernel {unit.spec.name!r} gets its directory")
        for target in (rel, interface_path(unit)):
            if target is not None and (out / target).is_dir():
                raise BuildOutputError(f"{str(out / target)!r} is a directory where a binary or its interface goes")
    return out


def write_output(results: Sequence[BuildResult], out_dir: str | os.PathLike[str]) -> Path:
    """Write the binaries of the successful results and the manifest; returns the manifest's path."""
    out = check_output_dir(out_dir, (r.unit for r in results if r.program is not None))
    previous = read_manifest(out, any_version=True)
    _remove_leftovers(out)
    entries = []
    interfaces: set[str] = set()
    try:
        for result in results:
            if result.program is None:
                continue
            rel = binary_path(result)
            _write_if_changed(out / rel, result.program.binary)
            entry = manifest_entry(result)
            if "interface" in entry and entry["interface"] not in interfaces:
                interfaces.add(entry["interface"])
                _write_if_changed(out / entry["interface"], _interface_json(result))
            entries.append(entry)
    except OSError as exc:
        raise BuildOutputError(f"output {str(out)!r}: cannot write a binary: {exc}") from None
    manifest = manifest_document(__version__, entries)
    path = out / MANIFEST_NAME
    try:
        _write_if_changed(path, (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())
    except OSError as exc:  # the old manifest stays; its digests keep it from serving the new binaries
        raise BuildOutputError(f"output {str(out)!r}: cannot write {MANIFEST_NAME}: {exc}") from None
    # Binaries of an earlier build that this one no longer has would only mislead a reader of the directory.
    kept = {e["file"] for e in entries} | interfaces
    old_entries = previous.get("entries") if previous else None
    for old in old_entries if isinstance(old_entries, list) else []:
        for field, suffixes in (("file", _BINARY_SUFFIXES), ("interface", (INTERFACE_SUFFIX,))):
            old_rel = old.get(field) if isinstance(old, dict) else None
            stale = confined_file(out, old_rel, suffixes)
            if stale is not None and old_rel not in kept:
                stale.unlink(missing_ok=True)
                _remove_if_empty(stale.parent, out)
    return path


def _interface_json(result: BuildResult) -> bytes:
    """The launch interface of an elementwise/reduction result's specialization, as its file holds it:
    computed here once, so a process serving the binaries never derives it (kspec/_manifest.py)."""
    from ..render import interface_to_data, module_interface, specialize

    unit = result.unit
    specialization = specialize(unit.spec, unit.types, scalars=unit.scalars)
    data = interface_to_data(module_interface(specialization))
    return (json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n").encode()


def _remove_leftovers(out: Path) -> None:
    """Temporary files of a build killed mid-write (``.manifest.*.tmp`` and the binaries' own)."""
    for directory in [out, *(d for d in out.iterdir() if d.is_dir() and not d.is_symlink())]:
        for entry in directory.iterdir():
            if _TMP.match(entry.name) and entry.is_file() and not entry.is_symlink():
                entry.unlink(missing_ok=True)


def _remove_if_empty(directory: Path, out: Path) -> None:
    if directory != out and directory.parent == out:
        try:
            directory.rmdir()
        except OSError:  # not empty: other binaries of that kernel
            pass


def _write_if_changed(path: Path, data: bytes) -> None:
    try:
        if path.read_bytes() == data:
            return
    except OSError:
        pass
    write_atomic(path, data)
