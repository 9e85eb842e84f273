"""Spec files: TOML (or JSON) holding any number of kernels, loaded one by one or a directory at a time.

```toml
schema = 1

[[kernel]]
kind = "elementwise"
name = "squared_diff"
in_params = "T x, T y"
out_params = "T z"
operation = '''
z = (x - y) * (x - y);
'''
instantiations = [{T = ["float32", "float64"]}]
```
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import DuplicateNameError, SpecError, SpecErrorGroup, SpecFileError
from ._models import AnySpec, parse_spec
from ._scan import SPEC_SUFFIXES, find_spec_files

SCHEMA_VERSION = 1
_FILE_KEYS = ("schema", "doc", "kernel")


@dataclass
class FileReport:
    """What loading one spec file found: its kernels and every error (validation goes on past the first)."""

    path: Path
    specs: list[AnySpec] = field(default_factory=list)
    errors: list[SpecError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


class SpecLibrary(Mapping[str, AnySpec]):
    """Kernels by name, from one or more spec files; one namespace (names are unique across its files)."""

    def __init__(self, specs: Iterable[AnySpec] = ()) -> None:
        self._specs: dict[str, AnySpec] = {}
        for spec in specs:
            self.add(spec)

    def add(self, spec: AnySpec) -> None:
        other = self._specs.get(spec.name)
        if other is not None:
            raise DuplicateNameError(
                f"kernel name {spec.name!r} is defined twice: in {_where(other)} and in {_where(spec)}",
                file=spec.origin,
                kernel=spec.name,
                field="name",
            )
        self._specs[spec.name] = spec

    def __getitem__(self, name: str) -> AnySpec:
        try:
            return self._specs[name]
        except KeyError:
            raise KeyError(f"no kernel named {name!r}; the library has: {', '.join(sorted(self._specs))}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def files(self) -> list[Path]:
        return sorted({s.origin for s in self._specs.values() if s.origin is not None})


def _where(spec: AnySpec) -> str:
    return str(spec.origin) if spec.origin is not None else "Python code"


def spec_files(paths: str | Path | Iterable[str | Path]) -> list[Path]:
    """The spec files named by ``paths``: files as given, directories searched recursively (sorted). What
    cannot be searched (a broken symbolic link, an unreadable directory, a missing path) raises: a
    ``SpecFileError`` naming it, or a ``SpecErrorGroup`` of several (:func:`find_spec_files` returns them)."""
    files, errors = find_spec_files(paths)
    _raise(errors)
    return files


def read_file(path: str | Path) -> FileReport:
    """Load one spec file, validating every kernel and collecting every error."""
    path = Path(path)
    report = FileReport(path)
    try:
        data = _read_data(path)
        tables = _kernel_tables(data, path)
    except SpecError as exc:
        report.errors.append(exc)
        return report
    try:
        _read_tables(report, tables, path)
    except RecursionError:  # a value nested thousands deep inside a kernel table
        report.specs.clear()
        report.errors.append(SpecFileError("values are nested too deeply to be a spec", file=path))
    return report


def _read_tables(report: FileReport, tables: list[Any], path: Path) -> None:
    names: dict[str, int] = {}
    for k, table in enumerate(tables):
        if not isinstance(table, Mapping):
            report.errors.append(SpecFileError(f"kernel[{k}] must be a table", file=path, field=f"kernel[{k}]"))
            continue
        try:
            spec = parse_spec(table, file=path)
        except SpecErrorGroup as group:
            report.errors.extend(group.errors)
            continue
        except SpecError as exc:
            report.errors.append(exc)
            continue
        if spec.name in names:
            report.errors.append(
                DuplicateNameError(
                    f"kernel name {spec.name!r} is defined twice in this file (kernel[{names[spec.name]}] and kernel[{k}])",
                    file=path,
                    kernel=spec.name,
                    field="name",
                )
            )
            continue
        names[spec.name] = k
        report.specs.append(spec)


def load_file(path: str | Path) -> list[AnySpec]:
    """The kernels of one spec file; raises the first error (or a group of all of them)."""
    report = read_file(path)
    _raise(report.errors)
    return report.specs


def load_library(paths: str | Path | Iterable[str | Path]) -> SpecLibrary:
    """Every kernel of the given files and directories, as one namespace."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    errors: list[SpecError] = []
    library = SpecLibrary()
    files = spec_files(paths)
    if not files:  # what `kspec validate` says of an empty directory, rather than an empty library
        shown = " ".join(str(p) for p in paths)
        raise SpecFileError(f"no spec files (*.toml, *.json) in {shown}")
    for path in files:
        report = read_file(path)
        errors.extend(report.errors)
        for spec in report.specs:
            try:
                library.add(spec)
            except SpecError as exc:
                errors.append(exc)
    _raise(errors)
    return library


