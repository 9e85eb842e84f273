"""A small C++ support library for the host, built once by the host compiler and kept in the binary cache.

Front ends that hand kspec's launches to another runtime (kspec/jax: an XLA FFI handler) ship a C++ source file
and need it as a shared object at run time. It is built by the same host compiler as the CPU device's kernels
(kspec/compiler/host/_compiler.py) and stored in the same content-addressed cache, under a key of its own: the source,
the compiler, its arguments and the content of every include directory.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..._digest import sha256
from ..._errors import KspecTypeError
from ..._memo import tree_digest
from .._arch import HOST_ARCH
from ._compiler import host_compiler, run_host_compiler
from .._program import CompiledProgram

HOST_LIBRARY_FORMAT = 1  # bump when what a library entry holds changes meaning
# No -march: a support library runs on whatever machine loads the cache entry's CPU family; nothing in it is hot
# enough to vectorise. Exceptions stay on (kspec's host headers use them).
_FLAGS = ("-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-w")


def host_library_args(include_dirs: Sequence[str]) -> list[str]:
    """The host compiler's arguments for a support library, without input and output."""
    return [*_FLAGS, *(f"-I{d}" for d in include_dirs)]


def host_library_key(source: str, include_dirs: Sequence[str]) -> str:
    """The cache key of a support library: source, compiler, arguments and every include directory's files."""
    digest = sha256()

    def part(label: str, value: str) -> None:
        data = value.encode("utf-8", errors="surrogatepass")
        digest.update(label.encode() + b"\0" + len(data).to_bytes(8, "little") + data)

    part("host-library-format", str(HOST_LIBRARY_FORMAT))
    part("host-compiler", host_compiler().identity)
    part("args", "\0".join(host_library_args(include_dirs)))
    for directory in include_dirs:
        part("include", tree_digest(directory))
    part("source", source)
    return digest.hexdigest()


def compile_host_library(source: str, name: str, include_dirs: Sequence[str] = ()) -> CompiledProgram:
    """``source`` (C++) built into a shared object by the host compiler, from the binary cache when it holds it.

    ``name`` labels the library in errors and in the cache's listing. :class:`kspec.HostCompilerNotFoundError`
    when there is no host compiler; a :class:`kspec.CompileError` with the log and the numbered source when
    the build fails.
    """
    if not isinstance(source, str):
        raise KspecTypeError(f"source: expected a str, got {type(source).__name__}")
    from ..cache import default_cache

    key = host_library_key(source, include_dirs)
    cache = default_cache()
    found = cache.get(key)
    if found is not None:
        return found
    program = build_host_library(source, name, list(include_dirs))
    cache.put(key, program, kernel=name)
    return program


def build_host_library(source: str, name: str, include_dirs: list[str]) -> CompiledProgram:
    """``source`` built by the host compiler now (no cache)."""
    start = time.perf_counter()
    binary, log = run_host_compiler(host_compiler(), host_library_args(include_dirs), source, "library.cc", name)
    return CompiledProgram(binary=binary, format="so", arch=HOST_ARCH, lowered_names={}, log=log,
                           nvrtc_version=(0, 0), compile_ms=(time.perf_counter() - start) * 1e3)  # fmt: skip
