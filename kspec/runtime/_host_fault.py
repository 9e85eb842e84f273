"""Where a CPU-device kernel's hardware fault hit, said against the launch's arguments.

A kernel thread that faults (SIGSEGV, SIGBUS, SIGFPE) comes back from the host module as a fault record with
the faulting address (templates/include_host/kspec_host/entry.h). The message gains the argument buffer
nearest to that address: which argument, and how far before, inside or past it, so that an index off by a
thousand elements reads as "3984 bytes past the end of argument 0 (16 bytes at 0x...)".
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence

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


def nearest_argument(address: int, pointers: Sequence[tuple[int, int]],
                     size_of: Callable[[int], int | None]) -> str:  # fmt: skip
    """'N bytes past the end of argument I (S bytes at 0x...)' for the argument buffer nearest ``address``;
    ``size_of(pointer)`` is a buffer's size when the device allocated it, else None (then the distance is
    from the buffer's start). '' when there is no pointer argument."""
    best: tuple[int, str] | None = None
    for index, start in pointers:
        size = size_of(start)
        if size is not None:
            where = f"argument {index} ({size} bytes at {start:#x})"
            if address < start:
                distance, text = start - address, f"{start - address} bytes before the start of {where}"
            elif address < start + size:
                distance, text = 0, f"byte {address - start} of {where}"
            else:
                gap = address - (start + size)
                distance, text = gap, f"{gap} bytes past the end of {where}"
        else:
            offset = address - start
            distance = abs(offset)
            side = "after" if offset >= 0 else "before"
            text = f"{abs(offset)} bytes {side} the start of argument {index} (at {start:#x}, size unknown to the device)"
        if best is None or distance < best[0]:
            best = (distance, text)
    return best[1] if best else ""
