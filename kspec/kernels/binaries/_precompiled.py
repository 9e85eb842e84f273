"""Precompiled binaries (``kspec build`` output: ``manifest.json`` plus CUBIN/PTX files) as a lookup table.

A kernel given a :class:`BinaryStore` loads the binary of its specialization for the device instead of
compiling: the CUBIN of the same major architecture with the highest minor not above the device's (an
sm_80 CUBIN runs on sm_86; sm_90 runs only on sm_90), else PTX when the store has it (the driver JIT-compiles
it), else nothing, and the caller compiles with NVRTC. NVRTC is never imported when a binary serves.

The manifest is data from disk, so it is checked before anything is served: every entry must be whole,
its file must lie under the directory (no ``..``, no absolute path), and a binary is served only when its
bytes match the manifest's sha256. A manifest kspec wrote is read and checked a bucket of keys at a time, on
the first lookup of a key in it (kspec/_manifest.py's index: a served process reads what it calls of a large
build's, not 45 MB); any other is read and checked whole when the store opens. A file that does not (truncated, rewritten), or that is missing, is a miss
with a :class:`kspec.BinaryWarning` naming it, once per process: the kernel compiles instead. (A build
killed before its manifest leaves the previous manifest and its binaries whole: see kspec.build._output.)
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from pathlib import Path
from typing import Any

from ..._named_tuple import NamedTuple
from ..._errors import BinaryWarning, KspecTypeError, KspecValueError, LaunchError
from ..._binfmt import loadable_image
from ..._digest import sha256_hex
from ..._manifest import (
    FAILURE_FORMAT,
    INTERFACE_SUFFIX,
    MANIFEST_NAME,
    MANIFEST_VERSION,
    ManifestIndex,
    confined_text,
    read_index,
    read_manifest,
    resolves_inside,
)
from ...compiler import arch_version  # the one arch-string rule (kspec/compiler/_arch.py)

_warned_lock = threading.Lock()
_warned: set[tuple[str, str]] = set()  # (file, expected sha256) already warned about in this process
_HEX = "0123456789abcdef"  # a sha256 in the manifest: 64 of these
_FORMATS = ("cubin", "ptx", FAILURE_FORMAT)
_HOST = ("so", "host")  # (format, arch) of a CPU-device module (kspec build --arch host)


class StoredBinary(NamedTuple):
    """One binary of the store: its file, format, architecture, lowered names and expected sha256."""

    path: str  # a string: kspec/_manifest.py's confined_text
    format: str
    arch: str
    lowered_names: dict[str, str]
    sha256: str = ""
    data: bytes | None = None  # the verified bytes, once find() has read them

    def read(self) -> bytes:
        return loadable_image(self.data if self.data is not None else _read_file(self.path), self.format)

    def failure(self) -> str | None:
        """For a module the build found failing as its spec said (a captured raw module's ``compile_fails``): the
        compile's message, which a served call raises; None for a binary."""
        if self.format != FAILURE_FORMAT:
            return None
        return (self.data if self.data is not None else _read_file(self.path)).decode("utf-8", "replace")


def _read_file(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


# a checked manifest entry: (specialization key, binary, launch interface file, launch variant)
_Entry = tuple[str, StoredBinary, str | None, str | None]


class BinaryStore:
    """The binaries of one ``kspec build`` output directory, by specialization key."""

    def __init__(
        self, directory: str | os.PathLike[str], *, manifest: dict[str, Any] | None = None, index: ManifestIndex | None = None
    ) -> None:
        """``manifest`` or ``index``: the directory's manifest, or its index, when the caller has just read it (it is
        read once)."""
        if not isinstance(directory, (str, os.PathLike)):
            raise KspecTypeError(f"binaries: expected a directory path, got {type(directory).__name__}")
        self.directory = Path(directory)
        self._directory_text = str(self.directory)
        _check_directory(self.directory)
        self._by_key: dict[str, list[StoredBinary]] = {}
        # one launch variant's binaries (a captured specialization's `variants`): (key, "entry/index/ndim/vec")
        self._by_variant: dict[tuple[str, str], list[StoredBinary]] = {}
        self._variant_archs: dict[str, set[str]] = {}  # key -> the archs some variant of it was built for
        self._verified: dict[str, StoredBinary | None] = {}
        # launch interfaces the build stored beside the binaries (kspec/_manifest.py): read on first use, per key
        self._interface_files: dict[str, str] = {}
        self._interfaces: dict[str, Any] = {}
        # a manifest kspec wrote is read a bucket of keys at a time, each checked when first looked up (a served
        # process reads the few it calls of a large build's); any other is read and checked whole, here
        self._index: ManifestIndex | None = None
        self._read_buckets: set[str] = set()
        self._lock = threading.Lock()
        if manifest is None or manifest.get("kspec_manifest") != MANIFEST_VERSION:
            index = index if index is not None else read_index(self.directory)
            if index is not None and index.version == MANIFEST_VERSION:
                self._index = index
                return
        self._add_all(manifest)

    def _add_all(self, manifest: dict[str, Any] | None) -> None:
        if manifest is None or manifest.get("kspec_manifest") != MANIFEST_VERSION:
            manifest = read_manifest(self.directory)
        if manifest is None:
            raise KspecValueError(
                f"binaries: {str(self.directory)!r} has no kspec {MANIFEST_NAME} of version {MANIFEST_VERSION} "
                "(write one with kspec build -o DIR)"
            )
        entries = manifest.get("entries")
        if not isinstance(entries, list):
            raise self._damaged("'entries' is not a list")
        self._add([self._entry(k, entry) for k, entry in enumerate(entries)])

    def _add(self, entries: list[_Entry]) -> None:
        for key, binary, interface, variant in entries:
            if interface is not None:
                self._interface_files.setdefault(key, interface)
            if variant is None:
                self._by_key.setdefault(key, []).append(binary)
            else:
                self._by_variant.setdefault((key, variant), []).append(binary)
                self._variant_archs.setdefault(key, set()).add(binary.arch)

    def _read(self, key: str) -> None:
        """Read and check the manifest's entries of the bucket ``key`` falls in, once (an indexed manifest)."""
        index = self._index
        if index is None:
            return
        bucket = index.bucket(key)
        if bucket in self._read_buckets:
            return
        with self._lock:
            if self._index is None or bucket in self._read_buckets:
                return
            found = index.entries(bucket)
            try:
                checked = None if found is None else [self._entry(k, entry) for k, entry in enumerate(found)]
            except KspecValueError:
                checked = None
            if checked is None:  # the file is not what its index says: read and check it whole, or say why not
                for table in (self._by_key, self._by_variant, self._variant_archs, self._interface_files):
                    table.clear()
                self._read_buckets.clear()
                self._add_all(None)  # a damaged manifest raises here, and again at the next lookup
                self._index = None
                return
            self._add(checked)
            self._read_buckets.add(bucket)

    def _damaged(self, why: str) -> KspecValueError:
        return KspecValueError(f"binaries: {str(self.directory / MANIFEST_NAME)!r} is damaged: {why}; rebuild it with kspec build")

    def _entry(self, k: int, entry: object) -> _Entry:
        """One manifest entry checked: its key, binary, launch interface file and launch variant."""
        if not isinstance(entry, dict):
            raise self._damaged(f"entry {k} is not a table")
        fields = {"specialization_key": str, "file": str, "format": str, "arch": str, "sha256": str, "lowered_names": dict}
        for name, kind in fields.items():
            if not isinstance(entry.get(name), kind):
                raise self._damaged(f"entry {k} has no {kind.__name__} {name!r}")
        names = entry["lowered_names"]
        if not all(isinstance(a, str) and isinstance(b, str) for a, b in names.items()):
            raise self._damaged(f"entry {k}: 'lowered_names' must map str to str")
        known = entry["format"] in _FORMATS and arch_version(entry["arch"]) is not None
        if not known and (entry["format"], entry["arch"]) not in (_HOST, (FAILURE_FORMAT, _HOST[1])):
            raise self._damaged(f"entry {k}: format {entry['format']!r} / arch {entry['arch']!r} unknown")
        if len(entry["sha256"]) != 64 or entry["sha256"].strip(_HEX):
            raise self._damaged(f"entry {k}: 'sha256' is not a sha256 hex digest")
        path = confined_text(self._directory_text, entry["file"])  # links are checked when it is read (_verify)
        if path is None:
            raise self._damaged(f"entry {k}: file {entry['file']!r} is not a relative path inside the directory")
        interface = None
        if "interface" in entry:
            interface = confined_text(self._directory_text, entry["interface"], (INTERFACE_SUFFIX,))
            if interface is None:
                raise self._damaged(f"entry {k}: interface {entry['interface']!r} is not a relative path to a "
                                    f"*{INTERFACE_SUFFIX} file inside the directory")
        variant = entry.get("variant")
        if variant is not None and not (isinstance(variant, str) and variant):
            raise self._damaged(f"entry {k}: 'variant' is not a launch variant's name")
        binary = StoredBinary(path, entry["format"], entry["arch"], dict(names), entry["sha256"])
        return entry["specialization_key"], binary, interface, variant

    def interface(self, key: str) -> Any:
        """The launch interface (:class:`kspec.render.ModuleInterface`) the build stored for a specialization,
        or None (an older manifest, a missing file, or data this kspec does not read): the caller derives it
        then. A file that is there but does not decode to this specialization's interface warns."""
        if key not in self._interfaces:
            self._read(key)
            self._interfaces[key] = self._read_interface(key)
        return self._interfaces[key]

    def _read_interface(self, key: str) -> Any:
        path = self._interface_files.get(key)
        if path is None:
            return None
        if not resolves_inside(self.directory, path):
            raise self._damaged(f"file {path!r} leads outside the directory (a symbolic link)")
        try:
            text = _read_file(path)
        except OSError:
            return None
        from ...render import interface_from_data

        try:
            found = interface_from_data(json.loads(text))
        except (ValueError, RecursionError):
            found = None
        if found is None or found.key != key:  # damaged, or another build's (filed under another key)
            warnings.warn(
                f"kspec: {path} is not the launch interface of the binaries {self.directory / MANIFEST_NAME} lists "
                "(damaged, or written by a build that did not finish); deriving it instead. Rebuild the "
                "binaries to silence this.",
                BinaryWarning,
                stacklevel=5,
            )
            return None
        return found

    def has(self, key: str) -> bool:
        """Whether the store lists a binary of the specialization ``key`` (for any architecture), whole or of
        some of its launch variants."""
        self._read(key)
        return key in self._by_key or key in self._variant_archs

    def archs(self, key: str) -> list[str]:
        """The architectures the store has for a specialization (for error messages)."""
        self._read(key)
        return sorted({b.arch for b in self._by_key.get(key, [])} | self._variant_archs.get(key, set()))

    def find(self, key: str, device_arch: str) -> StoredBinary | None:
        """The best binary of a specialization's whole module for a device (see the module docstring) whose
        bytes match the manifest, or None."""
        self._read(key)
        return self._best(self._by_key.get(key, []), device_arch)

    def find_variant(self, key: str, variant: str, device_arch: str) -> StoredBinary | None:
        """The best binary of one launch variant (``entry/index/ndim/vec``) of a specialization for a device,
        built alone from a captured specialization's ``variants``, or None."""
        self._read(key)
        return self._best(self._by_variant.get((key, variant), []), device_arch) if self._by_variant else None

    def _best(self, candidates: list[StoredBinary], device_arch: str) -> StoredBinary | None:
        if device_arch == _HOST[1]:  # the CPU device: its host module, if the build made one
            hosts = [b for b in candidates if b.arch == _HOST[1] and b.format in (_HOST[0], FAILURE_FORMAT)]
            return next((v for v in map(self._verify, hosts) if v is not None), None)
        device = arch_version(device_arch)
        if device is None:
            return None
        cubins: list[tuple[int, StoredBinary]] = []
        ptxs: list[tuple[tuple[int, int], StoredBinary]] = []
        for binary in candidates:
            number = arch_version(binary.arch)
            if number is None:  # a host module (checked when the manifest was read)
                continue
            # a failure stands where the arch's CUBIN would, and is as final
            if binary.format in ("cubin", FAILURE_FORMAT) and number[0] == device[0] and number[1] <= device[1]:
                cubins.append((number[1], binary))
            elif binary.format == "ptx" and number <= device:
                ptxs.append((number, binary))
        # best first; a candidate whose file fails its digest gives way to the next one
        ordered = [b for _, b in sorted(cubins, key=lambda t: -t[0])] + [b for _, b in sorted(ptxs, key=lambda t: t[0], reverse=True)]
        for binary in ordered:
            verified = self._verify(binary)
            if verified is not None:
                return verified
        return None

    def _verify(self, binary: StoredBinary) -> StoredBinary | None:
        if binary.path in self._verified:
            return self._verified[binary.path]
        if not resolves_inside(self.directory, binary.path):
            raise self._damaged(f"file {binary.path!r} leads outside the directory (a symbolic link)")
        try:
            data: bytes | None = _read_file(binary.path)
        except OSError as exc:  # a file the manifest names is gone or unreadable: the kernel compiles
            data = None
            why = "is missing" if isinstance(exc, FileNotFoundError) else f"cannot be read ({exc.strerror or exc})"
            self._warn_once(binary, f"{why}, although {self.directory / MANIFEST_NAME} lists it")
        verified = None
        if data is not None and sha256_hex(data) == binary.sha256:
            verified = StoredBinary(binary.path, binary.format, binary.arch, binary.lowered_names, binary.sha256, data)
        elif data is not None:
            self._warn_once(binary, f"does not match the sha256 of {self.directory / MANIFEST_NAME} (truncated, or "
                                    "rewritten by hand or by another tool)")  # fmt: skip
        self._verified[binary.path] = verified
        return verified

    @staticmethod
    def _warn_once(binary: StoredBinary, why: str) -> None:
        """One BinaryWarning per file and expected digest in a process, however many stores or kernels
        look at it (each ``kspec.load`` and generated module opens its own store)."""
        with _warned_lock:
            if (binary.path, binary.sha256) in _warned:
                return
            _warned.add((binary.path, binary.sha256))
        warnings.warn(
            f"kspec: {binary.path} {why}; not using it: the kernel compiles instead. Rebuild the binaries to "
            "silence this.",
            BinaryWarning,
            stacklevel=5,
        )

    def missing(self, what: str, key: str, device_arch: str, cause: Exception) -> LaunchError:
        """The error for a kernel this store has no binary of for the device, when NVRTC is absent too."""
        archs = self.archs(key)
        return LaunchError(
            f"{what}: no precompiled binary for this device ({device_arch}) in {self.directory} (it has: "
            f"{', '.join(archs) or 'none for this kernel'}) and NVRTC is not installed to compile one ({cause}); "
            f"rebuild the binaries with --arch {device_arch} or install kspec[nvrtc]"
        )

    def __repr__(self) -> str:
        count = self._index.count if self._index is not None else len(self._by_key.keys() | self._variant_archs.keys())
        return f"<kspec.BinaryStore {str(self.directory)!r}: {count} specializations>"


def _check_directory(directory: Path) -> None:
    if not directory.exists():
        raise KspecValueError(f"binaries: {str(directory)!r} does not exist (a kspec build -o DIR output directory)")
    if not directory.is_dir():
        raise KspecValueError(f"binaries: {str(directory)!r} is not a directory (give the kspec build -o DIR directory)")


def binary_store(binaries: Any, *, optional: bool = False) -> BinaryStore | None:
    """``binaries=`` as given to a kernel or a library: None, a directory, or a BinaryStore.

    A directory that does not exist, a file, or a directory without a manifest is a ``KspecValueError``:
    the caller asked for binaries. With ``optional`` (generated modules, whose package may ship without
    binaries) a missing directory, or one with no ``manifest.json`` at all, gives None, and a manifest of
    another version a ``BinaryWarning`` and None; a damaged one is still an error.
    """
    if binaries is None or isinstance(binaries, BinaryStore):
        return binaries
    if not isinstance(binaries, (str, os.PathLike)):
        raise KspecTypeError(f"binaries: expected a directory path, got {type(binaries).__name__}")
    other = index = None
    if optional:
        if not (Path(binaries) / MANIFEST_NAME).exists():
            return None
        index = read_index(binaries)  # a manifest kspec wrote says its version at its head: not read whole
        other = {"kspec_manifest": index.version} if index is not None else read_manifest(binaries, any_version=True)
        if other is not None and other.get("kspec_manifest") != MANIFEST_VERSION:
            # a package built by another kspec: its kernels still work, compiled on first call
            warnings.warn(
                f"kspec: {Path(binaries) / MANIFEST_NAME} has manifest version {other.get('kspec_manifest')!r}, this "
                f"kspec reads {MANIFEST_VERSION}; its binaries are not used (kernels compile on first call)",
                BinaryWarning,
                stacklevel=3,
            )
            return None
    return BinaryStore(binaries, manifest=other if index is None else None, index=index)

