"""Include directories for NVRTC, which has no default include path of its own."""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from .._errors import KspecValueError, NvrtcNotFoundError
from .._resources import templates_dir
from ._toolchain import find_header_dir, toolchain

# What a kernel may declare it needs, and which header packages provide it.
_NEEDS: dict[str, tuple[str, ...]] = {
    "fp16": ("cudart",),  # cuda_fp16.h
    "bf16": ("cudart",),  # cuda_bf16.h
    # kspec/complex.cuh needs neither now; cupy/cuda_workaround.h includes <cuda/std/cstdint> (CCCL's four std
    # headers when the code names cuda::std). Raw sources that include cuda/... (CCCL) or cupy/... headers are
    # reported under this need (kspec/render/_analysis.py)
    "complex": ("cccl", "cudart"),
    "cub": ("cccl", "cudart"),
    "void": (),  # cupy/unstructured_void.cuh: kspec's own header, on the include path anyway
}

_PACKAGES = {"cudart": "nvidia-cuda-runtime", "cccl": "nvidia-cuda-cccl"}


@lru_cache(maxsize=1)
def kspec_include_dir() -> str:
    """kspec's own device headers (``templates/include``)."""
    return str(templates_dir() / "include")


def cuda_header_dir(libname: str) -> str | None:
    """The header directory of ``libname`` ("cudart" or "cccl"), or None: from the toolchain memo
    (kspec/compiler/_toolchain.py; no cuda.pathfinder import), found directly when there is no NVRTC."""
    try:
        return toolchain().header_dirs.get(libname)
    except NvrtcNotFoundError:
        return find_header_dir(libname)


def check_needs(needs: Iterable[str]) -> tuple[str, ...]:
    """Validate ``needs`` and return it as a sorted tuple."""
    if isinstance(needs, str):
        needs = (needs,)
    result = tuple(sorted(set(needs)))
    unknown = [n for n in result if n not in _NEEDS]
    if unknown:
        raise KspecValueError(f"needs: unknown {unknown}; expected a subset of {sorted(_NEEDS)}")
    return result


def include_dirs(needs: Iterable[str] = ()) -> list[str]:
    """The ``-I`` directories for a compile: kspec's own headers, then CCCL, then the CUDA runtime headers.

    The CUDA header directories are added whenever cuda.pathfinder finds them, needed or not: measured with
    NVRTC 13.5 on sm_90, a plain kernel compiles in 25.8 ms (median of 5) with and without the two ``-I``
    flags -- the cost is in what a kernel ``#include``s, not in the search path -- and raw user sources that
    ``#include <cuda_fp16.h>`` then just work. ``needs`` ("fp16", "bf16", "complex", "cub") only turns a
    missing directory into a clear error up front. CCCL comes before the runtime headers so that the CCCL
    that pathfinder found wins over an older copy inside a CUDA toolkit's include directory.
    """
    needs = check_needs(needs)
    required = {lib for need in needs for lib in _NEEDS[need]}
    dirs = [kspec_include_dir()]
    for lib in ("cccl", "cudart"):
        found = cuda_header_dir(lib)
        if found is not None:
            dirs.append(found)
        elif lib in required:
            raise NvrtcNotFoundError(
                f"the {lib} headers are needed (needs={list(needs)}) but cuda.pathfinder did not find "
                f"them; install them with `pip install kspec[nvrtc]` (the {_PACKAGES[lib]} wheel) or set "
                "CUDA_PATH to a CUDA toolkit"
            )
    return dirs
