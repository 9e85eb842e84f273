"""``__device__`` and ``__constant__`` variables of a loaded module (``RawModule.get_global``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._device import Device
from ._devicearray import DeviceArray, device_array_from_pointer
from ._interop import register_kspec_type
from ._module import LoadedModule


class DeviceGlobal:
    """A ``__device__`` or ``__constant__`` variable of a loaded module: its address and size on one device.

    ``as_array(dtype, shape=None)`` views it as a DeviceArray (``.set()`` / ``.get()`` to write and read it;
    ``cupy.asarray(g.as_array(np.float32))`` for a CuPy view). It can also be passed to a kernel as a pointer.
    """

    __slots__ = ("_ptr", "_device_id", "nbytes", "name", "_module")

    def __init__(self, ptr: int, nbytes: int, device_id: int, name: str, module: LoadedModule) -> None:
        self._ptr = ptr
        self._device_id = device_id
        self.nbytes = nbytes
        self.name = name
        self._module = module  # keeps the module (so the memory) loaded

    @property
    def ptr(self) -> int:
        return self._ptr

    @property
    def size(self) -> int:
        """Size in bytes (CuPy's MemoryPointer calls it size too)."""
        return self.nbytes

    @property
    def device(self) -> Device:
        return Device(self._device_id)

    def __int__(self) -> int:
        return self._ptr

    def as_array(self, dtype: Any, shape: Any = None) -> DeviceArray:
        """A DeviceArray over the variable's memory (the whole variable when ``shape`` is None)."""
        return device_array_from_pointer(self._ptr, self.nbytes, np.dtype(dtype), shape, self._device_id, self)

    def __repr__(self) -> str:
        return f"<kspec.DeviceGlobal {self.name!r} 0x{self._ptr:x} ({self.nbytes} B) on device {self._device_id}>"


register_kspec_type(DeviceGlobal)  # a kernel argument like a DeviceArray: its _ptr and _device_id slots
