"""A CPython extension module built by the host compiler and kept in the binary cache: kspec's compiled call
path (its source kspec/_fastcall_c/, read by the leaf kspec/_fastcall_source.py; loaded by
kspec/runtime/_fastcall.py).

Every process that launches a spec kernel looks it up, so a warm process must find it cheaply: its key is the
source and the interpreter it is built for (version, ABI, platform), not the compiler or the Python headers,
and a hit reads one cache entry without importing the host compiler's machinery (which a process serving
precompiled kernels never loads). Any compiler's build of the source serves the same interpreter; the build
itself is :func:`kspec.compiler.compile_host_library`'s. ``kspec warm`` builds it (a deploy that warms its
cache gets it); otherwise the first process that needs it has it built in a child process.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from ..._digest import sha256
from ..._fastcall_source import call_path_source  # the source is a shared leaf's: runtime loads what this builds

if TYPE_CHECKING:  # a served process reads the image alone (cached_call_path_image): no program, no dataclasses
    from .._program import CompiledProgram

_Found = TypeVar("_Found")

HOST_EXTENSION_FORMAT = 1  # bump when what an extension entry holds changes meaning
CALL_PATH_NAME = "kspec_fastcall"


def interpreter_identity() -> str:
    """What an extension's binary depends on besides its source: this interpreter's version, ABI and platform."""
    return "\0".join((sys.version, sys.implementation.cache_tag or "", sys.abiflags, sys.platform, sys.base_prefix))


def interpreter_include() -> str:
    """The interpreter's header directory: where a posix install puts it (no sysconfig data to load), else what
    sysconfig says."""
    major, minor = sys.version_info[:2]
    guess = os.path.join(sys.base_prefix, "include", f"python{major}.{minor}{sys.abiflags}")
    if os.path.isfile(os.path.join(guess, "Python.h")):
        return guess
    import sysconfig

    return sysconfig.get_paths()["include"]


def host_extension_key(source: str, interpreter: str) -> str:
    """The cache key of an extension: its source and the interpreter's identity."""
    digest = sha256()
    for label, value in (("host-extension-format", str(HOST_EXTENSION_FORMAT)), ("interpreter", interpreter),
                         ("source", source)):  # fmt: skip
        data = value.encode("utf-8", errors="surrogatepass")
        digest.update(label.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return digest.hexdigest()


def cached_call_path(source: str) -> CompiledProgram | None:
    """The cache's build of the call path's ``source`` for this interpreter, or None: the entry file read
    directly from the cache directories in order (the cache's own reader, without its statistics and trimming
    machinery, which a process serving precompiled kernels never imports); a hit refreshes the entry's mtime,
    the LRU clock, so a cap trims it last."""
    from ..cache import decode_entry

    return _cached(source, decode_entry)


def cached_call_path_image(source: str) -> bytes | None:
    """The shared library of :func:`cached_call_path`'s build, or None: what the runtime loads, read without
    making a :class:`kspec.compiler.CompiledProgram` (a served first call then loads neither that module nor
    ``dataclasses``: ~3 ms on an H200 host)."""
    from ..cache import entry_parts

    def image(data: bytes, key: str) -> bytes | None:
        parts = entry_parts(data, key)
        return None if parts is None else parts[1]

    return _cached(source, image)


def _cached(source: str, decode: Callable[[bytes, str], _Found | None]) -> _Found | None:
    """``decode(entry bytes, key)`` of the first valid entry of ``source``'s build in the cache directories."""
    from ..._memo import user_cache_dirs
    from ..cache import ENTRY_SUFFIX, read_regular

    key = host_extension_key(source, interpreter_identity())
    for directory in user_cache_dirs():
        path = directory / (key + ENTRY_SUFFIX)
        try:
            found = decode(read_regular(path), key)
        except OSError:  # absent or unreadable: the next directory
            continue
        if found is not None:
            try:
                os.utime(path)
            except OSError:  # a read-only directory
                pass
            return found
    return None


def build_call_path(source: str | None = None) -> CompiledProgram:
    """The call path built for this interpreter and put in the binary cache (a hit returns the cached build).
    :class:`kspec.HostCompilerNotFoundError` without a host compiler; a ``FileNotFoundError`` without the
    interpreter's headers; a :class:`kspec.CompileError` when the build fails."""
    source = call_path_source() if source is None else source
    found = cached_call_path(source)
    if found is not None:
        return found
    from ..cache import default_cache
    from ._library import build_host_library

    include = interpreter_include()
    if not os.path.isfile(os.path.join(include, "Python.h")):
        raise FileNotFoundError(f"no Python.h in {include}: the interpreter's development headers are not installed")
    program = build_host_library(source, CALL_PATH_NAME, [include])
    default_cache().put(host_extension_key(source, interpreter_identity()), program, kernel=CALL_PATH_NAME)
    return program
