"""The one error branch every launch shares.

Every launch (a raw kernel's packer, a prepared elementwise or reduction call) calls the driver's
``cuLaunchKernel`` (cuda.bindings', or the host driver's on the CPU device), checks only the status on its
fast path and hands a non-zero one to :func:`relaunch_or_raise`: CUDA_ERROR_INVALID_CONTEXT means no
context is current in this thread (nothing initialised CUDA here yet), so the device's primary context is
made current and the launch made once more; checking before every launch would cost a driver call each.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ._device import Device
from ._device_kind import HOST_DEVICE_ID

# CUresult values kspec acts on (the bindings' CUresult is an int enum: it compares equal to these)
CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_INVALID_CONTEXT = 201  # also the memory pool's allocation and free retry (kspec/runtime/_memory.py)
CUDA_ERROR_OUT_OF_RESOURCES = 701


def relaunch_or_raise(
    status: Any, device_id: int, launch: Callable[..., Any], args: Sequence[Any], failed: Callable[[Any], BaseException]
) -> None:
    """The error branch of a launch ``launch(*args)`` that returned ``(status,)`` (status non-zero).

    On CUDA_ERROR_INVALID_CONTEXT it makes ``device_id``'s context current and launches once more; a status
    that is still an error raises ``failed(status)``.
    """
    if status == CUDA_ERROR_INVALID_CONTEXT:
        Device(device_id).activate()
        (status,) = launch(*args)
    if status:
        raise failed(status)


def relaunch_raw_or_raise(
    status: Any, device_id: int, launch: Callable[..., Any], args: Sequence[Any], failed: Callable[[Any], BaseException]
) -> None:
    """:func:`relaunch_or_raise` for a raw kernel's ``(function, gx, gy, gz, bx, by, bz, ...)``: a grid or block
    extent of 0 (which the driver refuses) is launched as 1, as CuPy does, so code that launches ``grid=(0,)`` on
    an empty input runs unchanged; the fast path pays nothing for it."""
    if status and min(args[1:7]) == 0:  # whatever the status (also no current context yet): clamp first
        args = (args[0], *(max(1, v) for v in args[1:7]), *args[7:])
        (status,) = launch(*args)
    if status:
        relaunch_or_raise(status, device_id, launch, args, failed)


def dependent_launcher(cu: Any, device_id: int) -> Callable[[Any, int, int, Any, int], tuple[Any]]:
    """``launch(fn, grid, block, hs, params) -> (status,)`` for a launch that may start while the launch
    before it in the stream finishes (programmatic dependent launch, compute capability 9.0 and later): the
    kernel waits (``griddepcontrol.wait``) before it reads what that launch wrote, and meanwhile the launch
    latency and the previous kernel's last blocks overlap. Elsewhere (older GPUs, the CPU device) a plain
    ``cuLaunchKernel``. Stream capture records it as a programmatic edge."""
    def plain(fn: Any, grid: int, block: int, hs: Any, params: int) -> tuple[Any]:
        return cu.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, hs, params, 0)

    if device_id == HOST_DEVICE_ID or Device(device_id).compute_capability < (9, 0):
        return plain
    attribute = cu.CUlaunchAttribute()
    attribute.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    attribute.value.programmaticStreamSerializationAllowed = 1
    configs: dict[tuple[int, int, int], Any] = {}  # (grid, block, stream handle) -> its launch config

    def dependent(fn: Any, grid: int, block: int, hs: Any, params: int) -> tuple[Any]:
        key = (grid, block, int(hs))
        config = configs.get(key)
        if config is None:
            if len(configs) > 64:  # handles of destroyed streams would otherwise pile up
                configs.clear()
            config = configs[key] = cu.CUlaunchConfig()
            config.gridDimX, config.gridDimY, config.gridDimZ = grid, 1, 1
            config.blockDimX, config.blockDimY, config.blockDimZ = block, 1, 1
            config.sharedMemBytes = 0
            config.hStream = hs
            config.attrs = [attribute]
            config.numAttrs = 1
        return cu.cuLaunchKernelEx(config, fn, params, 0)

    return dependent
