"""The binary stores a kernel finds its binary in by content, when it has no store of its own.

A CuPy-style constructor call (``ElementwiseKernel(...)``, ``RawModule(code=...)``), a ``kspec.load`` of spec
files without ``binaries=``, anything the ``kspec.cupy`` switch builds: each specialization has a content key
(kspec/render/_content.py) that a ``kspec build`` of a spec of the same code files its binary under. Before the
binary cache (and NVRTC), such a kernel looks the key up in these stores, in this order:

1. directories given to :func:`register_binaries` in this process, most recent first;
2. ``KSPEC_BINARIES``: ``kspec build`` output directories, separated by ``os.pathsep``;
3. installed packages: a wheel built by kspec's hatch hook installs ``<prefix>/share/kspec/binaries/<name>.json``
   naming its ``_binaries`` directory (found on ``sys.path``), for ``sys.prefix`` and the user base.

Discovery runs once per process, on the first lookup (or at ``kspec.cupy.enable()``, which loads ahead): an
environment read and a directory check per prefix, no ``importlib.metadata`` (34 ms to import) and no package
import. A damaged registration or store warns (:class:`kspec.BinaryWarning`) and is skipped: a kernel then
compiles as it would without it.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import warnings
from pathlib import Path

from ..._errors import BinaryWarning, KspecError
from ..._generated_code import CODE_DIR
from ..._manifest import MANIFEST_NAME, REGISTRATION_DIR, REGISTRATION_VERSION
from ._precompiled import BinaryStore, binary_store

BINARIES_ENV = "KSPEC_BINARIES"

_lock = threading.Lock()
_registered: list[BinaryStore] = []  # register_binaries(), most recent first
_discovered: list[BinaryStore] | None = None  # KSPEC_BINARIES, then installed packages; once per process


def register_binaries(directory: str | os.PathLike[str] | BinaryStore) -> BinaryStore:
    """Serve the binaries of a ``kspec build`` output directory (or a :class:`BinaryStore`) to every kernel of
    this process that has no store of its own, by content: a constructor call of the same code finds them.
    Returns the store; a directory without a manifest is a ``KspecValueError``."""
    store = binary_store(directory)
    assert store is not None
    with _lock:
        _registered[:] = [store, *(s for s in _registered if s.directory != store.directory)]
    return store


def registered_binaries() -> tuple[BinaryStore, ...]:
    """The stores content lookups read, in order (see the module docstring)."""
    return (*_registered, *_discovered_stores())


def code_directories() -> list[Path]:
    """The stores' compiled call-path code, in lookup order: a build of captured specs ships it (``callpath/``,
    kspec/_generated_code.py), so that a kernel served by it compiles no dispatcher, launch or packer."""
    found: list[Path] = []
    for store in registered_binaries():
        if store.directory not in _code_directories:
            candidate = store.directory / CODE_DIR
            _code_directories[store.directory] = candidate if candidate.is_dir() else None
        directory = _code_directories[store.directory]
        if directory is not None:
            found.append(directory)
    return found


_code_directories: dict[Path, Path | None] = {}  # a store's directory -> its code directory, or None: none


def content_store(key: str) -> BinaryStore | None:
    """The first store that has a binary filed under ``key`` (for any architecture), or None. A store whose
    manifest turns out damaged where this key is filed (a large build's is checked a part at a time) warns and
    is no longer read."""
    for stores in (_registered, _discovered_stores()):
        for store in tuple(stores):  # a copy: a damaged store is dropped from the list
            try:
                if store.has(key):
                    return store
            except KspecError as exc:
                _warn(f"{exc}; not serving binaries from it")
                with _lock:
                    if store in stores:
                        stores.remove(store)
    return None


def _discovered_stores() -> list[BinaryStore]:
    global _discovered
    found = _discovered
    if found is None:
        with _lock:
            found = _discovered
            if found is None:
                found = _discovered = _discover()
    return found


def _discover() -> list[BinaryStore]:
    stores: list[BinaryStore] = []
    seen: set[Path] = set()

    def add(directory: Path, why: str) -> None:
        resolved = directory.resolve()
        if resolved in seen:
            return
        seen.add(resolved)
        try:
            store = binary_store(directory)
        except KspecError as exc:
            _warn(f"{why}: {exc}; not serving binaries from it")
            return
        assert store is not None
        stores.append(store)

    for part in os.environ.get(BINARIES_ENV, "").split(os.pathsep):
        if part.strip():
            add(Path(part.strip()).expanduser(), f"{BINARIES_ENV} names {part.strip()!r}")
    for registration in _registrations():
        directory = _registered_directory(registration)
        if directory is not None:
            add(directory, f"{registration}")
    return stores


def _prefixes() -> list[Path]:
    prefixes = [sys.prefix]
    site = sys.modules.get("site")  # imported at start-up unless python -S; its user base, never computed here
    user_base = getattr(site, "USER_BASE", None) if site is not None else None
    if isinstance(user_base, str):
        prefixes.append(user_base)
    return [Path(p) for p in dict.fromkeys(prefixes)]


def _registrations() -> list[Path]:
    found: list[Path] = []
    for prefix in _prefixes():
        directory = prefix.joinpath(*REGISTRATION_DIR)
        try:
            found += sorted(p for p in directory.iterdir() if p.suffix == ".json")
        except OSError:  # none installed under this prefix
            continue
    return found


def _registered_directory(registration: Path) -> Path | None:
    """The ``_binaries`` directory a package's registration names, found on ``sys.path``; None (warned) when the
    registration is damaged or names nothing installed."""
    try:
        data = json.loads(registration.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        _warn(f"{registration} cannot be read ({exc}); not serving its package's binaries")
        return None
    rel = data.get("binaries") if isinstance(data, dict) and data.get("kspec_binaries") == REGISTRATION_VERSION else None
    parts = rel.split("/") if isinstance(rel, str) else []
    if not parts or any(p in ("", ".", "..") for p in parts):
        _warn(f"{registration} is not a kspec binaries registration of version {REGISTRATION_VERSION}; skipped")
        return None
    for entry in sys.path:
        candidate = Path(entry or ".").joinpath(*parts)
        if (candidate / MANIFEST_NAME).is_file():
            return candidate
    _warn(f"{registration} names {rel!r}, which no sys.path entry holds (the package was removed?); skipped")
    return None


def _warn(message: str) -> None:
    warnings.warn(f"kspec: {message}", BinaryWarning, stacklevel=4)
