"""Arrival counters of one-pass split reductions.

A split reduction's blocks write partials; in one pass, the last block of each tile of outputs to finish
(counted by ``atomicInc`` on a counter of that tile: ``kspec::last_arrival`` in templates/include/kspec/
reduce.cuh) merges them. The counters must read zero when a launch starts and read zero again when it ends
(``atomicInc`` wraps back to 0 at the last arrival), so a set of counters serves any number of launches one
after another without a memset, but never two launches at once. Launches in one stream run one after
another; so do the replays of one CUDA graph. Hence:

- an uncaptured launch takes the counters of its stream (``STREAM_SLICE`` of them per stream and device,
  made zero once, kept for the process);
- a launch captured into a graph takes counters of its own, kept for the process, which the graph's
  replays reuse: the graph may be replayed on any stream, concurrently with the capturing stream's work;
- where no counters can be had without allocating (none made yet while capturing, or the captured ones used
  up), the launch zeroes counters in its own workspace with a memset on its stream (a graph records it as a
  memset node): correct everywhere, a little slower.

Counter memory is ``cuMemAlloc``'d and zeroed outside any capture, in arenas of ``ARENA`` counters.
Streams are told apart by handle (the per-thread default stream by handle and thread): a stream destroyed
while a reduction still runs on it, whose handle a new stream gets at once, would share its counters.
"""

from __future__ import annotations

import threading
from typing import Any

from . import _driver
from ._device import Device
from ._stream import cu_stream, stream_is_capturing

ARENA = 1 << 16  # counters per arena (256 KiB)
STREAM_SLICE = 4096  # counters of one stream: the most that one launch takes (the planner keeps to it)
MAX_STREAMS = 1024  # streams given a slice per device (16 MiB at most); later ones zero their own
_ALIGN = 32  # counters: a captured launch's own start on a 128-byte line
_PER_THREAD = 2  # CU_STREAM_PER_THREAD: one handle, a different stream in every thread
_LEGACY = 1  # CU_STREAM_LEGACY: the same stream as handle 0


class _DeviceCounters:
    """The counters of one device: arenas, each stream's slice, and where captured launches take theirs."""

    def __init__(self, device_id: int) -> None:
        self.device_id = device_id
        self.arenas: list[int] = []  # device pointers, kept for the process
        self.free_at = 0  # the next free counter of the last arena (in counters)
        self.streams: dict[object, int] = {}
        self.lock = threading.Lock()

    def _grow(self, handle: int) -> bool:
        """A new zeroed arena, or False where the driver refuses one (out of memory; another thread capturing
        in global mode). Never called while ``handle`` captures: cuMemAlloc and a synchronisation cannot be
        recorded."""
        cu = _driver.driver_for(self.device_id)
        Device(self.device_id).activate()
        err, ptr = cu.cuMemAlloc(ARENA * 4)
        if err:
            return False
        stream = cu_stream(handle)
        (err,) = cu.cuMemsetD32Async(ptr, 0, ARENA, stream)
        if not err:
            (err,) = cu.cuStreamSynchronize(stream)  # zero before any stream uses it
        if err:
            cu.cuMemFree(ptr)
            return False
        self.arenas.append(int(ptr))
        self.free_at = 0
        return True

    def _take(self, count: int) -> int | None:
        """``count`` counters of the last arena, or None when it has too few left."""
        if not self.arenas or self.free_at + count > ARENA:
            return None
        ptr = self.arenas[-1] + 4 * self.free_at
        self.free_at += -(-count // _ALIGN) * _ALIGN
        return ptr

    def counters(self, handle: int, count: int) -> int | None:
        """Counters for a launch of ``count`` tiles on stream ``handle``, or None: zero them yourself."""
        if stream_is_capturing(handle):
            with self.lock:  # the graph's own, never handed out again
                return self._take(count)
        key: object = handle if handle != _LEGACY else 0
        if handle == _PER_THREAD:
            key = (handle, threading.get_ident())
        found = self.streams.get(key)
        if found is not None:
            return found
        with self.lock:
            if key in self.streams:
                return self.streams[key]
            if len(self.streams) >= MAX_STREAMS:  # slices cannot be taken back (work may still use them)
                return None
            ptr = self._take(STREAM_SLICE)
            if ptr is None and self._grow(handle):
                ptr = self._take(STREAM_SLICE)
            if ptr is None:
                return None
            self.streams[key] = ptr
            if ARENA - self.free_at < 2 * STREAM_SLICE:  # room for captures, made while nothing captures
                self._grow(handle)
            return ptr


_devices: dict[int, _DeviceCounters] = {}
_devices_lock = threading.Lock()


def split_counters(device_id: int, handle: int, count: int, workspace: Any, offset: int) -> int:
    """The device pointer of ``count`` (at most :data:`STREAM_SLICE`) zero arrival counters for a one-pass
    split reduction launched next on stream ``handle`` of device ``device_id``, which no launch that may run
    at the same time uses (see the module docstring). Where none can be had, the ``4 * count`` bytes at
    ``offset`` in ``workspace`` (the launch's own allocation), zeroed on the stream."""
    counters = _devices.get(device_id)
    if counters is None:
        with _devices_lock:
            counters = _devices.setdefault(device_id, _DeviceCounters(device_id))
    ptr = counters.counters(handle, count)
    if ptr is not None:
        return ptr
    ptr = workspace.ptr + offset
    cu = _driver.driver_for(device_id)
    _driver.check(cu.cuMemsetD32Async(ptr, 0, count, cu_stream(handle)), "cuMemsetD32Async")
    return ptr
