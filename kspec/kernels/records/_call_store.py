"""Call records: what a kernel's calls planned in earlier processes, kept on disk, so that its first call in a
later process binds and plans nothing.

A signature (:mod:`..callpath._signature`: argument types, shapes, strides, dtypes, keyword values) decides everything a
plan decides: the prepared call's layout, launches, grids, frames and outputs (:mod:`..callpath._prepared`). One process
keeps the prepared call under its signature (:mod:`..callpath._call_path`); a *call record* keeps its description, as data,
for the next process (:mod:`._call_restore` turns one into the other). Per kernel one small file in kspec's
memo directory holds per signature the description, and the binaries its launches load (by binary-cache key);
its directory is named by a digest of everything besides the kernel that a plan reads (the device's arch and
SM count, the compiler's environment, kspec's planning, checking and rendering code, the interpreter), its
name by that and the kernel's spec or constructor call. A process's first lookup reads the whole directory
when it holds few files (a program's own kernels), so that later kernels' first calls open no file.

A first call whose signature the record holds loads those binaries and makes the prepared call from the
description: no spec binding, specialization, plan, interface or cache-key computation, at most one file
read (the "second kernel" case: benchmarks/host/second_kernel.py). A constructor call whose exact arguments have a record
was checked in an earlier process: its spec is built when something needs it, which a recorded call never
does. Anything missing (the file, the signature) or damaged (a CRC-32 covers the file) is a miss: the call
plans as it would without records, and its signature is added. A record is a memo, never an authority:
planning writes it, and a stale one cannot be found, because every input of a plan is in its file's path or
its signature.

Not recorded: processes with several devices; kernels whose plans read a tuning record (``KSPEC_TUNING``, a
build output's or spec file's ``tuning.json``) or fixed knobs; kernels served from precompiled binaries (a
BinaryStore's, not the cache's); calls with textures. ``KSPEC_CALL_RECORDS=0`` turns records off.
"""

from __future__ import annotations

import marshal
import os
import sys
import struct
import threading
import zlib
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..._digest import sha256_hex
from ..._errors import NvrtcNotFoundError
from ...runtime import current_device_id, get_device

RECORDS_ENV = "KSPEC_CALL_RECORDS"
RECORD_FORMAT = 1  # bump when what a description holds changes meaning
MAX_SIGNATURES = 32  # per kernel file: past it a record gains nothing (a kernel cycling through shapes)
_OFF = ("0", "off", "false", "no")

_lock = threading.Lock()
_files: dict[str, dict[str, Any]] = {}  # a record file's signatures, read once per process
READ_AHEAD = 64  # a records directory of at most this many files is read whole by the process's first lookup
_listed: dict[str, frozenset[str] | None] = {}  # directory -> the files read ahead, or None: too many, read one by one


def records_enabled() -> bool:
    """Whether call records are read and written (``KSPEC_CALL_RECORDS``, on unless ``0``/``off``), as far as
    this process knows: not once it found that it can keep none (no NVRTC, :func:`settle_availability`), so
    that a served process's kernels spell no signatures and describe no plans for records never written."""
    return not _state["unavailable"] and os.environ.get(RECORDS_ENV, "").strip().lower() not in _OFF


@lru_cache(maxsize=8)
def _environment(device_id: int) -> str:
    """What every plan on a device reads besides the kernel and the call, as one digest (once per process and
    device: a device's arch and SM count never change)."""
    from ..._version import __version__
    from ..._memo import tree_digest
    from ..._resources import renderer_digest
    from ...compiler import environment_key

    device = get_device(device_id)
    arch, sm_count = device.arch, device.multiprocessor_count
    compiler = environment_key(arch)  # first: without NVRTC it raises, and a served process hashes no trees
    kernels, specs_dir = record_trees()
    planner = tree_digest(kernels)
    specs = tree_digest(specs_dir)
    interpreter = f"{sys.implementation.cache_tag} marshal {marshal.version}"  # the file's data format
    text = (f"{RECORD_FORMAT} {__version__} {interpreter} {planner} {specs} {renderer_digest()} "
            f"{compiler} {arch} {sm_count}")
    return sha256_hex(text.encode())


def record_trees() -> tuple[str, str]:
    """The source trees a record's plan depends on: kspec/kernels (binding, planning, the call path, these records)
    and kspec/spec (what a constructor call checks). Named from this file's place, which moved once (into
    kspec/kernels/records): the digest then covered this package alone and a spec directory that did not exist,
    so a checkout's changed planner served the plans its records held."""
    kernels = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return kernels, os.path.join(os.path.dirname(kernels), "spec")