def _raise(errors: Sequence[SpecError]) -> None:
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise SpecErrorGroup(list(errors))


def _read_data(path: Path) -> Any:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SpecFileError(f"cannot read: {exc.strerror}", file=path) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecFileError("not UTF-8 text", file=path) from None
    # Both parsers recurse once per nesting level: `[[[[...` 100000 deep is a RecursionError, not a crash.
    deep = SpecFileError("values are nested too deeply to be a spec", file=path)
    if path.suffix == ".json":
        try:
            return json.loads(text, object_pairs_hook=_refuse_duplicate_keys)
        except _DuplicateKey as exc:  # TOML refuses them too; JSON would keep the last value silently
            raise SpecFileError(f"invalid JSON: duplicate key {exc.key!r} in one object (JSON parsers keep the last "
                                "value silently; kspec refuses it, as TOML does)", file=path, field=exc.key) from None
        except json.JSONDecodeError as exc:
            raise SpecFileError(f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", file=path) from None
        except RecursionError:
            raise deep from None
    if path.suffix != ".toml":
        raise SpecFileError(f"spec files end in {' or '.join(SPEC_SUFFIXES)}", file=path)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecFileError(f"invalid TOML: {exc}", file=path) from None
    except RecursionError:
        raise deep from None


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _refuse_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _kernel_tables(data: Any, path: Path) -> list[Any]:
    if not isinstance(data, Mapping):
        raise SpecFileError("a spec file holds a table with 'schema' and 'kernel' keys", file=path)
    unknown = [k for k in data if k not in _FILE_KEYS]
    if unknown:
        raise SpecFileError(
            f"unknown key {unknown[0]!r} at the top level (allowed: {', '.join(_FILE_KEYS)})", file=path, field=unknown[0]
        )
    if "schema" not in data:
        raise SpecFileError(f"missing 'schema = {SCHEMA_VERSION}' at the top of the file", file=path, field="schema")
    if type(data["schema"]) is not int or data["schema"] != SCHEMA_VERSION:  # not 1.0, not true: an int
        raise SpecFileError(
            f"schema {data['schema']!r} is not supported (this kspec reads schema {SCHEMA_VERSION})",
            file=path,
            field="schema",
        )
    tables = data.get("kernel", [])
    if not isinstance(tables, list):
        raise SpecFileError("'kernel' must be an array of tables ([[kernel]] in TOML)", file=path, field="kernel")
    return tables


# Field order in written spec files: what a reader looks for first.
_FIELD_ORDER = (
    "kind name cuda_name doc in_params out_params operation map_expr reduce_expr post_map_expr identity reduce_type "
    "loop_prep after_loop preamble source path kernels name_expressions no_return return_tuple reduce_dims "
    "cupy_headers cooperative translate_cucomplex options launch attributes instantiations specializations"
).split()


def spec_to_data(spec: AnySpec) -> dict[str, Any]:
    """A kernel as the table a spec file holds, fields in reading order."""
    data = spec.to_data()
    rank = {k: i for i, k in enumerate(_FIELD_ORDER)}
    return {k: data[k] for k in sorted(data, key=lambda k: rank.get(k, len(rank)))}


def dumps_toml(specs: Iterable[AnySpec]) -> str:
    """A spec file (TOML) holding these kernels; ``load`` of it gives back equal models."""
    import tomli_w

    literals: dict[str, str] = {}

    def literal_code(data: dict[str, Any]) -> dict[str, Any]:
        # CUDA code reads best as a TOML literal string (no escapes); tomli-w writes basic strings, so a
        # placeholder goes in and the literal replaces it afterwards.
        out = {}
        for key, value in data.items():
            if isinstance(value, str) and "\n" in value and _literal_ok(value):
                token = f"@@kspec-literal-{len(literals)}@@"
                literals[token] = value
                value = token
            out[key] = value
        return out

    doc = {"schema": SCHEMA_VERSION, "kernel": [literal_code(spec_to_data(s)) for s in specs]}
    text = tomli_w.dumps(doc, multiline_strings=True)
    for token, value in literals.items():
        text = text.replace(f'"{token}"', _LITERAL + "\n" + value + _LITERAL)
    return text


_LITERAL = "'" * 3


def _literal_ok(text: str) -> bool:
    """Whether a string can be written as a TOML multi-line literal string unchanged."""
    if _LITERAL in text or text.endswith("'"):
        return False
    return all(ch in "\n\t" or (ord(ch) >= 0x20 and ord(ch) != 0x7F) for ch in text)


def dumps_json(specs: Iterable[AnySpec]) -> str:
    """A spec file (JSON) holding these kernels."""
    doc = {"schema": SCHEMA_VERSION, "kernel": [spec_to_data(s) for s in specs]}
    return json.dumps(doc, indent=2) + "\n"
