"""What the cache key needs to know about the toolchain, without loading it in every process.

A warm-cache lookup needs the NVRTC version, the CUDA header directories and the header packages'
identity. Finding them loads NVRTC (~45 ms: the binding's import plus ``nvrtcVersion``), imports
cuda.pathfinder (~25 ms) and reads package metadata (~10 ms), which is most of what a process that only
launches cached kernels would spend. So they are found once and memoized on disk (kspec/_memo.py).

When is reusing the memo safe? It is keyed by a stamp of what decides which toolchain is found: the
interpreter, ``sys.path`` with each entry's mtime (installing, upgrading or removing a wheel adds or
removes entries there), the environment variables cuda.pathfinder and the dynamic loader read, and
kspec's version; and it is reused only while the files it found (the NVRTC library that was loaded, the
headers the identity covers) keep their size and mtime. A CUDA toolkit replaced in place changes those
files; a new toolkit that would win over the old one comes with a changed environment or ``sys.path``.
A process with no NVRTC never memoizes: it raises as before.

Finding them for real (:func:`find_header_dir`, :func:`find_toolchain_identity`) lives here too, so the
include directories (kspec/compiler/_includes.py) and the key (kspec/compiler/_key.py) read the memo
without being imported back by it.
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache
from pathlib import Path

from .._named_tuple import NamedTuple
from .._digest import sha256
from .._version import __version__
from .._memo import memoized, path_stamp, store

_ENV = ("CUDA_PATH", "CUDA_HOME", "LD_LIBRARY_PATH", "CONDA_PREFIX", "PATH")


class Toolchain(NamedTuple):
    nvrtc_version: tuple[int, int]
    header_dirs: dict[str, str | None]  # "cccl" / "cudart" -> directory (None: not found)
    identity: str  # find_toolchain_identity's text


def _stamp() -> str:
    # Only the package directories of sys.path: a wheel is installed there (an editable install through a
    # .pth file there too). The script's own directory, first on sys.path, would make every program its
    # own stamp and changes with any file written beside the script.
    parts = [sys.executable, sys.prefix, __version__]
    parts += [f"{p}={path_stamp(p)}" for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")]
    parts += [f"{name}={os.environ.get(name, '')}" for name in _ENV]
    return "\0".join(parts)


def _find() -> dict[str, object]:
    """Find everything for real (loads NVRTC; raises NvrtcNotFoundError when it is missing)."""
    from . import _nvrtc  # here, not at import: a warm-cache lookup never imports the NVRTC module

    version = _nvrtc.nvrtc_version()
    dirs = {lib: find_header_dir(lib) for lib in ("cccl", "cudart")}
    files = [_nvrtc.library_path()]
    if dirs["cccl"]:
        files.append(os.path.join(dirs["cccl"], "cuda", "std", "__cccl", "version.h"))
    if dirs["cudart"]:
        files += [os.path.join(dirs["cudart"], h) for h in ("cuda_runtime_api.h", "cuda_fp16.hpp", "cuda_bf16.hpp")]
    files = [f for f in files if f]
    return {
        "nvrtc_version": list(version),
        "header_dirs": dirs,
        "identity": find_toolchain_identity(dirs),
        "files": {f: path_stamp(f) for f in files},
    }


@lru_cache(maxsize=None)
def find_header_dir(libname: str) -> str | None:
    """The header directory of ``libname`` ("cudart" or "cccl") found by cuda.pathfinder, or None."""
    try:
        from cuda.pathfinder import find_nvidia_header_directory
    except ImportError:
        return None
    try:
        found: str | None = find_nvidia_header_directory(libname)
    except RuntimeError:  # an old pathfinder that does not know this library
        return None
    return found


def find_toolchain_identity(dirs: dict[str, str | None]) -> str:
    """Which CUDA headers kernels are compiled against, given the header directories found.

    Hashing the CCCL tree (thousands of files) per call would cost more than many compiles. Instead: the
    header packages' versions when they are pip wheels, CCCL's small version header when found (covers a
    CUDA toolkit), and size + mtime of the runtime's fp16/bf16/API headers (catches a reinstall). The
    directories themselves are in the option list, which is hashed too.
    """
    from importlib import metadata  # here, not at import: ~10 ms, and the toolchain memo usually answers

    parts = []
    for dist in ("nvidia-cuda-cccl", "nvidia-cuda-runtime"):
        try:
            parts.append(f"{dist}={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{dist}=-")
    cccl = dirs.get("cccl")
    if cccl is not None:
        version_h = os.path.join(cccl, "cuda", "std", "__cccl", "version.h")
        try:
            parts.append(sha256(Path(version_h).read_bytes()).hexdigest())
        except OSError:
            parts.append("no-cccl-version.h")
    cudart = dirs.get("cudart")
    if cudart is not None:
        for header in ("cuda_runtime_api.h", "cuda_fp16.hpp", "cuda_bf16.hpp"):
            parts.append(f"{header}={_file_stamp(os.path.join(cudart, header))}")
    return ";".join(parts)


def _file_stamp(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return "-"
    return f"{st.st_size}:{st.st_mtime_ns}"


def _memo_name() -> str:
    """One memo per interpreter and environment, so two virtual environments do not overwrite each other's."""
    return "toolchain-" + sha256(f"{sys.executable}\0{sys.prefix}".encode()).hexdigest()[:16]


@lru_cache(maxsize=1)
def toolchain() -> Toolchain:
    """The toolchain facts, from the on-disk memo when it is still valid, else found (and memoized)."""
    stamp = _stamp()
    name = _memo_name()
    value = memoized(name, stamp, _find)
    try:
        files = value["files"]
        if any(path_stamp(f) != s for f, s in files.items()):  # a library or header changed in place
            value = _find()
            store(name, stamp, value)
        major, minor = value["nvrtc_version"]
        return Toolchain((int(major), int(minor)), dict(value["header_dirs"]), str(value["identity"]))
    except (KeyError, TypeError, ValueError, AttributeError):
        value = _find()
        major, minor = value["nvrtc_version"]  # type: ignore[misc]
        return Toolchain((int(major), int(minor)), dict(value["header_dirs"]), str(value["identity"]))  # type: ignore[call-overload]
