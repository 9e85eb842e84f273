"""The output of an ahead-of-time build: one binary per (kernel, instantiation, arch) and a manifest.

A build swaps the directory's content so that a reader sees the previous build or the new one, whole,
whatever point it is killed at: each file's name carries a digest of its bytes
(``kernel/label.sm_80.<sha256[:16]>.cubin``), so the new binaries and launch interfaces are written beside
the old ones, never over them; then ``manifest.json`` (which records each binary's sha256 as well) is
replaced in one rename; only then are the files of the previous manifest that the new one does not list
removed. A build killed before its manifest leaves the previous manifest and every file it lists as they
were, plus new files no manifest lists, which the next build removes (:func:`_remove_orphans`). A file
whose bytes are already there is not rewritten (an editable install rebuilt by the hatch hook keeps its
binaries' mtimes).

kspec writes only into a directory it owns: a new or empty one, one holding a manifest kspec wrote, or
the leftovers of a kspec build killed before its first manifest. It deletes only files a previous kspec
manifest lists, and files named with a digest that their bytes match (what a killed build of its own
left), and only when their path stays inside the directory. File names are bounded whatever the length
of kernel and parameter names.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from .._version import __version__
from .._atomic import write_atomic
from .._errors import BuildOutputError
from .._manifest import BINARY_SUFFIXES as _BINARY_SUFFIXES
from .._manifest import INTERFACE_SUFFIX, MANIFEST_NAME, confined_file, manifest_bytes, read_manifest
from ._precompile import BuildResult, BuildUnit

# A path component kspec derives from a name stays this short (file systems allow 255 bytes); a longer
# name is cut and made unique by a digest of the whole name.
_COMPONENT_MAX = 64
_TMP = re.compile(r"\..+\.tmp\Z")  # what write_atomic leaves behind when its writer is killed
_WRITTEN = (*_BINARY_SUFFIXES, INTERFACE_SUFFIX)  # what a build writes below its kernel directories
_NAME_DIGEST = 16  # hex digits of a file's sha256 in its name
# a file named by a build: ``label.arch.<digest>.cubin`` / ``.ptx``, ``label.<digest>.interface.json``
_DIGEST_NAMED = re.compile(r".+\.([0-9a-f]{%d})(?:\.cubin|\.ptx|%s)\Z" % (_NAME_DIGEST, re.escape(INTERFACE_SUFFIX)))


def _component(text: str) -> str:
    if len(text) <= _COMPONENT_MAX:
        return text
    return f"{text[: _COMPONENT_MAX - 17]}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def kernel_dir(unit: BuildUnit) -> str:
    """The directory of a unit's kernel, relative to the output directory."""
    return _component(unit.spec.name)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:_NAME_DIGEST]


def interface_path(unit: BuildUnit, data: bytes) -> str | None:
    """Where the launch interface ``data`` of a unit's specialization goes (one file for all its
    architectures), relative to the output directory; None for a raw kernel (its launches need none)."""
    if unit.spec.KIND == "raw":
        return None
    module = replace(unit, variant=None).label  # the module's: one interface for all of its variants' binaries
    label = module if module != "-" else "default"
    return f"{kernel_dir(unit)}/{_component(label)}.{_digest(data)}{INTERFACE_SUFFIX}"


def binary_path(result: BuildResult) -> str:
    """Where a result's binary goes, relative to the output directory (POSIX separators): named by kernel,
    instantiation, arch and a digest of its bytes."""
    assert result.program is not None
    unit, program = result.unit, result.program
    label = unit.label if unit.label != "-" else "default"
    return f"{kernel_dir(unit)}/{_component(label)}.{unit.arch}.{_digest(program.binary)}.{program.format}"


def manifest_entry(result: BuildResult, interface: str | None = None) -> dict[str, Any]:
    """A result's manifest entry; ``interface``: where its launch interface was written."""
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
        **({"interface": interface} if interface is not None else {}),
        # one launch variant's program (a captured specialization's `variants`): its entry point alone
        **({"variant": result.variant} if result.variant is not None else {}),
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
        directory = out / kernel_dir(unit)
        if directory.exists() and not directory.is_dir():
            raise BuildOutputError(f"{str(directory)!r} is a file where kernel {unit.spec.name!r} gets its directory")
    return out


