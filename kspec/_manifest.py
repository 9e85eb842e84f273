"""The format of a ``kspec build`` output's ``manifest.json``: one leaf module for its writer and readers.

``kspec.build`` writes it; ``kspec.kernels`` (the binary store) and the hatch hook read it. Keeping the
format here, with no import of either side, is what lets a process that only serves binaries read a
manifest without importing the build machinery (render, spec models, Jinja).

Layout (version 2)::

    {"kspec_manifest": 2, "kspec_version": "...",
     "entries": [{"specialization_key", "file", "format", "arch", "sha256", "lowered_names",
                  "interface", ...}, ...]}

An entry of ``format`` "failed" holds, in its file, the message of a compile that failed as its spec declared (a
captured raw module's ``compile_fails``): a served call raises it. ``interface`` (elementwise and reduction
entries) names a small JSON file beside the binaries, one per specialization: its launch interface computed
at build time (variants, name expressions, ABI; data of ``kspec.render.interface_to_data``), so a process
serving a binary reads the interface of the kernels it calls and never derives it. A reader that finds none (a manifest written before it existed, or a file that
does not decode to the entry's specialization) derives it. Readers of version 2 ignore fields they do not
know, so adding it kept the version.

The writer (:func:`manifest_bytes`) also puts an ``index`` at the head of the document and the entries in
key order, one a line: ``{"kspec_manifest": 2, "kspec_version": "...", "index": {"prefix": P, "count": N,
"buckets": {"3fa": [start, end], ...}},\n"entries": [\n{...},\n{...}\n]}``. A bucket holds the entries whose
specialization key starts with its P characters; ``[start, end)`` are their bytes counted from the line after
``"entries": [``. A process serving a few kernels of a large build (a captured library's: 34,320 entries and
45 MB for six archs, about a second to parse whole) then reads the head and the buckets its keys fall in
(:func:`read_index`). The index is trusted only in exactly this layout and where each bucket parses to entries of
its keys: a document rewritten by any other tool reads whole, as before, and is still valid JSON for every reader.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

MANIFEST_NAME = "manifest.json"
MANIFEST_VERSION = 2  # 2: entries carry the binary's sha256
# A build's entry for a module whose source is expected to fail (a captured raw spec's compile_fails): the failed
# compile's message, as UTF-8 text, in the place of a CUBIN for that arch
FAILURE_FORMAT = "failed"
# .so: CPU-device modules (kspec build --arch host)
BINARY_SUFFIXES = (".cubin", ".ptx", ".so", "." + FAILURE_FORMAT)
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
    path = confined_text(str(out), rel, suffixes)
    return None if path is None else Path(path)


def confined_text(out: str, rel: object, suffixes: tuple[str, ...] = BINARY_SUFFIXES) -> str | None:
    """:func:`lexically_confined` as a path string (what a binary store keeps: a served process reads files by
    them, and making and printing a ``Path`` costs more than the read on a slow host)."""
    if not isinstance(rel, str) or not rel or "\\" in rel or "\0" in rel:
        return None
    parts = rel.split("/")  # an absolute path starts with an empty part
    if any(part in ("", ".", "..") for part in parts):
        return None
    if not any(parts[-1].endswith(suffix) and len(parts[-1]) > len(suffix) for suffix in suffixes):
        return None
    return os.path.join(out, *parts)


def resolves_inside(out: Path, path: str | Path) -> bool:
    """Whether ``path`` stays inside ``out`` once symbolic links are followed: done for a file about to be read,
    not for every file a manifest lists. ``out`` itself may be a link (an installed package's directory, say):
    what counts is that nothing below it leads elsewhere, so a path spelled below ``out`` whose components
    below it are no links is inside at the cost of an ``lstat`` each; any other path is resolved whole."""
    top, below = str(out), str(path)
    if below.startswith(top + os.sep):
        where, inside = top, True
        for part in below[len(top) + 1:].split(os.sep):
            where = os.path.join(where, part)
            if part in ("", ".", "..") or os.path.islink(where):
                inside = False
                break
        if inside:
            return True
    try:
        return Path(path).resolve().is_relative_to(out.resolve())
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


_ENTRIES_START = b',\n"entries": [\n'
_ENTRIES_END = b"\n]}\n"
_SEPARATOR = b",\n"
_HEAD = re.compile(rb'\{"kspec_manifest": (\d{1,9}), "kspec_version": ("(?:[^"\\]|\\.){0,200}"), "index": ')
_HEAD_READ = 1 << 16  # the first read of a manifest's head; an index of 4,096 buckets is about 100 KB
_BUCKET_TARGET = 16  # entries a bucket holds on average, at most (a prefix of 3 hex digits for 34,320 entries)


def manifest_bytes(version: str, entries: list[dict[str, Any]]) -> bytes:
    """The manifest document with its index, as written (see the module docstring). Entries are sorted by
    specialization key (in their given order within a key), each one compact JSON line."""
    lines = sorted(((e["specialization_key"], json.dumps(e, sort_keys=True).encode()) for e in entries), key=lambda t: t[0])
    prefix = 1
    while len(lines) > _BUCKET_TARGET * 16**prefix and prefix < 8:
        prefix += 1
    buckets: dict[str, list[int]] = {}
    offset = 0
    for key, line in lines:
        start = offset + (len(_SEPARATOR) if offset else 0)
        offset = start + len(line)
        span = buckets.setdefault(key[:prefix], [start, offset])
        span[1] = offset
    index = {"prefix": prefix, "count": len({key for key, _ in lines}), "buckets": buckets}
    head = f'{{"kspec_manifest": {MANIFEST_VERSION}, "kspec_version": {json.dumps(version)}, "index": {json.dumps(index)}'
    return head.encode() + _ENTRIES_START + _SEPARATOR.join(line for _, line in lines) + _ENTRIES_END


class ManifestIndex:
    """The index at the head of a manifest :func:`manifest_bytes` wrote: which bytes hold the entries of a key."""

    def __init__(self, path: Path, version: int, prefix: int, count: int, buckets: dict[str, list[int]], base: int) -> None:
        self.path, self.version, self.prefix, self.count = path, version, prefix, count
        self._buckets, self._base = buckets, base

    def bucket(self, key: str) -> str:
        return key[: self.prefix]

    def entries(self, bucket: str) -> list[Any] | None:
        """The entries filed under a bucket (none when the index has no such bucket), or None when the file does
        not hold entries of that bucket where the index says (damaged, or rewritten in place): read it whole."""
        span = self._buckets.get(bucket)
        if span is None:
            return []
        start, end = span
        try:
            with open(self.path, "rb") as f:
                f.seek(self._base + start)
                data = f.read(end - start)
            entries: list[Any] = json.loads(b"[" + data + b"]")
        except (OSError, ValueError, RecursionError):
            return None
        for entry in entries:
            key = entry.get("specialization_key") if isinstance(entry, dict) else None
            if not isinstance(key, str) or key[: self.prefix] != bucket:
                return None
        return entries


def read_index(out_dir: str | os.PathLike[str]) -> ManifestIndex | None:
    """The index of a build directory's manifest, or None when it has none in :func:`manifest_bytes`'s layout
    (an older or hand-written manifest, a damaged head, a file of another length than the index describes)."""
    path = Path(out_dir) / MANIFEST_NAME
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD_READ)
            found = _HEAD.match(head)
            if found is None:
                return None
            decoder = json.JSONDecoder()
            while True:  # the index ends where it parses: read on until it does
                try:
                    index, end = decoder.raw_decode(head.decode("latin-1"), found.end())
                    if head[end : end + len(_ENTRIES_START)] == _ENTRIES_START:
                        break
                    if len(head) >= end + len(_ENTRIES_START):
                        return None
                except ValueError:
                    pass
                more = f.read(len(head))
                if not more:
                    return None
                head += more
            size = os.fstat(f.fileno()).st_size
    except (OSError, RecursionError):
        return None
    base = end + len(_ENTRIES_START)
    prefix, count, buckets = (index.get(k) if isinstance(index, dict) else None for k in ("prefix", "count", "buckets"))
    if not (isinstance(prefix, int) and 1 <= prefix <= 8 and isinstance(count, int) and isinstance(buckets, dict)):
        return None
    last = 0
    for span in buckets.values():
        if not (isinstance(span, list) and len(span) == 2 and all(type(v) is int for v in span) and 0 <= span[0] <= span[1]):
            return None
        last = max(last, span[1])
    if base + last + len(_ENTRIES_END) != size:
        return None
    return ManifestIndex(path, int(found.group(1)), prefix, count, buckets, base)


# A wheel's registration of its build output for lookup by content (read by kspec/kernels/binaries/_stores.py):
# the hatch hook installs <prefix>/share/kspec/binaries/<distribution>.json naming the directory, relative to the
# sys.path entry the package is installed in.
REGISTRATION_DIR = ("share", "kspec", "binaries")
REGISTRATION_VERSION = 1


def registration_document(binaries: str) -> dict[str, Any]:
    """The registration of a package's binaries directory (a relative POSIX path such as ``pkg/kernels/_binaries``)."""
    return {"kspec_binaries": REGISTRATION_VERSION, "binaries": binaries}
