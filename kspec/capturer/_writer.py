"""Records -> spec files: one TOML file per source module that built kernels, merged with what is there.

Kernels are identified by content (kspec/render/_content.py: the code, not the name): a kernel recorded again
adds the specializations it lacks; a new one is appended. Names stay unique across the output directory (one
``kspec build`` library): a kernel whose name another kernel of different code holds is written as ``name_2``
with ``cuda_name = name``, which keys and renders it as the constructor call did. Each kernel's ``doc`` and the
comment above it name where it was built. ``prune``: kernels the records do not hold are dropped (a module's code
changed and its old kernels are gone). What cannot be a spec is reported with the reason, never written.
"""

from __future__ import annotations

import json
import keyword
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._digest import sha256_hex
from .._errors import KspecError, KspecValueError
from .._generated_code import read_sources
from ..render import content_data
from ..spec import SCHEMA_VERSION, dumps_toml, parse_spec, parse_specializations, parse_variant, read_file, variant_text
from ._call_path import write_call_path
from ._records import read_records

HEADER = ("# Captured by `kspec capture`: the kernels that the code of module {module} built, as spec files.\n"
          "# Re-running kspec capture merges into this file (--prune drops kernels a run no longer builds).\n")
_SUFFIX = ".toml"
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class CaptureMergeError(KspecValueError):
    """A directory given to :func:`merge_captured` that is not one of captured spec files."""


@dataclass
class _Kernel:
    data: dict[str, Any]  # the spec table without its specializations and doc
    module: str
    site: str
    specializations: list[dict[str, Any]] = field(default_factory=list)
    seen: bool = False  # recorded by this run
    fresh: set[int] = field(default_factory=set)  # ids of the entries this run added: their variants are its


@dataclass
class CaptureReport:
    """What :func:`write_captured` did."""

    kernels: int = 0  # kernels in the output after the merge
    new_kernels: int = 0
    new_specializations: int = 0
    pruned: int = 0
    files: list[Path] = field(default_factory=list)  # spec files written (changed or new)
    not_captured: list[tuple[str, str]] = field(default_factory=list)  # (what, why)
    call_path: int = 0  # generated call-path sources in the directory's call-path file (kspec/capturer/_call_path.py)

    def summary(self) -> str:
        text = (f"{self.kernels} kernels in {len(self.files)} changed spec files ({self.new_kernels} new kernels, "
                f"{self.new_specializations} new specializations, {self.pruned} pruned)")
        if self.call_path:
            text += f"; {self.call_path} call-path sources"
        if self.not_captured:
            text += f"; {len(self.not_captured)} not captured:\n" + "\n".join(f"  {w}: {why}" for w, why in self.not_captured)
        return text


def write_captured(records: str | os.PathLike[str], out: str | os.PathLike[str], *, prune: bool = False) -> CaptureReport:
    """Merge the records in directory ``records`` into the spec files of directory ``out``."""
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = CaptureReport()
    kernels = _existing(out_dir, report)
    before = {k: len(v.specializations) for k, v in kernels.items()}
    by_key: dict[str, tuple[_Kernel, dict[str, Any]]] = {}  # a specialization's content key -> its kernel and entry
    compiled: set[str] = set()  # raw modules this run compiled: one that failed elsewhere is not failing
    sources: dict[str, str] = {}  # the call path's generated code the run used: source -> what
    for record in read_records(Path(records)):
        if record["kind"] == "call_path":
            if isinstance(record.get("source"), str) and isinstance(record.get("what"), str):
                sources[record["source"]] = record["what"]
            continue
        if record["kind"] == "variant":
            _add_variant(by_key.get(str(record.get("key"))), record.get("variant"))
            continue
        made = _kernel_of(record, report)
        if made is None:
            continue
        key, kernel, entry = made
        found = kernels.setdefault(key, kernel)
        found.seen = True
        if found.data["kind"] == "raw":
            for function in (*kernel.data.get("kernels", ()), entry):
                _add_function(found, function)
            if not record.get("compile_fails"):
                compiled.add(key)
            elif found is not kernel:
                found.data["compile_fails"] = True
        elif entry is not None:
            kept = _merged(found, entry)
            if isinstance(record.get("key"), str):
                by_key[record["key"]] = (found, kept)
    for key in compiled:
        kernels[key].data.pop("compile_fails", None)
    report.call_path = write_call_path(out_dir, sources, replace=prune)
    return _write(kernels, before, out_dir, report, prune)


