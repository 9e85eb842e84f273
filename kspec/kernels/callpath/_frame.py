"""Kernel-parameter buffers built from a rendered module's launch ABI (:mod:`kspec.render._abi`).

A :class:`Frame` holds the bytes of one entry point's parameters with everything that does not change
between calls of one plan written once (shapes, strides, sizes); a call writes only the pointers and the
scalar values, at offsets computed here, into a buffer of its thread, and passes ``cuLaunchKernel`` the
address of a ``void*`` array pointing at each slot.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np

from ...render import EntryAbi

# The field holding the device pointer of each slot kind that carries one.
_POINTER_FIELD = {
    "array": "value",
    "strided_array": "ptr",
    "reduce_array": "ptr",
    "raw_view": "ptr_",
    "workspace": "ptr",
}
_U64 = struct.Struct("<Q")


class Frame:
    """One entry point's parameter buffer: static values from ``static``, per-call pointers and scalars.

    ``static`` maps a slot name (:attr:`kspec.render.Slot.name`) to a dict of field values (struct slots;
    an array field takes a sequence, zero-filled past its end) or to a plain value (value slots).
    ``pointer_offset(name)`` and ``scalar_offset(name)`` give where a call writes its values.
    """

    def __init__(self, abi: EntryAbi, static: Mapping[str, Any]) -> None:
        record = np.zeros((), abi.numpy_dtype())
        for slot in abi.slots:
            value = static.get(slot.name)
            if value is None:
                continue
            target = record[slot.name]
            if not slot.layout.struct:
                target["value"] = value
                continue
            for name, field_value in value.items():
                f = slot.layout.field(name)
                if f.is_array:
                    seq = list(field_value)
                    target[name][: len(seq)] = seq
                else:
                    target[name] = field_value
        self.abi = abi
        self.size = max(abi.size, 8)
        self.static = record.tobytes().ljust(self.size, b"\0")
        self._pointers: dict[str, int] = {}
        self._scalars: dict[str, int] = {}
        for slot, offset in zip(abi.slots, abi.offsets):
            field_name = _POINTER_FIELD.get(slot.kind)
            if field_name is not None:
                self._pointers[slot.name] = offset + slot.layout.field(field_name).offset
            elif slot.kind == "scalar":
                self._scalars[slot.name] = offset
        self._slot_offsets = tuple(abi.offsets)
        self._local = threading.local()

    def describe(self) -> tuple[bytes, tuple[int, ...], tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]:
        """The frame as data (a call record keeps it): static bytes, slot offsets, pointer and scalar offsets."""
        return self.static, self._slot_offsets, tuple(self._pointers.items()), tuple(self._scalars.items())

    @classmethod
    def restored(cls, described: Any) -> Frame:
        """The frame :meth:`describe` wrote (its ``abi`` is not kept: None)."""
        static, slots, pointers, scalars = described
        frame = object.__new__(cls)
        frame.abi = None
        frame.static = bytes(static)
        frame.size = len(frame.static)
        frame._pointers = dict(pointers)
        frame._scalars = dict(scalars)
        frame._slot_offsets = tuple(slots)
        frame._local = threading.local()
        return frame

    def pointer_offset(self, name: str) -> int | None:
        return self._pointers.get(name)

    def scalar_offset(self, name: str) -> int | None:
        return self._scalars.get(name)

    def pointer_slots(self) -> dict[str, int]:
        """Each parameter holding a device pointer -> the offset of the pointer in the buffer."""
        return dict(self._pointers)

    @property
    def slot_offsets(self) -> tuple[int, ...]:
        """The offset of each kernel parameter in the buffer, in parameter order."""
        return self._slot_offsets

    @property
    def thread_local(self) -> threading.local:
        """Where :meth:`buffer` keeps each thread's ``buf`` and ``address`` (read directly by generated calls)."""
        return self._local

    def buffer(self) -> tuple[Any, int]:
        """This thread's parameter buffer (static values written) and the ``kernelParams`` address for it.

        Per thread: the driver bindings release the GIL during a launch, so threads must not share one."""
        local = self._local
        buf = getattr(local, "buf", None)
        if buf is None:
            buf = local.buf = ctypes.create_string_buffer(self.static, self.size)
            base = ctypes.addressof(buf)
            local.params = (ctypes.c_void_p * max(1, len(self._slot_offsets)))(
                *[base + off for off in self._slot_offsets]
            )
            local.address = int(ctypes.addressof(local.params))
        return buf, local.address

    def fill(self, pointers: Mapping[str, int], scalars: Mapping[str, bytes]) -> int:
        """Write one call's values into this thread's buffer; returns the address for ``kernelParams``."""
        buf, address = self.buffer()
        for name, offset in self._pointers.items():
            _U64.pack_into(buf, offset, pointers.get(name, 0))
        for name, offset in self._scalars.items():
            value = scalars[name]
            ctypes.memmove(ctypes.addressof(buf) + offset, value, len(value))
        return address
