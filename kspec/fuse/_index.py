"""Indexing inside a fused function: ``x[...] = v`` / ``x[:] = v`` and basic views of array arguments.

``x[:] = v`` writes ``v`` (a number, or a traced value that broadcasts to ``x``) into the whole array, cast
as NumPy's assignment casts (``unsafe``): the write lands in the argument, as any in-place update does.
Reading ``x[key]`` with a basic key (ints, slices, ``None`` / ``numpy.newaxis``, ``...``) on an array
argument makes a *view* leaf: the trace knows only its ndim, and each call passes ``arg[key]``, which the
argument's own library makes (CuPy, PyTorch; kspec's DeviceArray takes keys that only add axes). Other
indexing depends on data or on shapes the trace does not know and stays an error.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from .._errors import FuseError, FuseIndexError, FuseValueError, KspecTypeError
from . import _graph, _steps
from ._graph import Node
from ._value import Recorder, TraceValue

# One item of a normalized key (hashable, so equal keys share one kernel parameter).
_NEW, _ALL = ("newaxis",), ("ellipsis",)


def setitem(tracer: Recorder, target: TraceValue, key: Any, value: Any) -> None:
    whole = key is Ellipsis or (type(key) is slice and key.start is None and key.stop is None and key.step is None)
    if not whole:  # CuPy's words and type for the same refusal
        tracer.fail(f"x[{_show(key)}] = ...: only the whole array can be assigned inside a fused function",
                    phrase="The fusion supports `[...]` or `[:]`.", error=FuseValueError)
    if target._node.ndim == 0 and key is not Ellipsis:
        tracer.fail("x[:] = ... on a 0-dimensional array: too many indices (use x[...] = ...)")
    node = _steps.as_node(tracer, value, "x[...] = v")
    _steps.assign(tracer, target, node, "x[...] = v", casting="unsafe")


def getitem(tracer: Recorder, value: TraceValue, key: Any) -> TraceValue:
    node = value._node
    if node.kind != _graph.ARG or node.is_scalar or "view" in node.attrs:
        what = "a scalar" if node.is_scalar else "a value computed inside the function (or updated in place)"
        tracer.fail(f"x[{_show(key)}] of {what}: only array arguments, as passed, can be indexed inside a fused "
                    "function; index the argument before the call")
    items = _normalize(tracer, key, node.ndim)
    index = node.attrs["index"]
    found = tracer.views.get((index, items))
    if found is None:
        ndim = sum(1 for item in items if item[0] in ("newaxis", "slice"))
        found = tracer.views[(index, items)] = Node(_graph.ARG, node.dtype, ndim, attrs={"index": index, "view": items})
    return TraceValue(found)


def _normalize(tracer: Recorder, key: Any, ndim: int) -> tuple[tuple[Any, ...], ...]:
    """The key as a tuple of ("int", k) / ("slice", start, stop, step) / ("newaxis",), the ellipsis expanded."""
    items = key if isinstance(key, tuple) else (key,)
    out: list[tuple[Any, ...]] = []
    ellipsis_at = None
    for item in items:
        if item is None:
            out.append(_NEW)
        elif item is Ellipsis:
            if ellipsis_at is not None:
                tracer.fail("an index can only have a single ellipsis ('...')")
            ellipsis_at = len(out)
        elif type(item) is slice:
            out.append(("slice", *(_int(tracer, part, key) for part in (item.start, item.stop, item.step))))
        elif isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_)):
            out.append(("int", int(item)))
        else:
            tracer.fail(f"x[{_show(key)}]: only basic indexing (ints, slices, None, ...) of an array argument is "
                        "supported inside a fused function; boolean and integer-array indexing depend on the data")
    used = sum(1 for item in out if item[0] in ("int", "slice"))
    if used > ndim:
        tracer.fail(f"x[{_show(key)}]: too many indices for array: array is {ndim}-dimensional, but {used} were indexed",
                    error=FuseIndexError)
    fill = [("slice", None, None, None)] * (ndim - used)
    at = len(out) if ellipsis_at is None else ellipsis_at
    return tuple(out[:at] + fill + out[at:])


def _int(tracer: Recorder, part: Any, key: Any) -> int | None:
    if part is None:
        return None
    try:
        return operator.index(part)
    except (TypeError, FuseError):
        tracer.fail(f"x[{_show(key)}]: slice bounds must be Python ints inside a fused function")


def _show(key: Any) -> str:
    items = key if isinstance(key, tuple) else (key,)

    def one(item: Any) -> str:
        if item is Ellipsis:
            return "..."
        if type(item) is slice:
            parts = ["" if p is None else (repr(p) if not isinstance(p, TraceValue) else "<traced>")
                     for p in (item.start, item.stop, item.step)]
            return ":".join(parts[:2]) + (f":{parts[2]}" if parts[2] else "")
        return "<traced>" if isinstance(item, TraceValue) else repr(item)

    return ", ".join(one(i) for i in items)


def key_of(items: tuple[tuple[Any, ...], ...]) -> tuple[Any, ...]:
    """The Python index key of normalized items."""
    rebuilt: list[Any] = []
    for item in items:
        if item[0] == "newaxis":
            rebuilt.append(None)
        elif item[0] == "int":
            rebuilt.append(item[1])
        else:
            rebuilt.append(slice(*item[1:]))
    return tuple(rebuilt)


def view(array: Any, items: tuple[tuple[Any, ...], ...]) -> Any:
    """``array[key]`` for a call's argument: its library's own view; a reshape for a key that only adds axes
    to an array type without indexing (kspec's DeviceArray)."""
    key = key_of(items)
    if hasattr(type(array), "__getitem__"):
        return array[key]
    if all(item[0] == "newaxis" or item == ("slice", None, None, None) for item in items):
        dims = iter(array.shape)
        return array.reshape(tuple(1 if item[0] == "newaxis" else next(dims) for item in items))
    raise KspecTypeError(f"kspec.fuse: a fused function indexes an argument of type {type(array).__name__} "
                         f"with [{_show(key)}], and that type has no indexing; pass a CuPy array or a PyTorch tensor")
