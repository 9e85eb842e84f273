"""Where a CPU-device kernel's hardware fault hit, said against the launch's arguments.

A kernel thread that faults (SIGSEGV, SIGBUS, SIGFPE) comes back from the host module as a fault record with
the faulting address (templates/include_host/kspec_host/entry.h). The message gains the argument buffer
nearest to that address: which argument, and how far before, inside or past it, so that an index off by a
thousand elements reads as "3984 bytes past the end of argument 0 (16 bytes at 0x...)". In checked mode
(kspec/runtime/host/_checked.py) addresses in a staging region are said as the kernel meant them.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import Any

from ..._errors import HostUnsupportedError, KernelFaultError, KernelIndexError
from . import _checked

_LOWEST_POINTER = 1 << 16  # a smaller 8-byte value is a number, not an address (the first pages are never mapped)


def argument_pointers(params: int, param_sizes: Sequence[int] | None) -> list[tuple[int, int]]:
    """(argument index, value) of each 8-byte argument of CUDA-style ``kernelParams`` at ``params`` whose value
    could be an address."""
    if not params or not param_sizes:
        return []
    slots = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
    found = []
    for index, size in enumerate(param_sizes):
        if size != 8 or not slots[index]:
            continue
        value = ctypes.c_uint64.from_address(slots[index]).value
        if value >= _LOWEST_POINTER:
            found.append((index, value))
    return found


def nearest_argument(address: int, pointers: Sequence[tuple[int, int]], size_of: Callable[[int], int | None],
                     elements: dict[int, tuple[int, str]] | None = None) -> str:  # fmt: skip
    """'N bytes past the end of argument I (S bytes at 0x...)' for the argument buffer nearest ``address``;
    ``size_of(pointer)`` is a buffer's size when the device allocated it, else None (then the distance is
    from the buffer's start). ``elements``: (itemsize, dtype) of the NumPy arrays the launch was given, by address:
    the element the kernel reached is named too (``element 1000 of its 4 float32 elements``). '' when there is no
    pointer argument."""
    best: tuple[int, str] | None = None
    for index, start in pointers:
        size = size_of(start)
        text = _nearest_text(address, index, start, size)
        element = (elements or {}).get(start)
        if element is not None and size is not None:
            itemsize, dtype = element
            text += f": element {(address - start) // itemsize} of its {size // itemsize} {dtype} elements"
        distance = _distance(address, start, size)
        if best is None or distance < best[0]:
            best = (distance, text)
    return best[1] if best else ""


def _distance(address: int, start: int, size: int | None) -> int:
    if size is None:
        return abs(address - start)
    return start - address if address < start else max(0, address - (start + size))


def _nearest_text(address: int, index: int, start: int, size: int | None) -> str:
    if size is not None:
        where = f"argument {index} ({size} bytes at {start:#x})"
        if address < start:
            return f"{start - address} bytes before the start of {where}"
        if address < start + size:
            return f"byte {address - start} of {where}"
        gap = address - (start + size)
        return f"{gap} bytes past the end of {where}" if gap else f"just past the end of {where}"
    offset = address - start
    side = "after" if offset >= 0 else "before"
    return f"{abs(offset)} bytes {side} the start of argument {index} (at {start:#x}, size unknown to the device)"


_FAULT_SIGNAL, _FAULT_BOUNDS, _FAULT_UNSUPPORTED = 5, 1, 3  # entry.h's fault codes
UNKNOWN_ADDRESS = (1 << 64) - 1  # signals.cc: a fault whose address the CPU does not report


def fault_error(fn: Any, code: int, message: str, fault_address: int, params: int,
                size_of: Callable[[int], int | None], staging: Any = None, written: Sequence[int] = (),
                elements: dict[int, tuple[int, str]] | None = None) -> Exception:  # fmt: skip
    """The exception for a host launch that returned fault ``code`` (entry.h), or (code 0) whose checked
    launch found ``written``: addresses written in the slack before a buffer."""
    sizes = staging.sizes if staging is not None else {}

    def size(pointer: int) -> int | None:
        known = sizes.get(pointer)
        return known if known is not None else size_of(pointer)

    pointers = argument_pointers(params, fn.param_sizes)
    if not code:
        near = nearest_argument(written[0], pointers, size, elements)
        return KernelFaultError(f"kernel {fn.name!r}: checked mode found a write {near} after the launch (the "
                                "slack before each buffer is checked when the kernel ends; which block and "
                                "thread wrote it is not known)")  # fmt: skip
    message = message or f"kernel {fn.name!r} failed (code {code})"
    if code == _FAULT_SIGNAL and fault_address == UNKNOWN_ADDRESS:
        return KernelFaultError(message)
    if code == _FAULT_SIGNAL:  # a hardware fault: say where against the arguments
        if staging is not None:
            meant = staging.original(fault_address)
            if meant != fault_address:
                message = message.replace(hex(fault_address), hex(meant))
                fault_address = meant
        near = nearest_argument(fault_address, pointers, size, elements)
        return KernelFaultError(f"{message}: {near}" if near else message)
    if code == _FAULT_BOUNDS:
        return KernelIndexError(message)
    if code == _FAULT_UNSUPPORTED:
        return HostUnsupportedError(message)
    return KernelFaultError(message)


def run_launch(fn: Any, grid: tuple[int, int, int], block: tuple[int, int, int], shared: int, threads: int,
               params: int, arrays: Sequence[Any], size_of: Callable[[int], int | None],
               own_region: Callable[[int], Any]) -> None:  # fmt: skip
    """Run one launch of host function ``fn`` (a HostFunction), in checked mode when it is on (``arrays``: the
    NumPy arguments to stage); raise its fault as a kspec error."""
    if not _checked.state[0] or fn.param_sizes is None:
        code, message, fault_address = fn.launch(grid, block, shared, threads, params)
        if code:
            raise fault_error(fn, code, message, fault_address, params, size_of, elements=_elements(arrays))
        return
    staging = _checked.Staging(params, fn.param_sizes, arrays, own_region)
    try:
        code, message, fault_address = fn.launch(grid, block, shared, threads, staging.params)
    finally:
        written = staging.finish()
    if code or written:
        raise fault_error(fn, code, message, fault_address, params, size_of, staging, written, _elements(arrays))


def _elements(arrays: Sequence[Any]) -> dict[int, tuple[int, str]]:
    """(itemsize, dtype name) of each NumPy argument, by address: to name the element a fault reached."""
    return {a.ctypes.data: (a.itemsize, a.dtype.name) for a in arrays if hasattr(a, "ctypes") and a.itemsize}
