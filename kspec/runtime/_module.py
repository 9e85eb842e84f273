"""Binary images (CUBIN, PTX, fatbin) loaded into a device, and what can be looked up in them."""

from __future__ import annotations

from typing import Any

from .._errors import LaunchError
from . import _driver
from ._device import Device

_LOAD_HINTS = {
    "CUDA_ERROR_NO_BINARY_FOR_GPU": "the CUBIN was built for another architecture than this device's",
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": (
        "the PTX comes from a newer compiler than this driver understands; load a CUBIN instead"
    ),
    "CUDA_ERROR_INVALID_PTX": "the PTX does not assemble for this device",
    "CUDA_ERROR_INVALID_IMAGE": "the data is not a CUBIN, PTX or fatbin image",
}


class LoadedModule:
    """One image loaded (``cuModuleLoadData``) into one device's primary context.

    Never unloaded: a kernel launched from it may still be running when the Python object goes away, and
    ``cuModuleUnload`` does not wait for it. Modules are small; they go with the context at exit.
    """

    __slots__ = ("device_id", "handle", "what", "_functions")

    def __init__(self, image: bytes, device: Device, *, what: str) -> None:
        cu = _driver.driver_for(device.id)
        self.device_id = device.id
        self.what = what
        self._functions: dict[str, Any] = {}
        self.handle = None
        device.activate()
        err, handle = cu.cuModuleLoadData(image)
        if err:
            name = cu.CUresult(int(err)).name
            hint = _LOAD_HINTS.get(name)
            raise LaunchError(
                f"loading {what} on device {device.id} ({device.arch}) failed: {_driver.describe(err)}"
                + (f"; {hint}" if hint else "")
            )
        self.handle = handle

    def function(self, name: str) -> Any | None:
        """The CUfunction named ``name`` (a symbol name, already lowered), or None if there is none."""
        fn = self._functions.get(name)
        if fn is None:
            cu = _driver.driver_for(self.device_id)
            err, fn = cu.cuModuleGetFunction(self.handle, name.encode())
            if err == cu.CUresult.CUDA_ERROR_NOT_FOUND:
                return None
            if err:
                raise LaunchError(f"cuModuleGetFunction({name!r}) in {self.what} failed: {_driver.describe(err)}")
            self._functions[name] = fn
        return fn

    def global_symbol(self, name: str) -> tuple[int, int] | None:
        """(device pointer, size in bytes) of a ``__device__`` / ``__constant__`` variable, or None."""
        cu = _driver.driver_for(self.device_id)
        err, ptr, size = cu.cuModuleGetGlobal(self.handle, name.encode())
        if err == cu.CUresult.CUDA_ERROR_NOT_FOUND:
            return None
        if err:
            raise LaunchError(f"cuModuleGetGlobal({name!r}) in {self.what} failed: {_driver.describe(err)}")
        return int(ptr), int(size)

    def function_names(self) -> list[str]:
        """The names of the kernels in the image (mangled for C++ linkage), when the driver can list them."""
        cu = _driver.driver_for(self.device_id)
        try:
            err, count = cu.cuModuleGetFunctionCount(self.handle)
            if err:
                return []
            err, functions = cu.cuModuleEnumerateFunctions(count, self.handle)
            if err:
                return []
            names = []
            for fn in functions:
                err, raw = cu.cuFuncGetName(fn)
                if not err:
                    names.append(raw.decode() if isinstance(raw, bytes) else str(raw))
            return sorted(names)
        except (AttributeError, TypeError):  # a driver or binding older than CUDA 12.4
            return []


def kernel_param_sizes(function: Any) -> tuple[int, ...] | None:
    """The byte sizes of a kernel's parameters (``cuFuncGetParamInfo``), or None if the driver cannot say."""
    cu = _driver.driver()
    getter = getattr(cu, "cuFuncGetParamInfo", None)
    if getter is None:
        return None
    sizes = []
    for index in range(4096):  # a kernel's parameter space is 32 KiB at most: far fewer parameters than this
        try:
            err, _offset, size = getter(function, index)
        except Exception:
            return None
        if err == cu.CUresult.CUDA_ERROR_INVALID_VALUE:
            break
        if err:
            return None  # e.g. CUDA_ERROR_NOT_SUPPORTED on an old driver
        sizes.append(int(size))
    return tuple(sizes)
