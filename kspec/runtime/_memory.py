"""Device memory: one stream-ordered pool per device.

Allocations come from a ``cuMemPool`` kspec creates for each device (not the device's default pool, which
other libraries may tune), with its release threshold at the maximum so freed blocks stay in the pool and
the next allocation of a similar size costs no driver round trip to the OS. An allocation is freed on the
stream it was made on (``cuMemFreeAsync``), when its last Python reference goes.

Stream-ordered allocations are what a CUDA graph capture records: made on a capturing stream they become
the graph's memory (an allocation node; the address stays the same for every launch), freed there a free
node. The fallback for a device without pools, ``cuMemAlloc``, cannot be captured and is refused then.
"""

from __future__ import annotations

import threading
from typing import Any

from .._errors import LaunchError
from . import _driver
from ._device import Device
from ._launch import CUDA_ERROR_INVALID_CONTEXT
from ._stream import cu_stream, live_handle, refuse_while_capturing

_NO_POOL = "allocate with cuMemAlloc (the device has no stream-ordered memory pools)"
_NO_POOL_ADVICE = "allocate the outputs before capturing and pass them (out=)"


class Allocation:
    """``nbytes`` of device memory at ``ptr`` on ``device_id``; freed when garbage-collected.

    ``stream_owner`` is the object the stream handle came from (a kspec, CuPy or PyTorch stream): holding it
    keeps that stream from being destroyed before the memory is freed in its order.
    """

    __slots__ = ("ptr", "nbytes", "device_id", "stream", "stream_owner", "_pooled", "__weakref__")

    def __init__(
        self, ptr: int, nbytes: int, device_id: int, stream: int, pooled: bool, stream_owner: object = None
    ) -> None:
        self.ptr = ptr
        self.nbytes = nbytes
        self.device_id = device_id
        self.stream = stream
        self.stream_owner = stream_owner
        self._pooled = pooled

    def __del__(self) -> None:
        if not self.ptr:
            return
        try:
            cu = _driver._driver if self.device_id >= 0 else _driver.driver_for(self.device_id)  # never initialises CUDA
        except ImportError:  # a host allocation freed at interpreter shutdown: the memory goes with the process
            return
        if cu is None:
            return
        try:
            stream = live_handle(self.stream, self.stream_owner)
            for _attempt in range(2):
                if self._pooled:
                    (err,) = cu.cuMemFreeAsync(self.ptr, cu_stream(stream))
                else:
                    (err,) = cu.cuMemFree(self.ptr)
                if err == CUDA_ERROR_INVALID_CONTEXT:
                    # Collected in a thread where no context is current: make the owner's current, retry.
                    Device(self.device_id).activate()
                else:
                    break
        except Exception:  # interpreter shutdown: the context may already be gone
            pass
        self.ptr = 0

    def __repr__(self) -> str:
        return f"<kspec Allocation 0x{self.ptr:x} {self.nbytes} B on device {self.device_id}>"


class MemoryPool:
    """The stream-ordered pool of one device."""

    def __init__(self, device: Device) -> None:
        cu = _driver.driver_for(device.id)
        self.device = device
        self._pool: Any = None
        device.activate()
        if device.attribute("memory_pools_supported"):
            props = cu.CUmemPoolProps()
            props.allocType = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
            props.handleTypes = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_NONE
            props.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
            props.location.id = device.id
            pool = _driver.check(cu.cuMemPoolCreate(props), "cuMemPoolCreate")
            _driver.check(
                cu.cuMemPoolSetAttribute(
                    pool, cu.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, cu.cuuint64_t(2**64 - 1)
                ),
                "cuMemPoolSetAttribute(RELEASE_THRESHOLD)",
            )
            self._pool = pool

    def allocate(self, nbytes: int, stream: int, stream_owner: object = None) -> Allocation:
        """``nbytes`` ordered on ``stream``: usable by work queued on that stream from now on."""
        if nbytes <= 0:
            return Allocation(0, 0, self.device.id, stream, False)
        cu = _driver.driver_for(self.device.id)
        if self._pool is not None:
            err, ptr = cu.cuMemAllocFromPoolAsync(nbytes, self._pool, cu_stream(stream))
            if err == CUDA_ERROR_INVALID_CONTEXT:  # as a launch does (_launch.relaunch_or_raise)
                self.device.activate()
                err, ptr = cu.cuMemAllocFromPoolAsync(nbytes, self._pool, cu_stream(stream))
            pooled = True
        else:  # a device without stream-ordered pools (rare): cuMemAlloc, which a graph capture cannot record
            refuse_while_capturing(stream, f"device {self.device.id}", _NO_POOL, _NO_POOL_ADVICE)
            self.device.activate()
            err, ptr = cu.cuMemAlloc(nbytes)
            pooled = False
        if err:
            raise LaunchError(
                f"allocating {nbytes} bytes on device {self.device.id} failed: {_driver.describe(err)}"
            )
        return Allocation(int(ptr), nbytes, self.device.id, stream, pooled, stream_owner)

    def _attribute(self, name: str) -> int:
        if self._pool is None:
            return 0
        cu = _driver.driver_for(self.device.id)
        attr = getattr(cu.CUmemPool_attribute, "CU_MEMPOOL_ATTR_" + name)
        return int(_driver.check(cu.cuMemPoolGetAttribute(self._pool, attr), "cuMemPoolGetAttribute"))

    @property
    def used_bytes(self) -> int:
        """Bytes handed out and not yet freed."""
        return self._attribute("USED_MEM_CURRENT")

    @property
    def reserved_bytes(self) -> int:
        """Bytes the pool holds from the device (used plus cached)."""
        return self._attribute("RESERVED_MEM_CURRENT")

    def trim(self, keep_bytes: int = 0) -> None:
        """Give cached memory back to the device, keeping at most ``keep_bytes`` reserved."""
        if self._pool is not None:
            cu = _driver.driver_for(self.device.id)
            _driver.check(cu.cuMemPoolTrimTo(self._pool, keep_bytes), "cuMemPoolTrimTo")


_pools: dict[int, MemoryPool] = {}
_pools_lock = threading.Lock()


def get_pool(device: int | Device) -> MemoryPool:
    """The pool of a device, created on first use."""
    dev = Device(device)
    pool = _pools.get(dev.id)
    if pool is None:
        with _pools_lock:
            pool = _pools.get(dev.id)
            if pool is None:
                pool = _pools[dev.id] = MemoryPool(dev)
    return pool


def allocate(nbytes: int, device: int | Device, stream: int, stream_owner: object = None) -> Allocation:
    return get_pool(device).allocate(nbytes, stream, stream_owner)