def merge_captured(sources: list[str | os.PathLike[str]], out: str | os.PathLike[str]) -> CaptureReport:
    """Merge the captured spec files of the directories ``sources`` (other captures' outputs: the shards of a test
    run captured on several machines, say) into those of directory ``out``. Kernels are matched by content, as
    records are: their specializations are united, and a specialization's launch variants too, except that one
    written without them (every variant built) stays so."""
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = CaptureReport()
    kernels = _existing(out_dir, report)
    before = {k: len(v.specializations) for k, v in kernels.items()}
    code: dict[str, str] = {}
    for source in sources:
        if not Path(source).is_dir():
            raise CaptureMergeError(f"merge: {str(source)!r} is not a directory of captured spec files")
        code.update(read_sources(Path(source)))
        for key, kernel in _existing(Path(source), report).items():
            found = kernels.setdefault(key, kernel)
            if found is kernel:
                continue
            if found.data["kind"] == "raw":
                for function in kernel.data.get("kernels", ()):
                    _add_function(found, function)
                if not kernel.data.get("compile_fails"):  # compiled in one capture: no failure to keep
                    found.data.pop("compile_fails", None)
            for entry in kernel.specializations:
                kept = _entry_of(found, entry)
                if kept is None:
                    found.specializations.append(entry)
                elif "variants" in kept and "variants" in entry:
                    kept["variants"] = sorted({*kept["variants"], *entry["variants"]})
                else:  # built whole on either side: whole
                    kept.pop("variants", None)
    report.call_path = write_call_path(out_dir, code)
    return _write(kernels, before, out_dir, report, prune=False)


def _write(kernels: dict[str, _Kernel], before: dict[str, int], out_dir: Path, report: CaptureReport, prune: bool) -> CaptureReport:
    """The merged kernels written, a file per module (``prune``: without the kernels no record held)."""
    if prune:
        gone = [k for k, v in kernels.items() if not v.seen]
        report.pruned = len(gone)
        for k in gone:
            del kernels[k]
    report.new_kernels = sum(1 for k in kernels if k not in before)
    report.new_specializations = sum(len(v.specializations) - before.get(k, 0) for k, v in kernels.items())
    _name(kernels)
    report.kernels = len(kernels)
    by_module: dict[str, list[_Kernel]] = {}
    for kernel in kernels.values():
        by_module.setdefault(kernel.module, []).append(kernel)
    stems = _stems(sorted(by_module))
    for path in out_dir.glob(f"*{_SUFFIX}"):  # a module none of whose kernels remain
        if path.stem not in stems.values() and _captured_file(path):
            path.unlink()
            report.files.append(path)
    for module, members in sorted(by_module.items()):
        path = out_dir / f"{stems[module]}{_SUFFIX}"
        text = _file_text(module, members, report)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            _write_atomic(path, text)
            report.files.append(path)
    return report


def _content_id(data: dict[str, Any]) -> str:
    return sha256_hex(json.dumps(content_data(data), sort_keys=True, default=str).encode())


def _existing(out_dir: Path, report: CaptureReport) -> dict[str, _Kernel]:
    """The kernels the output's captured spec files hold, by content."""
    kernels: dict[str, _Kernel] = {}
    for path in sorted(out_dir.glob(f"*{_SUFFIX}")):
        if not _captured_file(path):
            continue
        file_report = read_file(path)
        for error in file_report.errors:
            report.not_captured.append((str(path), f"kept as it is, not merged: {error}"))
        if file_report.errors:
            continue
        module = _module_of_header(path)
        for spec in file_report.specs:
            data = spec.to_data()
            entries = [dict(e) for e in data.pop("specializations", [])]
            doc = data.pop("doc", "")
            key = _content_id(data)
            kernels[key] = _Kernel(data, module, doc.removeprefix("built at "), entries)
    return kernels


