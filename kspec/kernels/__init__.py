"""The user-facing kernel callables: elementwise, reduction and raw kernels, and ``load`` for spec files."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from .._generated_code import set_code_directories
from .._lazy import lazy_getattr


def _built_code() -> Iterable[Path]:
    """Where the call path's generated code is found besides the memo: the binary stores' (a build of captured
    specs ships it); asked on each source's first load in a process, before the memo."""
    from .binaries import code_directories

    return code_directories()


set_code_directories(_built_code)

# Lazy exports: a generated module imports ``load_specs`` only; each name loads its module on first access.
_LAZY = {
    "BinaryStore": "binaries", "ElementwiseKernel": "_elementwise", "KernelLibrary": "_library", "load": "_library",
    "load_specs": "_library", "DeviceGlobal": "raw", "RawKernel": "raw", "RawModule": "raw",
    "ReductionKernel": "_reduction", "register_binaries": "binaries", "registered_binaries": "binaries",
    "observe_builds": "records", "BuildObserver": "records", "ArraySpec": "planning", "LaunchPlan": "planning",
    "LaunchStep": "planning", "TunedKernel": "raw",
    # not in __all__: the hand-off to framework adapters for fuse and jit (kspec/kernels/callpath/_frameworks.py)
    "refuse_traced": "callpath", "traced_by": "callpath", "run_by_torch": "callpath",
    # not in __all__: kspec.torch gives RawKernel's launch-state classes to Dynamo (kspec/torch/_compile.py)
    "watch_raw_kernel_classes": "raw",
    # not in __all__: kspec.cupy keeps raw modules in CuPy's kernel cache too, follows its memo clearing and makes
    # failed compiles CuPy's CompileException too
    "ModuleCache": "raw", "set_module_cache": "raw", "module_cache": "raw", "clear_constructor_memos": "records",
    "set_compile_error_type": "_compile_errors",
    # what the first kernel call would load, loaded ahead (kspec.cupy's enable() calls it)
    "preload_call_path": "_preload",
}


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


__all__ = ["ArraySpec", "LaunchPlan", "LaunchStep", "BinaryStore", "load_specs", "DeviceGlobal", "ElementwiseKernel", "KernelLibrary", "RawKernel", "RawModule", "ReductionKernel", "TunedKernel", "load", "register_binaries", "registered_binaries", "observe_builds", "BuildObserver", "preload_call_path"]
