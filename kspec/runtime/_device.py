"""Devices and their primary contexts; which device is current.

kspec uses each device's *primary* context, the one the CUDA runtime (and so CuPy and PyTorch) uses, so
pointers, streams and modules are shared with those libraries without any conversion.
"""

from __future__ import annotations

import threading
from typing import Any

from .._errors import KspecTypeError, KspecValueError
from . import _device_kind, _driver

_local = threading.local()  # .stack: contexts pushed by `with Device(n):` blocks of this thread


class Device:
    """One CUDA device, by ordinal. ``Device(n)`` always returns the same object for the same ``n``.

    Creating one touches no driver; its properties and :meth:`use` do. ``with Device(1): ...`` makes the
    device current for the block (kernels launched without array arguments, and ``kspec.empty`` without
    ``device=``, run there) and restores the previous one after it.
    """

    _instances: dict[int, Device] = {}
    _instances_lock = threading.Lock()

    id: int
    _ctx: Any
    _ctx_int: int
    _attrs: dict[str, int]

    def __new__(cls, device_id: int | Device = 0) -> Device:
        if isinstance(device_id, Device):
            return device_id
        if isinstance(device_id, bool) or not isinstance(device_id, int):
            raise KspecTypeError(f"device: expected a device ordinal (int), got {type(device_id).__name__}")
        if device_id < 0 and device_id != _device_kind.HOST_DEVICE_ID:
            raise KspecValueError(f"device: expected a device ordinal >= 0 (or -1, the CPU device), got {device_id}")
        dev = cls._instances.get(device_id)
        if dev is None:
            with cls._instances_lock:
                dev = cls._instances.get(device_id)
                if dev is None:
                    dev = object.__new__(cls)
                    dev.id = device_id
                    dev._ctx = None
                    dev._ctx_int = 0
                    dev._attrs = {}
                    cls._instances[device_id] = dev
        return dev

    def __reduce__(self) -> tuple[Any, ...]:
        return (Device, (self.id,))

    def __repr__(self) -> str:
        return "<kspec.Device -1 (CPU)>" if self.id == _device_kind.HOST_DEVICE_ID else f"<kspec.Device {self.id}>"

    def __int__(self) -> int:
        return self.id

    def __index__(self) -> int:
        return self.id

    # -- driver-backed properties ------------------------------------------------------------------------

    def _check_exists(self) -> None:
        if self.id == _device_kind.HOST_DEVICE_ID:
            return
        count = _driver.device_count()
        if count == 0:
            _driver.driver()  # raises the NoDeviceError that explains why
        if self.id >= count:
            raise KspecValueError(f"device: ordinal {self.id} does not exist; this machine has {count} device(s)")

    def attribute(self, name: str) -> int:
        """A ``CU_DEVICE_ATTRIBUTE_*`` value by its short lower-case name, e.g. ``'multiprocessor_count'``."""
        value = self._attrs.get(name)
        if value is None:
            cu = _driver.driver_for(self.id)
            self._check_exists()
            enum_name = "CU_DEVICE_ATTRIBUTE_" + name.upper()
            attr = getattr(cu.CUdevice_attribute, enum_name, None)
            if attr is None:
                raise KspecValueError(f"attribute: unknown device attribute {name!r} (no {enum_name})")
            value = int(_driver.check(cu.cuDeviceGetAttribute(attr, self.id), f"cuDeviceGetAttribute({enum_name})"))
            self._attrs[name] = value
        return value

    @property
    def compute_capability(self) -> tuple[int, int]:
        """(major, minor), e.g. (9, 0) for an H100/H200."""
        return (self.attribute("compute_capability_major"), self.attribute("compute_capability_minor"))

    @property
    def arch(self) -> str:
        """The NVRTC target for this device's own CUBIN, e.g. ``'sm_90'``; ``'host'`` for the CPU device (its
        modules come from the host C++ compiler)."""
        if self.id == _device_kind.HOST_DEVICE_ID:
            from ..compiler import HOST_ARCH  # a leaf constant: kspec.compiler loads nothing else for it

            return HOST_ARCH
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"

    @property
    def name(self) -> str:
        cu = _driver.driver_for(self.id)
        self._check_exists()
        raw = _driver.check(cu.cuDeviceGetName(256, self.id), "cuDeviceGetName")
        return bytes(raw).split(b"\0", 1)[0].decode(errors="replace")

    @property
    def multiprocessor_count(self) -> int:
        return self.attribute("multiprocessor_count")

    # -- context -----------------------------------------------------------------------------------------

    def _context(self) -> Any:
        """The retained primary context (retained once per process, never released: it lives as long as
        the modules and memory kspec put in it)."""
        ctx = self._ctx
        if ctx is None:
            cu = _driver.driver_for(self.id)
            self._check_exists()
            ctx = _driver.check(cu.cuDevicePrimaryCtxRetain(self.id), f"cuDevicePrimaryCtxRetain({self.id})")
            self._ctx_int = int(ctx)
            self._ctx = ctx
        return ctx

    def activate(self) -> None:
        """Make this device's primary context current in this thread, if it is not already."""
        ctx = self._context()
        cu = _driver.driver_for(self.id)
        current = _driver.check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
        if current is None or int(current) != self._ctx_int:
            _driver.check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")

    def use(self) -> Device:
        """Make this device current in this thread (like ``cupy.cuda.Device(n).use()``); returns self."""
        self.activate()
        return self

    def synchronize(self) -> None:
        """Wait for all work on this device."""
        cu = _driver.driver_for(self.id)
        self.activate()
        _driver.check(cu.cuCtxSynchronize(), "cuCtxSynchronize")

    def __enter__(self) -> Device:
        cu = _driver.driver_for(self.id)
        stack = getattr(_local, "stack", None)
        if stack is None:
            stack = _local.stack = []
        previous = _driver.check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
        stack.append(previous)
        self.activate()
        return self

    def __exit__(self, *exc: object) -> None:
        cu = _driver.driver_for(self.id)
        previous = _local.stack.pop()
        _driver.check(cu.cuCtxSetCurrent(previous if previous is not None else cu.CUcontext(0)), "cuCtxSetCurrent")


def activate_if_several(device_id: int) -> None:
    """Make ``device_id`` current when the process sees several devices (one device: nothing to do)."""
    if _driver._device_count > 1 and device_id != _device_kind.HOST_DEVICE_ID:
        Device(device_id).activate()


def device_count() -> int:
    """Number of visible CUDA devices; 0 when there is no driver or no device (never raises)."""
    return _driver.device_count()


def current_device_id() -> int:
    """The device of the thread's current context (set by kspec, CuPy, PyTorch...), else 0.

    On a machine with one device this is always 0 and touches nothing beyond the first initialisation.
    """
    if _device_kind.decide():
        return _device_kind.HOST_DEVICE_ID
    cu = _driver.driver()
    if _driver._device_count == 1:
        return 0
    ctx = _driver.check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if ctx is None or int(ctx) == 0:
        return 0
    return int(_driver.check(cu.cuCtxGetDevice(), "cuCtxGetDevice"))


def get_device(device: int | Device | None = None) -> Device:
    """``Device(device)``, or the current device when ``device`` is None."""
    if device is None:
        return Device(current_device_id())
    return Device(device)
