"""The content-addressed cache key: everything that can change the bytes NVRTC produces."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache

from .._digest import sha256
from .._errors import KspecTypeError
from .._memo import tree_digest
from .._resources import TEMPLATE_VERSION
from .cache import ENTRY_FORMAT_VERSION
from ._includes import include_dirs, kspec_include_dir
from ._toolchain import toolchain
from ._arch import HOST_ARCH
from ._options import CompileOptions


def check_name_expressions(name_expressions: Sequence[str]) -> tuple[str, ...]:
    if isinstance(name_expressions, str):  # one expression, not a sequence of one-letter ones
        return (name_expressions,)
    result = tuple(name_expressions)
    for expression in result:
        if not isinstance(expression, str) or not expression.strip():
            raise KspecTypeError(f"name_expressions: every item must be a non-empty str, got {expression!r}")
    return result


def nvrtc_version() -> tuple[int, int]:
    """The NVRTC version for keys, from the toolchain memo: a warm-cache lookup never loads NVRTC."""
    return toolchain().nvrtc_version


@lru_cache(maxsize=1)
def kspec_headers_digest() -> str:
    """sha256 over every file under kspec's device-header directory (path and content); once per install
    (memoized on disk under a stamp of the files, kspec/_memo.py), then once per process."""
    return tree_digest(kspec_include_dir())


@lru_cache(maxsize=1)
def toolchain_identity() -> str:
    """Which CUDA headers kernels are compiled against (``find_toolchain_identity``), from the toolchain
    memo (kspec/compiler/_toolchain.py)."""
    return toolchain().identity


def cache_key(
    source: str | None = None,
    *,
    options: CompileOptions = CompileOptions(),
    name_expressions: Sequence[str] = (),
    needs: Iterable[str] = (),
    backend: str = "nvrtc",
    source_key: str | None = None,
) -> str:
    """The sha256 (hex) naming the cache entry of one compile.

    Covers the source, the full NVRTC option list (include directories included), the name expressions in
    order, kspec's device headers, the CUDA header packages, the NVRTC version, the target architecture,
    ``TEMPLATE_VERSION`` and the entry format. ``backend="nvcc"``: nvcc's path and version stand for NVRTC's.
    ``source_key`` instead of ``source``: a string that determines the source (a rendered kernel's
    specialization key and renderer digest), so a cache hit never renders it.
    """
    if (source is None) == (source_key is None):
        raise KspecTypeError("cache_key: give the source or its source_key, not both")
    host = options.effective_arch == HOST_ARCH
    if host:  # the CPU device: the host compiler and CPU stand for NVRTC and the CUDA headers
        from .host import host_key_parts

        parts = host_key_parts(options)
    elif backend == "nvcc":
        from ._nvcc import find_nvcc, nvcc_version

        nvcc = find_nvcc()
        parts = [("backend", f"nvcc {nvcc_version(nvcc)} {nvcc}")]
    else:
        major, minor = nvrtc_version()
        parts = [("nvrtc", f"{major}.{minor}")]
    if not host:
        parts += [("toolchain", toolchain_identity()), ("args", "\0".join(options.to_args(include_dirs(needs))))]
    digest = sha256()

    def part(label: str, value: str) -> None:
        # Length-prefixed, so no two different inputs can concatenate to the same bytes.
        data = value.encode("utf-8", errors="surrogatepass")
        digest.update(label.encode() + b"\0" + len(data).to_bytes(8, "little") + data)

    part("entry-format", str(ENTRY_FORMAT_VERSION))
    part("template-version", str(TEMPLATE_VERSION))
    part(*parts[0])
    part("arch", options.effective_arch)
    part("kspec-headers", kspec_headers_digest())
    for label, value in parts[1:]:
        part(label, value)
    part("names", "\0".join(check_name_expressions(name_expressions)))
    if source_key is not None:
        part("source-key", source_key)
    else:
        part("source", str(source))
    return digest.hexdigest()


@lru_cache(maxsize=8)
def environment_key(arch: str) -> str:
    """One digest of what every cache key for ``arch`` holds besides the program itself (the compiler and
    its version, the CUDA or host headers, kspec's device headers, the template and entry-format versions),
    once per process: a record that names a binary by its cache key is stale when this changes."""
    options = CompileOptions(arch=arch)
    if arch == HOST_ARCH:
        from .host import host_key_parts

        parts = host_key_parts(options)
    else:
        major, minor = nvrtc_version()
        parts = [("nvrtc", f"{major}.{minor}"), ("toolchain", toolchain_identity()),
                 ("args", "\0".join(options.to_args(include_dirs(()))))]  # fmt: skip
    text = "\0".join(f"{label}={value}" for label, value in [
        ("entry-format", str(ENTRY_FORMAT_VERSION)), ("template-version", str(TEMPLATE_VERSION)),
        ("kspec-headers", kspec_headers_digest()), *parts])  # fmt: skip
    return sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()