def _kernel_of(record: dict[str, Any], report: CaptureReport) -> tuple[str, _Kernel, Any] | None:
    site = record.get("site") or {}
    where = f"{site.get('file', '<unknown>')}:{site.get('line', 0)}"
    module = str(site.get("module") or "__main__")
    if record["kind"] == "raw":
        return _raw_kernel(record, module, where, report)
    data = {k: v for k, v in dict(record.get("spec") or {}).items() if k not in ("doc", "specializations", "instantiations")}
    try:
        entry = parse_specializations([{"types": record.get("types", {}), "scalars": record.get("scalars", []),
                                        "raw_layouts": record.get("raw_layouts", {})}])[0]
        parse_spec({**data, "specializations": [entry]})
    except KspecError as exc:
        report.not_captured.append((f"{data.get('kind')} kernel {data.get('name')!r} built at {where}", str(exc)))
        return None
    return _content_id(data), _Kernel(data, module, where), entry


def _raw_kernel(record: dict[str, Any], module: str, where: str, report: CaptureReport) -> tuple[str, _Kernel, str | None] | None:
    """A raw module's kernel (checked when its file is written, once the functions asked of it are known) and the
    function this record looked up, if any."""
    label = str(record.get("label") or "raw_module")
    what = f"raw module {label!r} built at {where}"
    if record.get("backend", "nvrtc") != "nvrtc":
        report.not_captured.append((what, f"compiled with backend={record.get('backend')!r}; a capture serves "
                                          "NVRTC builds (kspec build compiles with NVRTC)"))
        return None
    code = record.get("code")
    if not isinstance(code, str) or not code.strip():
        report.not_captured.append((what, "no source code (a module loaded from a binary file is shipped as it is)"))
        return None
    expressions = [str(e) for e in record.get("name_expressions") or []]
    data: dict[str, Any] = {"kind": "raw", "name": label if _NAME_RE.fullmatch(label) else "raw_module", "source": code,
                            "kernels": [e for e in expressions if _NAME_RE.fullmatch(e)]}
    templates = [e for e in expressions if not _NAME_RE.fullmatch(e)]
    if templates:
        data["name_expressions"] = templates
    if record.get("options"):
        data["options"] = list(record["options"])
    if record.get("translate_cucomplex"):
        data["translate_cucomplex"] = True
    if record.get("compile_fails"):
        data["compile_fails"] = True
    function = record.get("function")
    return _content_id(data), _Kernel(data, module, where), function if isinstance(function, str) else None


def _without_variants(entry: dict[str, Any]) -> dict[str, Any]:
    """A specialization entry's identity: its types, scalars and raw layouts."""
    return {k: v for k, v in entry.items() if k != "variants"}


def _entry_of(kernel: _Kernel, entry: dict[str, Any]) -> dict[str, Any] | None:
    """The kernel's entry for ``entry``'s specialization (types, scalars, raw layouts), or None."""
    same = _without_variants(entry)
    return next((kept for kept in kernel.specializations if _without_variants(kept) == same), None)


def _merged(kernel: _Kernel, entry: dict[str, Any]) -> dict[str, Any]:
    """The kernel's entry for ``entry``'s specialization, added where it has none."""
    kept = _entry_of(kernel, entry)
    if kept is not None:
        return kept
    same = _without_variants(entry)
    kernel.specializations.append(same)
    kernel.fresh.add(id(same))
    return same


def _add_variant(found: tuple[_Kernel, dict[str, Any]] | None, variant: object) -> None:
    """A launch variant a call loaded, added to its specialization's ``variants``; an entry an earlier run wrote
    without them stays whole (every variant is built for it)."""
    if found is None:
        return
    kernel, entry = found
    try:
        text = variant_text(parse_variant(variant))
    except KspecError:  # a damaged line
        return
    if "variants" in entry or id(entry) in kernel.fresh:
        entry["variants"] = sorted({*entry.get("variants", ()), text})


def _add_function(kernel: _Kernel, function: str | None) -> None:
    """A function looked up in a raw module: listed in ``kernels`` (a plain name; a template-id is among its name
    expressions already, or the module could not have given it)."""
    if function is not None and _NAME_RE.fullmatch(function):
        functions = kernel.data.setdefault("kernels", [])
        if function not in functions:
            functions.append(function)