def settle_availability() -> None:
    """Find out now whether records can be kept (kspec.cupy's preload, at a program's start): a process without
    NVRTC whose version is not memoized (a served one on a fresh machine) keeps none, and finding that out cost
    its first kernel call ~0.5 ms; with NVRTC this reads the toolchain memo its first call would read."""
    from ...compiler import nvrtc_version

    try:
        nvrtc_version()
    except NvrtcNotFoundError:
        _state["unavailable"] = True


def _records_dir(environment: str) -> str:
    """The directory of one environment's record files: ``calls/<environment>`` in kspec's memo directory
    (``KSPEC_MEMO_DIR``), so that a process finds its environment's files, and only those, by one listing."""
    from ..._memo import memo_dir

    memo = memo_dir()  # worked out once per value of its variable
    directory = _DIRECTORIES.get((memo, environment))
    if directory is None:
        directory = _DIRECTORIES[(memo, environment)] = os.path.join(memo, "calls", environment[:24])
    return directory


_DIRECTORIES: dict[tuple[Path, str], str] = {}


def signature_text(types: tuple[type, ...], items: tuple[Any, ...]) -> str | None:
    """A signature (argument types, the table key ``(extra, *key items)``) as text that means the same in every
    process, or None where an item has no such spelling (the call is then not recorded)."""
    parts = [",".join(_type_name(t) for t in types)]
    for item in items:
        tp = type(item)
        if (tp is tuple and all(type(v) is int for v in item)) or item is None or tp in _PLAIN:  # shapes, strides
            parts.append(repr(item))
            continue
        text = _SPELLED.get(item) if tp is not tuple else None  # a dtype or type (only those are kept there)
        if text is None:
            text = _portable(item)
            if text is None:
                return None
        parts.append(text)
    return "|".join(parts)


_SPELLED: dict[Any, str] = {}  # dtype objects and types spelled before (a few per process)
_PLAIN = (bool, int, str, float)


def _type_name(tp: type) -> str:
    return f"{tp.__module__}.{tp.__qualname__}"


def _portable(item: Any) -> str | None:
    tp = type(item)
    if item is None or tp in _PLAIN:
        return repr(item)
    if isinstance(item, tuple):
        inner = [_portable(x) for x in item]
        return None if None in inner else "(" + ",".join(inner) + ")"  # type: ignore[arg-type]
    if isinstance(item, type):
        text = _type_name(item)
    elif isinstance(item, np.dtype):
        text = f"numpy:{item.str}:{item.descr!r}"
    elif tp.__module__ == "torch" and tp.__name__ == "dtype":
        text = str(item)
    else:
        return None
    if len(_SPELLED) < 1024:
        _SPELLED[item] = text
    return text


class CallRecords:
    """One kernel's call records (see the module docstring). ``identity``: what names the kernel's plans
    besides the environment (its kind and spec digest, or its constructor call's exact arguments); ``arity``:
    its (inputs, outputs), kept in the file for a constructor call that finds it (:meth:`arity_of`)."""

    __slots__ = ("_identity", "_paths", "arity")

    def __init__(self, identity: str, arity: tuple[int, int] | None = None) -> None:
        self._identity = identity
        self._paths: dict[int, tuple[str, str]] = {}  # device -> (record file, its directory)
        self.arity = arity

    def _file(self) -> tuple[str, str, int]:
        """(this kernel's record file for the current device, its directory, the device): a process's device
        kind (a GPU, or the CPU device) is in the directory's name through its arch."""
        device_id = current_device_id()
        found = self._paths.get(device_id)
        if found is None:
            environment = _environment(device_id)
            directory = _records_dir(environment)
            digest = sha256_hex(f"{self._identity} {environment}".encode())
            found = self._paths[device_id] = (os.path.join(directory, f"{digest[:40]}.kcr"), directory)
        return found[0], found[1], device_id

    def _data(self) -> dict[str, Any]:
        """The file's content, read once per process: {"arity", "signatures", "binaries", "device"}. The first
        lookup in a directory reads all of its files where they are few (:func:`_read_directory`)."""
        if _state["unavailable"]:
            return _UNAVAILABLE
        try:
            path, directory, device_id = self._file()
        except NvrtcNotFoundError:  # no NVRTC and no memo of its version: a process served by binaries alone
            _state["unavailable"] = True  # keeps no records (their directory is named by the compiler's version)
            return _UNAVAILABLE
        found = _files.get(path)
        if found is None:
            if directory not in _listed:
                _read_directory(directory, device_id)
                found = _files.get(path)
            if found is None:
                listed = _listed[directory]
                found = _read(path, device_id) if listed is None or os.path.basename(path) in listed else None
                with _lock:
                    found = _files.setdefault(path, found or _empty(device_id))
        return found

    def arity_of(self) -> tuple[int, int] | None:
        """The recorded kernel's (inputs, outputs) where its file holds a signature, else None."""
        data = self._data()
        arity = data["arity"]
        if not data["signatures"] or arity is None or not all(type(n) is int and n >= 0 for n in arity):
            return None
        return arity

    def find(self, signature: str) -> tuple[Any, ...] | None:
        """The description (kspec/kernels/records/_call_restore.py) recorded for ``signature`` on the current device, or
        None."""
        found = self._data()["signatures"].get(signature)
        return found if type(found) is tuple else None

    def binary(self, key: str) -> bytes | None:
        """The binary kept with the records under its cache key (the file's CRC was checked), or None."""
        image = self._data()["binaries"].get(key)
        return image if type(image) is bytes else None

    def add(self, signature: str, description: tuple[Any, ...], device_id: int, binaries: Mapping[str, bytes]) -> None:
        """Record ``description`` (of a call on ``device_id``) under ``signature``, with the ``binaries`` its
        launches load (by cache key), for this process and the next; a file that cannot be written is left as
        it is (a memo: the next process plans)."""
        data = self._data()
        entries = data["signatures"]
        if data is _UNAVAILABLE or signature in entries or len(entries) >= MAX_SIGNATURES or device_id != data["device"]:
            return
        from ..._atomic import write_atomic

        path, _directory, _device = self._file()
        with _lock:
            entries[signature] = description
            kept = data["binaries"]
            for key, image in binaries.items():
                kept.setdefault(key, bytes(image))
            if self.arity is not None:
                data["arity"] = self.arity
            encoded = _encoded(data)
        try:
            write_atomic(Path(path), encoded)
        except OSError:
            pass


