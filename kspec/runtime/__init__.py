"""kspec's runtime: devices, streams, arrays from any library, memory, module loading and launchers.

Nothing here touches the CUDA driver at import time; the first launch, allocation or device query loads
and initialises it, and a machine without a GPU then gets a :class:`kspec.NoDeviceError` saying why.

Streams: ``stream=`` takes a :class:`Stream`, an int handle, or any object with ``__cuda_stream__``,
``.ptr`` (CuPy) or ``.cuda_stream`` (PyTorch). Without one, work goes to the current stream of the inputs'
array library (CuPy's or PyTorch's), else to the legacy default stream. ``with stream:`` makes a
:class:`Stream` current for kspec calls in this thread (nested blocks stack) and wins over the library's.
"""

from __future__ import annotations

from ._device_kind import HOST_DEVICE_ID, device_kind, use_device
from ._device import Device, activate_if_several, current_device_id, device_count, get_device
from ._allocate import allocate_like, allocator_like
from ._devicearray import DeviceArray, asarray, device_array_from_pointer, empty, zeros
from ._driver import check as check_driver, cuda_version, driver_description, driver_release, describe as describe_driver_error, driver as cuda_driver, import_bindings as import_driver_bindings, initialized_device_count, why_no_device, why_no_gpu
from ._export import EXPORTED, export_array, export_outputs
from ._fastcall import call_path_choice, direct_launch_address, fastcall_module, reset_call_path
from ._cupy_layout import forget_cupy_layout, prepare_cupy_layout
from ._interop import (
    ARRAY_KINDS,
    CAI,
    CUPY,
    DLPACK,
    HOST,
    JAX,
    KSPEC,
    NUMPY,
    TORCH,
    ArrayInfo,
    array_dtype_ndim,
    accepts_kind,
    array_info,
    check_same_device,
    is_device_array,
    is_texture_type,
    kind_of,
    kind_of_object,
    library_of,
    numpy_dtype_to_torch,
    order_cai_producer,
    protocol_library,
    protocol_library_of,
    torch_dtype_to_numpy,
)
from ._launch import dependent_launcher, relaunch_or_raise
from ._memory import Allocation, MemoryPool, allocate as allocate_bytes, get_pool
from ._module import LoadedModule, kernel_param_sizes
from ._stream import (
    Stream,
    cu_stream,
    current_stream,
    default_stream_getter,
    default_stream_source,
    open_stream_blocks,
    refuse_while_capturing,
    stream_handle,
    stream_is_capturing,
)
from .._lazy import lazy_getattr

# Loaded on first use: what an elementwise or reduction call never needs (raw-kernel launchers, module
# globals, CUDA arrays and texture objects) stays out of a serving process's start-up.
_LAZY = {
    "ChannelFormatDescriptor": "_channelformat", "CUDAArray": "_cudaarray", "DeviceGlobal": "_device_global",
    "dim3": "_launch_args", "Launcher": "_launcher", "ResourceDescriptor": "_texture", "SurfaceObject": "_texture",
    "TextureDescriptor": "_texture", "TextureObject": "_texture", "Graph": "_graph", "capture": "_graph",
    "worker_threads": "host",
    # the CPU device's checked mode (host/_checked.py, with mmap): a process launching on the GPU never needs it
    "checked": "host",
}
__getattr__ = lazy_getattr(__name__, _LAZY, globals())

# ``__all__`` is the user-facing API (docs/reference/runtime.md). The other names imported above are the
# runtime's interface to the layers above it (kspec.kernels): they import from here, never from a private
# module (tests/project_tests/test_layers.py), and docs/architecture.md lists them.

__all__ = [
    "Allocation",
    "ArrayInfo",
    "CUDAArray",
    "ChannelFormatDescriptor",
    "Device",
    "DeviceArray",
    "EXPORTED",
    "Graph",
    "Launcher",
    "LoadedModule",
    "MemoryPool",
    "ResourceDescriptor",
    "Stream",
    "SurfaceObject",
    "TextureDescriptor",
    "TextureObject",
    "allocate_like",
    "allocator_like",
    "array_dtype_ndim",
    "array_info",
    "asarray",
    "capture",
    "check_same_device",
    "checked",
    "current_device_id",
    "current_stream",
    "default_stream_getter",
    "device_array_from_pointer",
    "device_count",
    "dim3",
    "empty",
    "export_array",
    "export_outputs",
    "get_device",
    "get_pool",
    "is_device_array",
    "kernel_param_sizes",
    "library_of",
    "stream_handle",
    "torch_dtype_to_numpy",
    "why_no_device",
    "why_no_gpu",
    "zeros",
    "device_kind",
    "use_device",
]