def _name(kernels: dict[str, _Kernel]) -> None:
    """Unique names across the output: kept where they are, ``name_2``... for a later kernel of another code."""
    taken: set[str] = set()
    for kernel in kernels.values():
        name = kernel.data["name"]
        if name not in taken:
            taken.add(name)
            continue
        base = kernel.data.get("cuda_name") or name  # the name in C++, which cuda_name keeps
        n = 2
        while f"{base}_{n}" in taken:
            n += 1
        kernel.data["name"] = f"{base}_{n}"
        taken.add(kernel.data["name"])
        if kernel.data["kind"] != "raw":
            kernel.data["cuda_name"] = base


def _file_text(module: str, members: list[_Kernel], report: CaptureReport) -> str:
    parts = [HEADER.format(module=module), f"schema = {SCHEMA_VERSION}\n"]
    for kernel in sorted(members, key=lambda k: k.data["name"]):
        data = {**kernel.data, "doc": f"built at {kernel.site}"}
        if data["kind"] == "raw":
            data["kernels"] = sorted(data.get("kernels", []))
            if not data["kernels"]:
                del data["kernels"]
            if not data.get("kernels") and not data.get("name_expressions"):
                report.not_captured.append((f"raw module {data['name']!r} built at {kernel.site}",
                                            "no function of it was looked up (a spec lists the kernels it exposes)"))
                continue
        entries = sorted(kernel.specializations, key=lambda e: json.dumps(e, sort_keys=True))
        try:
            parse_spec({**data, **({"specializations": entries} if entries else {})})  # a merge of valid sets is valid
            block = dumps_toml([parse_spec(data)]).split("\n", 1)[1].lstrip("\n")
        except KspecError as exc:
            report.not_captured.append((f"kernel {data['name']!r} built at {kernel.site}", str(exc)))
            continue
        parts.append(f"\n# {kernel.site}\n" + _with_specializations(block, entries))
    return "".join(parts)


def _with_specializations(block: str, entries: list[dict[str, Any]]) -> str:
    """A kernel's TOML block with its specializations as one inline table per line (a diff shows a new call as
    one line), placed with the kernel's own keys, before any sub-table (``[kernel.grad]``, ``[kernel.launch]``)."""
    if not entries:
        return block
    lines = "".join(f"    {_inline(entry)},\n" for entry in entries)
    text = f"specializations = [\n{lines}]\n"
    at = block.find("\n[kernel.")
    return block + text if at < 0 else block[: at + 1] + text + block[at + 1 :]


def _inline(value: Any) -> str:
    """A TOML inline value of a specialization entry (tables, lists, str, int, bool)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_inline(v)}" for k, v in value.items()) + " }" if value else "{}"
    if isinstance(value, list):
        return "[" + ", ".join(_inline(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value))  # a JSON string is a TOML basic string for these values (names, dtypes)


def _key(name: str) -> str:
    return name if _NAME_RE.fullmatch(name) else json.dumps(name)


def _captured_file(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8") as f:
            return f.readline().startswith("# Captured by `kspec capture`")
    except OSError:
        return False


def _module_of_header(path: Path) -> str:
    with path.open(encoding="utf-8") as f:
        match = re.search(r"code of module (\S+) built", f.readline())
    return match.group(1) if match else path.stem


def _stems(modules: list[str]) -> dict[str, str]:
    """Each module's file stem, distinct (a second module with the same stem gets ``_2``...)."""
    stems: dict[str, str] = {}
    taken: set[str] = set()
    for module in modules:
        stem = base = _file_stem(module)
        n = 2
        while stem in taken:
            stem, n = f"{base}_{n}", n + 1
        stems[module] = stem
        taken.add(stem)
    return stems


def _file_stem(module: str) -> str:
    """A spec file's stem for a module: a Python module name of its own, as ``kspec generate`` needs
    (``cupyx.scipy.ndimage._filters_core`` -> ``cupyx_scipy_ndimage_filters_core``, ``__main__`` -> ``main``)."""
    stem = re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9]", "_", module)).strip("_")
    if not stem or stem[0].isdigit() or keyword.iskeyword(stem) or stem == "kspec":
        stem = f"captured_{stem}"
    return stem


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
