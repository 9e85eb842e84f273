"""Immutable value records on ``__slots__``: what ``@dataclass(frozen=True)`` gave, at the cost of a plain class.

A frozen dataclass exec()s generated source for its methods (~0.5 ms a class at import, plus ~1 ms to import
``dataclasses``), which a process serving precompiled kernels would pay before its first launch. Most records
are NamedTuples; those that cannot be (a field ``count`` or ``index`` clashes with a tuple method) or should
not be tuples subclass :class:`Record`, which generates nothing: defining one costs what defining a class costs.

A record lists its fields, in order, as its ``__slots__`` and writes its own ``__init__`` (typed, with its
defaults) that stores each field with :func:`assign` and then all of them, as a tuple, in ``_values``:
equality, hashing, ordering (:class:`OrderedRecord`), ``repr`` and pickling work on that tuple. Keeping it
costs a line per class and makes a record as fast to build as the dataclass was and faster to compare and
hash (variants are dict keys on the launch path); field reads stay plain slot reads.
"""

from __future__ import annotations

from typing import Any, ClassVar

# Stores a field in a record's __init__ (assignment through the instance raises: records are immutable).
assign = object.__setattr__


class Record:
    """Value semantics over the fields, like a frozen dataclass: equal to a record of the same class with
    equal fields, hashed by them, and ``repr`` / pickling / copying by them."""

    __slots__ = ("_values",)
    _values: tuple[Any, ...]  # every field's value, in the order of _fields (set by __init__)
    _fields: ClassVar[tuple[str, ...]] = ()  # the fields, in order: the __slots__ of the class and its bases

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        cls._fields = (*cls._fields, *cls.__dict__.get("__slots__", ()))

    def _store(self, *values: Any) -> None:
        """Set every field, in the order of ``_fields``, and ``_values``: an ``__init__`` in one line, for
        records made once per kernel (hot ones assign each field by name, which is ~170 ns faster)."""
        for name, value in zip(self._fields, values, strict=True):
            assign(self, name, value)
        assign(self, "_values", values)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}: {type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}: {type(self).__name__} is immutable")

    def __eq__(self, other: Any) -> bool:
        if other.__class__ is self.__class__:
            return self._values == other._values
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in zip(self._fields, self._values))
        return f"{type(self).__qualname__}({fields})"

    def __reduce__(self) -> tuple[type, tuple[Any, ...]]:
        # rebuilt through __init__: the default protocol would restore the slots with setattr, which raises
        return type(self), self._values


class OrderedRecord(Record):
    """A :class:`Record` ordered as the tuple of its fields (``@dataclass(order=True)``)."""

    __slots__ = ()

    def __lt__(self, other: Any) -> bool:
        if other.__class__ is self.__class__:
            return self._values < other._values
        return NotImplemented

    def __le__(self, other: Any) -> bool:
        if other.__class__ is self.__class__:
            return self._values <= other._values
        return NotImplemented

    def __gt__(self, other: Any) -> bool:
        if other.__class__ is self.__class__:
            return self._values > other._values
        return NotImplemented

    def __ge__(self, other: Any) -> bool:
        if other.__class__ is self.__class__:
            return self._values >= other._values
        return NotImplemented
