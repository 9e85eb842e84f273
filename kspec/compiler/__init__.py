"""NVRTC compilation (or a toolkit's nvcc, ``backend="nvcc"``) and the content-addressed binary cache.

Works with no GPU and no driver (only ``cuda.bindings.nvrtc`` is used, and imported on first compile, so
``import kspec.compiler`` succeeds without NVRTC installed).
"""

from __future__ import annotations

from ._cache import BinaryCache, CacheInfo, ClearReport, default_cache
from ._compile import compile_cached, compile_source
from ._includes import include_dirs
from ._key import TEMPLATE_VERSION, cache_key
from ._nvcc import find_nvcc
from ._nvrtc import default_archs, nvrtc_version, supported_archs
from ._options import DEFAULT_ARCHS, DEFAULT_COMPILE_TIMEOUT_S, CompileOptions, check_arch
from ._program import CompiledProgram

__all__ = [
    "DEFAULT_ARCHS",
    "DEFAULT_COMPILE_TIMEOUT_S",
    "TEMPLATE_VERSION",
    "BinaryCache",
    "CacheInfo",
    "ClearReport",
    "CompileOptions",
    "CompiledProgram",
    "cache_key",
    "check_arch",
    "compile_cached",
    "compile_source",
    "default_archs",
    "default_cache",
    "find_nvcc",
    "include_dirs",
    "nvrtc_version",
    "supported_archs",
]
