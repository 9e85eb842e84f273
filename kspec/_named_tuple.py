"""``NamedTuple`` for kspec's record classes: :class:`typing.NamedTuple` to the type checker, and at run time the
same class made without typing's check of each field's annotation.

typing checks each annotation as a type, and under ``from __future__ import annotations`` every annotation is a
string, which it turns into a ``typing.ForwardRef``: one ``compile()`` per field (142 for the 26 NamedTuples a
generated module's import defines). Nothing in kspec reads them as types at run time. Defining the 26 through
this module instead of typing took 6.6 -> 3.6 ms (fastest of 15; Python 3.11, the CPU machine). The class is the one typing makes:
``collections.namedtuple`` of the annotated fields, the body's defaults, docstring and methods set on it,
``__annotations__`` kept (as the strings; ``typing.get_type_hints`` reads them). Only the class form is
supported (``class Point(NamedTuple): ...``), without ``Generic``.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing import NamedTuple as NamedTuple
else:
    # Names typing.NamedTuple sets itself (typing._special) or refuses in a class body (typing._prohibited).
    _SET_BY_NAMEDTUPLE = frozenset({"__module__", "__name__", "__annotations__"})
    _PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields", "_field_defaults",
                             "_make", "_replace", "_asdict", "_source"})

    class _NamedTupleMeta(type):
        def __new__(cls, typename: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> Any:
            if bases != (NamedTuple,):
                raise TypeError("can only inherit from NamedTuple")
            fields = namespace.get("__annotations__", {})
            defaults = [namespace[name] for name in fields if name in namespace]
            if defaults and any(name not in namespace for name in list(fields)[len(fields) - len(defaults):]):
                raise TypeError(f"{typename}: a field without a default follows one with a default")
            made = collections.namedtuple(typename, fields, defaults=defaults, module=namespace["__module__"])
            made.__annotations__ = dict(fields)
            for key, value in namespace.items():
                if key in _PROHIBITED:
                    raise AttributeError(f"Cannot overwrite NamedTuple attribute {key}")
                if key not in _SET_BY_NAMEDTUPLE and key not in made._fields:
                    setattr(made, key, value)
            return made

    NamedTuple = type.__new__(_NamedTupleMeta, "NamedTuple", (), {"__module__": __name__})

__all__ = ["NamedTuple"]
