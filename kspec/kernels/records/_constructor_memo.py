"""Constructor calls made before: an identical CuPy-style constructor call shares what the first one built.

Code written for CuPy builds kernels inside functions, on every call (cupyx.scipy does it throughout), and
CuPy's constructors cost about 3 us. kspec's build a spec, check it and hash it (tens of microseconds), and a
new object's first call would plan again what an identical kernel already planned. So each constructor
keeps, under its exact arguments, the state its first call built (the spec, its key and the kernel's
prepared calls for ElementwiseKernel and ReductionKernel; the compiled programs and loaded modules for
RawModule), and a later identical call adopts it.

A key is the arguments as given; calls whose flags are not exact bools are not remembered, and a value
whose type changes what is built is keyed with its type (see :class:`ConstructorMemo`).
Each memo is bounded: past :data:`MEMO_ENTRIES` the oldest entry goes (the objects already made keep what
they adopted). What a user may set on one object (a RawKernel's function attributes) is never shared: see
:mod:`..raw._module`.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Any

MEMO_ENTRIES = 1024  # per memo: constructor calls remembered
UNKEYED: Any = object()  # a constructor call whose arguments cannot be a memo key


class ConstructorMemo:
    """Constructor arguments -> the state their first call built; bounded, oldest entry first out.

    A key is the arguments as given (a tuple), where only values of one type can compare equal: the callers
    key a call only when its flags are exact bools (``reduce_dims=1`` is not remembered, so a later
    ``reduce_dims=1.0`` cannot find the entry of ``True`` and skip the check that refuses it), and add the
    type of a value whose type changes what is built (a reduction's ``identity``: ``0``, ``0.0``, ``False``).
    A key that cannot be hashed (a list among the arguments) is a call that is not remembered."""

    def __init__(self, max_entries: int = MEMO_ENTRIES) -> None:
        self._table: dict[Hashable, Any] = {}
        self._max = max_entries
        self._lock = threading.Lock()
        # The state remembered under a hashable key, or None: the fast path of a call made before, a dict's own
        # get (no Python frame).
        self.get = self._table.get

    def find(self, key: tuple[Any, ...] | None) -> tuple[Hashable | None, Any]:
        """(key, the state remembered under it or None); the key becomes None when it cannot be one."""
        if key is None:
            return None, None
        try:
            return key, self._table.get(key)
        except TypeError:  # an unhashable argument
            return None, None

    def put(self, key: Hashable | None, state: Any) -> None:
        if key is None:
            return
        with self._lock:
            while len(self._table) >= self._max:
                del self._table[next(iter(self._table))]
            self._table[key] = state

    def clear(self) -> None:
        with self._lock:
            self._table.clear()

    def __len__(self) -> int:
        return len(self._table)


SPEC_KERNELS = ConstructorMemo()  # ElementwiseKernel / ReductionKernel calls (the class is part of the key), and
# kernels unpickled, keyed (class, "unpickled", spec digest, binaries, rules): kspec/kernels/_pickling.py
RAW_MODULES = ConstructorMemo()  # RawModule(code=...) calls, RawKernel's own modules included


def clear_constructor_memos() -> None:
    """Forget every constructor call (objects already made keep their state)."""
    SPEC_KERNELS.clear()
    RAW_MODULES.clear()

