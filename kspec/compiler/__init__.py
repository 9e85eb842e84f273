"""NVRTC compilation (or a toolkit's nvcc, ``backend="nvcc"``) and the content-addressed binary cache.

Works with no GPU and no driver (only ``cuda.bindings.nvrtc`` is used, and imported on first compile, so
``import kspec.compiler`` succeeds without NVRTC installed).

The binary cache is the subpackage ``kspec.compiler.cache``, the CPU device's host C++ compiler
``kspec.compiler.host``; their public names are importable from here, as the others are.
"""

from __future__ import annotations

from .._lazy import lazy_getattr


# Lazy exports: a process serving cached kernels needs the key and the cache, never the NVRTC binding;
# each name loads its module on first access.
_LAZY = {
    "BinaryCache": "cache", "CacheInfo": "cache", "ClearReport": "cache", "default_cache": "cache",
    "NOT_AN_ENTRY": "cache",
    "compile_cached": "_compile", "compile_source": "_compile",
    "include_dirs": "_includes",
    "TEMPLATE_VERSION": "_key", "cache_key": "_key", "environment_key": "_key",
    "find_nvcc": "_nvcc",
    "default_archs": "_nvrtc", "nvrtc_version": "_nvrtc", "supported_archs": "_nvrtc",
    "DEFAULT_ARCHS": "_options", "DEFAULT_COMPILE_TIMEOUT_S": "_options",
    "COMPILE_TIMEOUT_ENV": "_options", "compile_timeout": "_options", "CompileOptions": "_options",
    "arch_number": "_arch", "arch_version": "_arch", "check_arch": "_arch",
    "register_counts": "_cubin",
    "link_available": "_link", "link_ptx": "_link", "one_front_end": "_link",
    "CompiledProgram": "_program",
    "HOST_ARCH": "_arch", "HostCompiler": "host", "host_compiler": "host", "HOST_MARCH_ENV": "host",
    "portable_host_march": "host",
    "compile_host_library": "host", "host_library_key": "host",
    "build_call_path": "host", "cached_call_path": "host", "call_path_source": "host",
    "host_extension_key": "host", "cached_call_path_image": "host",
    "CompileRequest": "_policy", "compile_policy": "_policy", "current_policy": "_policy",
    "explicit_compiles": "_policy", "POLICY_ENV": "_policy",
    "compile_log": "_log", "clear_compile_log": "_log", "record_load": "_log", "LOG_ENV": "_log",
    "CompileEvent": "_log_entry",
    "VariantProgram": "_specialization", "build_advice": "_specialization", "compile_program": "_specialization",
    "ProgramImage": "_specialization", "cached_binary": "_specialization",
    "rendered_module": "_specialization", "specialization_label": "_specialization",
    "variant_program": "_specialization",
    "RawProgram": "_raw_program", "kernel_expressions": "_raw_program", "raw_program": "_raw_program",
    "raw_source_key": "_raw_program",
    "raw_spec_expressions": "_raw_program", "single_kernel": "_raw_program",
    # not in __all__: kspec.cupy makes failed compiles catchable as CuPy's CompileException
    "set_compile_error_type": "_failure",
    "failed_program": "_failure", "recorded_failure": "_failure",
}


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


__all__ = [
    "failed_program",
    "recorded_failure",
    "CompileEvent",
    "CompileRequest",
    "LOG_ENV",
    "POLICY_ENV",
    "clear_compile_log",
    "compile_log",
    "compile_policy",
    "current_policy",
    "explicit_compiles",
    "record_load",
    "DEFAULT_ARCHS",
    "DEFAULT_COMPILE_TIMEOUT_S",
    "COMPILE_TIMEOUT_ENV",
    "compile_timeout",
    "TEMPLATE_VERSION",
    "BinaryCache",
    "CacheInfo",
    "ClearReport",
    "NOT_AN_ENTRY",
    "CompileOptions",
    "CompiledProgram",
    "cache_key",
    "check_arch",
    "compile_cached",
    "compile_source",
    "link_available",
    "link_ptx",
    "one_front_end",
    "default_archs",
    "default_cache",
    "find_nvcc",
    "HOST_ARCH",
    "HostCompiler",
    "host_compiler",
    "HOST_MARCH_ENV",
    "portable_host_march",
    "include_dirs",
    "nvrtc_version",
    "supported_archs",
]
