"""A CPython extension module built by the host compiler and kept in the binary cache.

kspec's compiled call path (kspec/runtime/_fastcall.cc) is loaded by every process that launches a spec
kernel, so a warm process must find it cheaply: its key is the source and the interpreter it is built for
(version, ABI, platform), not the compiler or the Python headers, and a hit reads one cache entry without
importing the host compiler's machinery (which a process serving precompiled kernels never loads). Any
compiler's build of the source serves the same interpreter; the build itself is
:func:`kspec.compiler.compile_host_library`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._digest import sha256
from ._program import CompiledProgram

HOST_EXTENSION_FORMAT = 1  # bump when what an extension entry holds changes meaning


def host_extension_key(source: str, interpreter: str) -> str:
    """The cache key of an extension: its source and the interpreter's identity."""
    digest = sha256()
    for label, value in (("host-extension-format", str(HOST_EXTENSION_FORMAT)), ("interpreter", interpreter),
                         ("source", source)):  # fmt: skip
        data = value.encode("utf-8", errors="surrogatepass")
        digest.update(label.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return digest.hexdigest()


def cached_host_extension(source: str, interpreter: str) -> CompiledProgram | None:
    """The cache's build of ``source`` for the interpreter ``interpreter`` names, or None."""
    from ._cache import default_cache

    return default_cache().get(host_extension_key(source, interpreter))


def compile_host_extension(source: str, name: str, include_dirs: Sequence[str], interpreter: str) -> CompiledProgram:
    """``source`` built into an extension module for the interpreter ``interpreter`` names (its headers in
    ``include_dirs``), from the binary cache when it holds it. Errors as :func:`compile_host_library`'s."""
    found = cached_host_extension(source, interpreter)
    if found is not None:
        return found
    from ._cache import default_cache
    from ._host_library import build_host_library

    program = build_host_library(source, name, list(include_dirs))
    default_cache().put(host_extension_key(source, interpreter), program, kernel=name)
    return program
