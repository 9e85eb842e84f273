"""kspec: CUDA kernels declared as data.

Importing kspec touches no CUDA driver and needs no GPU; the runtime initialises on the first launch.
"""

from __future__ import annotations

from ._errors import (
    AxisError,
    BinaryWarning,
    BuildOutputError,
    CacheWarning,
    CaptureError,
    CompileError,
    CompileForbiddenError,
    CompileTimeoutError,
    CompileWarning,
    DuplicateNameError,
    FuseError,
    FuseIndexError,
    FuseValueError,
    HostCompilerNotFoundError,
    HostUnsupportedError,
    InstantiationError,
    InvalidNameError,
    KernelFaultError,
    KernelIndexError,
    KspecError,
    KspecFileNotFoundError,
    KspecNotImplementedError,
    KspecOverflowError,
    KspecTypeError,
    KspecValueError,
    LaunchError,
    NoDeviceError,
    NvccNotFoundError,
    NvrtcNotFoundError,
    PerformanceWarning,
    UninitializedOutputWarning,
    ReservedNameError,
    SpecError,
    SpecErrorGroup,
    SpecFileError,
    UnknownDtypeError,
)

from ._version import __version__

__all__ = [
    "AxisError",
    "BinaryWarning",
    "BuildOutputError",
    "CacheWarning",
    "CaptureError",
    "CompileError",
    "CompileForbiddenError",
    "CompileTimeoutError",
    "CompileWarning",
    "DuplicateNameError",
    "FuseError",
    "FuseIndexError",
    "FuseValueError",
    "HostCompilerNotFoundError",
    "HostUnsupportedError",
    "InstantiationError",
    "InvalidNameError",
    "KernelFaultError",
    "KernelIndexError",
    "KspecError",
    "KspecFileNotFoundError",
    "KspecNotImplementedError",
    "KspecOverflowError",
    "KspecTypeError",
    "KspecValueError",
    "LaunchError",
    "NoDeviceError",
    "NvccNotFoundError",
    "NvrtcNotFoundError",
    "PerformanceWarning",
    "UninitializedOutputWarning",
    "ReservedNameError",
    "SpecError",
    "SpecErrorGroup",
    "SpecFileError",
    "UnknownDtypeError",
    "__version__",
    # production: the compile policy and the compile log (kspec.compiler), imported on first access
    "compile_policy",
    "compile_log",
    "CompileEvent",
    "warm",
    # runtime and raw kernels, imported on first access (see __getattr__ below)
    "Device",
    "DeviceArray",
    "ElementwiseKernel",
    "KernelLibrary",
    "RawKernel",
    "RawModule",
    "ReductionKernel",
    # planning a call of arrays without memory (torch.compile, jax.jit): kernel.output_specs / plan_launch
    "ArraySpec",
    "LaunchPlan",
    "LaunchStep",
    "Stream",
    "capture",
    "Graph",
    "asarray",
    "empty",
    "fuse",
    "get_device",
    "load",
    "register_binaries",
    "registered_binaries",
    "zeros",
    "jit",
    # the device kernels run on: the GPU, or the CPU device (KSPEC_DEVICE=cpu)
    "use_device",
    "device_kind",
    "checked",
    # gradients (kspec.grad): a kernel's outputs and the map from their gradients to its inputs'; a declared
    # backward for code kspec cannot read (raw and jit kernels)
    "vjp",
    "custom_vjp",
    # texture memory (kspec.runtime), imported on first access
    "CUDAArray",
    "ChannelFormatDescriptor",
    "ResourceDescriptor",
    "SurfaceObject",
    "TextureDescriptor",
    "TextureObject",
]

# Lazy exports: `import kspec` stays cheap and driver-free; these load their module on first access.
_LAZY = {
    "ElementwiseKernel": "kspec.kernels",
    "ReductionKernel": "kspec.kernels",
    "KernelLibrary": "kspec.kernels",
    "load": "kspec.kernels",
    "register_binaries": "kspec.kernels",
    "registered_binaries": "kspec.kernels",
    "RawKernel": "kspec.kernels",
    "RawModule": "kspec.kernels",
    "ArraySpec": "kspec.kernels",
    "LaunchPlan": "kspec.kernels",
    "LaunchStep": "kspec.kernels",
    "DeviceArray": "kspec.runtime",
    "Device": "kspec.runtime",
    "Stream": "kspec.runtime",
    "capture": "kspec.runtime",
    "Graph": "kspec.runtime",
    "asarray": "kspec.runtime",
    "empty": "kspec.runtime",
    "get_device": "kspec.runtime",
    "zeros": "kspec.runtime",
    "use_device": "kspec.runtime",
    "device_kind": "kspec.runtime",
    "checked": "kspec.runtime",
    "vjp": "kspec.grad",
    "custom_vjp": "kspec.grad",
    "CUDAArray": "kspec.runtime",
    "ChannelFormatDescriptor": "kspec.runtime",
    "ResourceDescriptor": "kspec.runtime",
    "SurfaceObject": "kspec.runtime",
    "TextureDescriptor": "kspec.runtime",
    "TextureObject": "kspec.runtime",
    "fuse": "kspec.fuse",
    "compile_policy": "kspec.compiler",
    "compile_log": "kspec.compiler",
    "CompileEvent": "kspec.compiler",
    "warm": "kspec._warm",
}


def __getattr__(name: str) -> object:
    if name == "jit":  # the subpackage itself (`kspec.jit.rawkernel`), imported on first access
        import importlib

        value = importlib.import_module("kspec.jit")
        globals()[name] = value
        return value
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'kspec' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value  # later accesses skip __getattr__
    return value


from ._torch_watch import watch as _watch_torch_compile  # noqa: E402  # bare kernels in torch.compile

_watch_torch_compile()