def _empty(device_id: int) -> dict[str, Any]:
    return {"arity": None, "signatures": {}, "binaries": {}, "device": device_id}


_UNAVAILABLE = _empty(-1)  # what every record reads as where records are unavailable: nothing, and nothing is added
_state = {"unavailable": False}


def _read(path: str, device_id: int) -> dict[str, Any] | None:
    """A record file's content, or None where it is missing or not one kspec wrote whole."""
    try:
        with open(path, "rb", buffering=0) as handle:  # unbuffered: one read
            data = handle.read()
    except OSError:
        return None
    return _decoded(data, device_id)


def _read_directory(directory: str, device_id: int) -> None:
    """The first lookup in an environment's records directory: where it holds at most READ_AHEAD files (a
    program's own kernels), read them all now, so that the first call of each later kernel of the process
    finds its record in memory instead of opening a file then (the read, the decode, and the first run of
    that code in the process: the second-kernel case). Keeps the names it read in ``_listed`` (a file
    another process writes later is not seen: a memo), or None where there were too many (each kernel then
    reads its own file)."""
    try:
        with os.scandir(directory) as entries:
            names = frozenset(e.name for e in entries if e.name.endswith(".kcr"))
    except OSError:
        names = frozenset()
    listed = names if len(names) <= READ_AHEAD else None
    if listed:
        read = {}
        for name in listed:
            path = os.path.join(directory, name)
            if path not in _files:
                read[path] = _read(path, device_id) or _empty(device_id)
        with _lock:
            for path, found in read.items():
                _files.setdefault(path, found)
    _listed[directory] = listed


# A record file: MAGIC, the CRC-32 of the rest, then ``marshal`` data (the interpreter is in its directory's name):
# {"arity", "signatures": {text: description}, "binaries": {cache key: bytes}}. One read, no parsing beyond
# marshal's, and a torn or damaged file is a miss.
_MAGIC = b"KSCR"
_HEAD = struct.Struct("<4sI")


def _encoded(data: Mapping[str, Any]) -> bytes:
    payload = marshal.dumps({"format": RECORD_FORMAT, "arity": data["arity"], "signatures": data["signatures"],
                             "binaries": data["binaries"]})  # fmt: skip
    return _HEAD.pack(_MAGIC, zlib.crc32(payload)) + payload


def _decoded(data: bytes, device_id: int) -> dict[str, Any] | None:
    """A record file's content (see :func:`_encoded`), or None when it is not one kspec wrote whole."""
    try:
        magic, crc = _HEAD.unpack_from(data)
        payload = memoryview(data)[_HEAD.size :]
        if magic != _MAGIC or zlib.crc32(payload) != crc:
            return None
        found = marshal.loads(payload)
        if (type(found) is not dict or found.get("format") != RECORD_FORMAT
                or type(found.get("signatures")) is not dict or type(found.get("binaries")) is not dict):  # fmt: skip
            return None
        arity = found.get("arity")
        arity = arity if type(arity) is tuple and len(arity) == 2 else None
        return {"arity": arity, "signatures": found["signatures"], "binaries": found["binaries"], "device": device_id}
    except (struct.error, ValueError, EOFError, TypeError):
        return None
