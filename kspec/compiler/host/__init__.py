"""The CPU device's compiler: CUDA C++ -> a host shared object, and what else kspec builds with a host C++ compiler.

``_compiler`` finds the host C++ compiler and builds a module's kernels (arch ``host``: the same source NVRTC
would compile, against kspec's host headers), after ``_scan`` has read the source for what the host needs to
know (its plain kernels, whether they synchronise, what the host cannot emulate). ``_library`` builds a C++
support library (kspec.jax's FFI handler, the CPU device's fault guard), ``_extension`` kspec's compiled call
path (a CPython extension). All of them are kept in the binary cache (kspec/compiler/cache).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_getattr

if TYPE_CHECKING:  # the same names, typed for mypy (a module __getattr__ is Any to it); never run
    from ._compiler import HOST_MARCH_ENV as HOST_MARCH_ENV, HostCompiler as HostCompiler
    from ._compiler import compile_host as compile_host, host_compiler as host_compiler
    from ._compiler import host_key_parts as host_key_parts, portable_host_march as portable_host_march
    from ..._fastcall_source import call_path_source as call_path_source  # _extension's, from the shared leaf
    from ._extension import build_call_path as build_call_path, cached_call_path as cached_call_path
    from ._extension import cached_call_path_image as cached_call_path_image
    from ._extension import host_extension_key as host_extension_key
    from ._library import compile_host_library as compile_host_library, host_library_key as host_library_key
    from ._scan import scan_host_source as scan_host_source


# Lazy exports, as kspec.compiler's: a warm process looks the compiled call path up (``cached_call_path``)
# without loading the host compiler's machinery.
_LAZY = {
    "HostCompiler": "_compiler", "host_compiler": "_compiler", "HOST_MARCH_ENV": "_compiler",
    "portable_host_march": "_compiler", "compile_host": "_compiler", "host_key_parts": "_compiler",
    "scan_host_source": "_scan",
    "compile_host_library": "_library", "host_library_key": "_library",
    "build_call_path": "_extension", "cached_call_path": "_extension", "call_path_source": "_extension",
    "host_extension_key": "_extension", "cached_call_path_image": "_extension",
}


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


__all__ = [
    "HOST_MARCH_ENV",
    "HostCompiler",
    "build_call_path",
    "cached_call_path",
    "cached_call_path_image",
    "call_path_source",
    "compile_host",
    "compile_host_library",
    "host_compiler",
    "host_extension_key",
    "host_key_parts",
    "host_library_key",
    "portable_host_march",
    "scan_host_source",
]
