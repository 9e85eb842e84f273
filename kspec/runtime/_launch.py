"""The call into the driver that starts a kernel, and the one error branch every launch shares.

``LAUNCHER`` picks the call a raw kernel's packer makes: ``"bindings"`` (cuda.bindings.driver's
cuLaunchKernel) or ``"ctypes"`` (libcuda's, through ctypes); benchmarks/launch_overhead.py measures both.

Every launch (a raw kernel's packer, a prepared elementwise or reduction call) checks only the status on
its fast path and hands a non-zero one to :func:`relaunch_or_raise`: CUDA_ERROR_INVALID_CONTEXT means no
context is current in this thread (nothing initialised CUDA here yet), so the device's primary context is
made current and the launch made once more; checking before every launch would cost a driver call each.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from ._device import Device

# Which call into the driver a packer uses: "bindings" or "ctypes" (read when a packer is generated).
LAUNCHER = os.environ.get("KSPEC_LAUNCHER", "bindings")

# CUresult values kspec acts on (the bindings' CUresult is an int enum: it compares equal to these)
CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_INVALID_CONTEXT = 201  # also the memory pool's allocation and free retry (kspec/runtime/_memory.py)
CUDA_ERROR_OUT_OF_RESOURCES = 701


def relaunch_or_raise(
    status: Any, device_id: int, launch: Callable[..., Any], args: Sequence[Any], failed: Callable[[Any], BaseException]
) -> None:
    """The error branch of a launch ``launch(*args)`` that returned ``status`` (non-zero).

    On CUDA_ERROR_INVALID_CONTEXT it makes ``device_id``'s context current and launches once more; a status
    that is still an error raises ``failed(status)``. ``launch`` returns ``(status,)`` (the bindings) or
    the status itself (ctypes).
    """
    if status == CUDA_ERROR_INVALID_CONTEXT:
        Device(device_id).activate()
        result = launch(*args)
        status = result[0] if type(result) is tuple else result
    if status:
        raise failed(status)


# -- ctypes ----------------------------------------------------------------------------------------------

_ctypes_launch: Any = None
_ctypes_coop: Any = None
_c_void_ps: dict[int, Any] = {}  # stream handle -> its c_void_p, made once per handle


def _ctypes_entry_points() -> tuple[Any, Any]:
    """libcuda's cuLaunchKernel and cuLaunchCooperativeKernel through ctypes, loaded once."""
    global _ctypes_launch, _ctypes_coop
    if _ctypes_launch is None:
        import ctypes

        lib = ctypes.CDLL("libcuda.so.1")
        _ctypes_launch = lib.cuLaunchKernel
        _ctypes_launch.restype = ctypes.c_int
        _ctypes_coop = lib.cuLaunchCooperativeKernel
        _ctypes_coop.restype = ctypes.c_int
    return _ctypes_launch, _ctypes_coop


def _c_stream(handle: int) -> Any:
    obj = _c_void_ps.get(handle)
    if obj is None:
        import ctypes

        if len(_c_void_ps) > 4096:
            _c_void_ps.clear()
        obj = _c_void_ps[handle] = ctypes.c_void_p(handle)
    return obj
