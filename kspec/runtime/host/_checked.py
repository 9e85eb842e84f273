"""The CPU device's checked mode: argument buffers placed against inaccessible guard pages.

Unchecked, a kernel that writes a few elements past a NumPy array writes into the Python heap: no fault, a
corrupted process. Checked (the default; ``KSPEC_CHECKED=0`` or ``kspec.checked(False)`` turns it off), every buffer a launch can reach
ends flush against a page with no access, so the first byte past its end faults, and the fault becomes a
:class:`kspec.KernelFaultError` (kspec/runtime/host/_fault.py says where). A page of slack before a buffer
holds a known byte pattern, checked after the launch: a write just before a buffer's start is found then (the
block and thread are not known; a read there is not seen).

- The device's own allocations (``kspec.asarray``, ``empty``, kernel outputs, workspaces) are mapped that way
  when checked mode is on at allocation time: no copy per launch; raw pointers into them are covered too.
- NumPy arrays given to a raw or jit kernel are copied into such a region for each launch and back after it
  (the packer notes them for the driver, kspec/runtime/_packer.py). Arrays that overlap share one region, so
  aliasing (in-place updates) behaves as it does unchecked. Every 8-byte parameter whose value points into a
  noted array, a raw pointer passed as an integer included, is moved with it.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ..._errors import KspecTypeError

CHECKED_ENV = "KSPEC_CHECKED"
PAGE = mmap.PAGESIZE
CANARY = 0xFD  # the slack before a buffer: a changed byte there is a write before its start
_MAP_FAILED = ctypes.c_void_p(-1).value


def _from_environment() -> bool:
    """On unless ``KSPEC_CHECKED`` turns it off: a new user's out-of-bounds write is an error, not a corrupted
    process (the cost, a copy of each NumPy argument of a raw or jit kernel per launch: docs/guide/cpu-device.md)."""
    return os.environ.get(CHECKED_ENV, "").strip().lower() not in ("0", "false", "no", "off")


state = [_from_environment()]  # read on every CPU-device launch (one list index)
_lock = threading.Lock()


class checked:
    """Run CPU-device launches in checked mode from now on (``checked(False)``: unchecked); as a context
    manager, until the block ends. Process-wide, as :class:`kspec.use_device` is. Costs a copy of each NumPy
    argument per launch and a few pages per buffer (docs/guide/cpu-device.md)."""

    def __init__(self, on: bool = True) -> None:
        if not isinstance(on, bool):
            raise KspecTypeError(f"on: expected a bool, got {type(on).__name__}")
        with _lock:
            self._previous = state[0]
            state[0] = on
        self.on = on

    def __enter__(self) -> checked:
        return self

    def __exit__(self, *exc: object) -> None:
        with _lock:
            state[0] = self._previous

    def __repr__(self) -> str:
        return f"kspec.checked({self.on!r})"


_libc: list[Any] = []  # (mmap, mprotect, munmap) of the process's libc, on first use (POSIX only, as the device)


def _mapping_calls() -> tuple[Any, Any, Any]:
    if not _libc:
        libc = ctypes.CDLL(None, use_errno=True)
        mmap_, mprotect, munmap = libc.mmap, libc.mprotect, libc.munmap
        mmap_.restype = ctypes.c_void_p
        mmap_.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        _libc.extend((mmap_, mprotect, munmap))
    return _libc[0], _libc[1], _libc[2]


class Region:
    """``size`` bytes at ``start``, ending flush against an inaccessible page; before them the slack that
    rounds them up to whole pages (the canary pattern; none for a multiple of the page size) and an inaccessible
    page. ``start`` is aligned to the largest power of two (up to the page) dividing ``size``: what any element
    type that fills the buffer needs, with no gap before the guard."""

    __slots__ = ("base", "total", "start", "size", "live")

    def __init__(self, size: int) -> None:
        data_pages = -(-max(size, 1) // PAGE)
        self.total = (data_pages + 2) * PAGE
        map_, protect, _ = _mapping_calls()
        base = map_(None, self.total, 0, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)  # 0: PROT_NONE
        if base is None or base == _MAP_FAILED:
            raise MemoryError(f"the CPU device's checked mode could not map {self.total} bytes "
                              f"(errno {ctypes.get_errno()})")  # fmt: skip
        self.base, self.live = base, True
        if protect(base + PAGE, data_pages * PAGE, mmap.PROT_READ | mmap.PROT_WRITE) != 0:
            self.close()
            raise MemoryError(f"the CPU device's checked mode could not unprotect a mapping (errno {ctypes.get_errno()})")
        self.place(size)

    def place(self, size: int) -> None:
        """Hold ``size`` bytes (at most the region's data pages) from now on, flush against the end guard."""
        self.size = size
        self.start = self.base + self.total - PAGE - size
        ctypes.memset(self.base + PAGE, CANARY, self.start - self.base - PAGE)

    def written_before(self) -> int:
        """How many bytes before ``start`` the farthest write in the slack landed (0: the slack is intact; a
        byte written with the pattern's own value is not seen)."""
        slack = self.start - self.base - PAGE
        data = ctypes.string_at(self.base + PAGE, slack)
        if data.count(CANARY) == slack:
            return 0
        return slack - next(i for i, b in enumerate(data) if b != CANARY)

    def close(self) -> None:
        if self.live:
            _mapping_calls()[2](self.base, self.total)
            self.live = False


# Staging regions are kept for later launches (a map and an unmap cost ~100 us, the unmap more with worker threads
# running): per data page count, up to _SPARE_BYTES in all. The device's own allocations are unmapped when freed,
# so that a stale pointer into one faults.
_SPARE_BYTES = 64 << 20
_spare: dict[int, list[Region]] = {}
_spare_bytes = [0]


def staging_region(size: int) -> Region:
    """A region holding ``size`` bytes: a spare one of the same page count, else a new one."""
    pages = -(-max(size, 1) // PAGE)
    with _lock:
        spares = _spare.get(pages)
        region = spares.pop() if spares else None
        if region is not None:
            _spare_bytes[0] -= region.total
    if region is None:
        return Region(size)
    region.place(size)
    return region


def recycle(region: Region) -> None:
    """Keep ``region`` for a later launch, or unmap it when the spares are full."""
    with _lock:
        if _spare_bytes[0] + region.total <= _SPARE_BYTES:
            _spare.setdefault(region.total // PAGE - 2, []).append(region)
            _spare_bytes[0] += region.total
            return
    region.close()


def host_memory(nbytes: int) -> tuple[Any, int]:
    """(what holds it, pointer) of ``nbytes`` of the CPU device's memory: 64-byte aligned, or in checked mode a
    :class:`Region` against a guard page."""
    if state[0]:
        region = Region(nbytes)
        return region, region.start
    import numpy as np  # here: importing the runtime does not need NumPy's first allocation

    block = np.empty(nbytes + 64, dtype=np.uint8)
    address = block.ctypes.data
    return block, address + (-address % 64)


def _owner(a: Any) -> Any:
    """The NumPy array that owns ``a``'s memory (``a`` itself when it owns it or its base is not an array)."""
    import numpy as np  # here: only a checked launch with NumPy arguments needs it

    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _byte_bounds(a: Any, data: int) -> tuple[int, int]:
    """[low, high) of the bytes NumPy array ``a`` at ``data`` spans (negative strides included)."""
    low = high = data
    for extent, stride in zip(a.shape, a.strides):
        if extent == 0:
            return low, low
        if stride < 0:
            low += (extent - 1) * stride
        else:
            high += (extent - 1) * stride
    return low, high + a.itemsize


class Staging:
    """One checked launch's copies: ``params`` is the kernelParams address to launch with; :meth:`finish`
    copies back, checks the slack before each buffer and unmaps."""

    def __init__(self, params: int, param_sizes: Sequence[int], arrays: Sequence[Any],
                 own: Callable[[int], Region | None]) -> None:  # fmt: skip
        self.groups: list[tuple[int, int, bool, Region]] = []  # (low, high, write back, region); [] once finished
        self.spans: list[tuple[int, int, int, int]] = []  # (low, base, total, start): kept after finish()
        self.own: list[Region] = []  # the device's own allocations that arguments point at
        # A view is staged with the array that owns its memory: a kernel may reach around the view inside it (a
        # negative stride from a slice's start, as on a GPU), and only past the owner's ends is out of bounds.
        owners = [_owner(a) for a in arrays]
        bounds = [_byte_bounds(o, o.ctypes.data) for o in owners]
        self.sizes = {a.ctypes.data: high - a.ctypes.data for a, (_, high) in zip(arrays, bounds)}  # for messages
        spans = sorted((low, high, bool(a.flags.writeable)) for a, (low, high) in zip(arrays, bounds))
        merged: list[list[Any]] = []
        for low, high, writeable in spans:
            if high == low:
                continue
            if merged and low < merged[-1][1]:  # overlapping arrays: one region, as their memory is one
                merged[-1][1] = max(merged[-1][1], high)
                merged[-1][2] = merged[-1][2] or writeable
            else:
                merged.append([low, high, writeable])
        try:
            for low, high, writeable in merged:
                region = staging_region(high - low)
                ctypes.memmove(region.start, low, high - low)
                self.groups.append((low, high, writeable, region))
                self.spans.append((low, region.base, region.total, region.start))
        except BaseException:
            self.finish()
            raise
        self.params = self._moved(params, param_sizes, own)

    def _moved(self, params: int, param_sizes: Sequence[int], own: Callable[[int], Region | None]) -> int:
        """A copy of ``params`` whose values that point into a staged array point into its region (``params``
        itself when nothing is staged)."""
        n = len(param_sizes)
        slots = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
        if not self.groups:  # only the device's own allocations: nothing moves, their slack is checked after
            for i in range(n):
                region = own(ctypes.c_uint64.from_address(slots[i]).value) if param_sizes[i] == 8 else None
                if region is not None:
                    self.own.append(region)
            return params
        widths = [max(8, size) for size in param_sizes]
        self._buffer = buffer = (ctypes.c_char * max(8, sum(widths)))()
        self._pointers = pointers = (ctypes.c_void_p * max(1, n))()
        offset = 0
        for i, width in enumerate(widths):
            at = ctypes.addressof(buffer) + offset
            ctypes.memmove(at, slots[i], param_sizes[i])
            pointers[i] = at
            offset += width
            if param_sizes[i] != 8:
                continue
            value = ctypes.c_uint64.from_address(at).value
            moved = self.moved(value)
            if moved != value:
                ctypes.c_uint64.from_address(at).value = moved
            region = own(value)
            if region is not None:
                self.own.append(region)
        return ctypes.addressof(pointers)

    def moved(self, address: int) -> int:
        """``address`` in a staged array -> the same byte in its region (one past the end included)."""
        for low, high, _, region in self.groups:
            if low <= address <= high:
                return region.start + (address - low)
        return address

    def original(self, address: int) -> int:
        """An address in (or in the guard pages around) a region -> the address the kernel meant."""
        for low, base, total, start in self.spans:
            if base <= address < base + total:
                return low + (address - start)
        return address

    def finish(self) -> list[int]:
        """Copy the writable arrays back and give the regions back (once); the address (the kernel's, not the
        region's) of the farthest write before the start of each buffer whose slack was written."""
        found: list[int] = []
        groups, self.groups = self.groups, []
        for low, high, writeable, region in groups:
            before = region.written_before()
            if before:
                found.append(low - before)
            if writeable:
                ctypes.memmove(low, region.start, high - low)
            recycle(region)
        for region in self.own:
            before = region.written_before()
            if before:
                found.append(region.start - before)
                ctypes.memset(region.base + PAGE, CANARY, region.start - region.base - PAGE)  # report it once
        return found


class _Noted(threading.local):
    arrays: tuple[Any, ...] | None = None


_noted = _Noted()


def note(arrays: tuple[Any, ...]) -> None:
    """The NumPy arrays of the launch this thread makes next (a packer calls this in checked mode)."""
    _noted.arrays = arrays


def take_noted() -> tuple[Any, ...]:
    """What :func:`note` left for this launch, and forget it."""
    arrays = _noted.arrays
    if arrays is None:
        return ()
    _noted.arrays = None
    return arrays
