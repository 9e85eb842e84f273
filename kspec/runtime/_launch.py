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
