"""The user-facing kernel callables: elementwise, reduction and raw kernels, and ``load`` for spec files."""

from __future__ import annotations

from .._lazy import lazy_getattr


# Lazy exports: a generated module imports ``load_specs`` only; each name loads its module on first access.
_LAZY = {
    "BinaryStore": "_binaries", "ElementwiseKernel": "_elementwise", "KernelLibrary": "_library", "load": "_library",
    "load_specs": "_library", "DeviceGlobal": "_raw", "RawKernel": "_raw", "RawModule": "_raw",
    "ReductionKernel": "_reduction", "register_binaries": "_stores", "registered_binaries": "_stores",
    "observe_builds": "_observe", "BuildObserver": "_observe", "ArraySpec": "_array_spec", "LaunchPlan": "_array_spec",
    "LaunchStep": "_array_spec", "TunedKernel": "_tuned",
    # not in __all__: the hand-off to framework adapters for fuse and jit (kspec/kernels/_frameworks.py)
    "refuse_traced": "_frameworks", "traced_by": "_frameworks", "recorded_by": "_frameworks",
    # not in __all__: kspec.torch gives RawKernel's launch-state classes to Dynamo (kspec/torch/_compile.py)
    "watch_raw_kernel_classes": "_raw",
    # not in __all__: kspec.cupy keeps raw modules in CuPy's kernel cache too, follows its memo clearing and makes
    # failed compiles CuPy's CompileException too
    "ModuleCache": "_module_cache", "set_module_cache": "_module_cache", "module_cache": "_module_cache", "clear_constructor_memos": "_ctor_memo",
    "set_compile_error_type": "_compile_errors",
    # not in __all__: kspec.cupy's enable() loads what the first kernel call would
    "preload_call_path": "_preload",
}


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


__all__ = ["ArraySpec", "LaunchPlan", "LaunchStep", "BinaryStore", "load_specs", "DeviceGlobal", "ElementwiseKernel", "KernelLibrary", "RawKernel", "RawModule", "ReductionKernel", "TunedKernel", "load", "register_binaries", "registered_binaries", "observe_builds", "BuildObserver"]