def write_output(results: Sequence[BuildResult], out_dir: str | os.PathLike[str]) -> Path:
    """Write the binaries of the successful results and the manifest; returns the manifest's path. A reader
    sees the previous build or this one, whole, wherever this is stopped (see the module docstring)."""
    out = check_output_dir(out_dir, (r.unit for r in results if r.program is not None))
    previous = read_manifest(out, any_version=True)
    _remove_leftovers(out)
    entries = []
    interfaces: dict[tuple[Any, ...], str] = {}  # a module's (BuildUnit.memo_key) interface file
    try:
        for result in results:  # new names beside the old files: the previous manifest still reads whole
            if result.program is None:
                continue
            _write_if_changed(out / binary_path(result), result.program.binary)
            unit = result.unit
            which = unit.memo_key
            if unit.spec.KIND != "raw" and which not in interfaces:
                data = _interface_json(result)
                rel = interface_path(unit, data)
                assert rel is not None
                _write_if_changed(out / rel, data)
                interfaces[which] = rel
            entries.append(manifest_entry(result, interfaces.get(which)))
    except OSError as exc:
        raise BuildOutputError(f"output {str(out)!r}: cannot write a binary: {exc}") from None
    path = out / MANIFEST_NAME
    try:
        _write_if_changed(path, manifest_bytes(__version__, entries))
    except OSError as exc:  # the old manifest stays, with every file it lists
        raise BuildOutputError(f"output {str(out)!r}: cannot write {MANIFEST_NAME}: {exc}") from None
    _write_tuning(results, out)
    _write_call_path_code(results, out)
    # The swap is done: the previous build's files that this one does not list would only mislead a reader.
    kept = {e["file"] for e in entries} | set(interfaces.values())
    old_entries = previous.get("entries") if previous else None
    for old in old_entries if isinstance(old_entries, list) else []:
        for field, suffixes in (("file", _BINARY_SUFFIXES), ("interface", (INTERFACE_SUFFIX,))):
            old_rel = old.get(field) if isinstance(old, dict) else None
            stale = confined_file(out, old_rel, suffixes)
            if stale is not None and old_rel not in kept:
                stale.unlink(missing_ok=True)
                _remove_if_empty(stale.parent, out)
    _remove_orphans(out, kept)
    return path


def _write_tuning(results: Sequence[BuildResult], out: Path) -> None:
    """``tuning.json``: the record entries of the tuned kernels built (kspec/_tuning.py, kspec/_plan_tuning.py),
    each bucket's winner, which a process serving these binaries picks its configs by; removed when the build
    has none."""
    from .._tuning import BUILD_RECORD, RECORD_FORMAT, dumps

    archs: dict[str, Any] = {}
    for result in results:
        tuning = result.unit.tuning
        if tuning is None or tuning[1] is None or result.program is None:
            continue
        name, entry, facts = tuning
        assert entry is not None  # checked above
        section = archs.setdefault(result.unit.arch, {**facts, "kernels": {}})
        # what a call reads (each bucket's winner), not what a review reads (the cases, the runners-up, the
        # skipped): a served process parses this file on its first tuned call
        buckets = {label: {"winner": data["winner"]} for label, data in (entry.get("buckets") or {}).items()}
        section["kernels"][name] = {**{k: v for k, v in entry.items() if k != "cases"}, "buckets": buckets}
    path = out / BUILD_RECORD
    try:
        if archs:
            _write_if_changed(path, dumps({"format": RECORD_FORMAT, "archs": archs}).encode())
        else:
            path.unlink(missing_ok=True)
    except OSError as exc:
        raise BuildOutputError(f"output {str(out)!r}: cannot write {BUILD_RECORD}: {exc}") from None


def _write_call_path_code(results: Sequence[BuildResult], out: Path) -> None:
    """``callpath/``: the call-path code that captures of the built spec files' directories used (their
    ``call-path.txt``), compiled for this interpreter, so that a process these binaries serve loads it instead of
    compiling it on each kernel's first call (kspec/_generated_code.py); removed when there is none."""
    from .._generated_code import CODE_DIR, read_sources, write_code_directory

    sources: dict[str, str] = {}
    for directory in sorted({Path(r.unit.spec.origin).parent for r in results if r.unit.spec.origin is not None}):
        sources.update(read_sources(directory))  # none where no capture wrote the file
    try:
        write_code_directory(sources, out / CODE_DIR)
    except OSError as exc:
        raise BuildOutputError(f"output {str(out)!r}: cannot write {CODE_DIR}/: {exc}") from None


def _remove_orphans(out: Path, kept: set[str]) -> None:
    """Files a build killed before its manifest wrote: in a kernel directory, named with a digest that their
    bytes match (so kspec wrote them), listed by no manifest."""
    for directory in (d for d in out.iterdir() if d.is_dir() and not d.is_symlink()):
        for entry in directory.iterdir():
            match = _DIGEST_NAMED.match(entry.name)
            if match is None or f"{directory.name}/{entry.name}" in kept or entry.is_symlink() or not entry.is_file():
                continue
            try:
                if _digest(entry.read_bytes()) == match.group(1):
                    entry.unlink()
            except OSError:
                continue
        _remove_if_empty(directory, out)


def _interface_json(result: BuildResult) -> bytes:
    """The launch interface of an elementwise/reduction result's specialization, as its file holds it:
    computed here once, so a process serving the binaries never derives it (kspec/_manifest.py)."""
    from ..render import interface_to_data, module_interface, specialize

    unit = result.unit
    specialization = specialize(unit.spec, unit.types, scalars=unit.scalars, raw_layouts=dict(unit.raw_layouts))
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
