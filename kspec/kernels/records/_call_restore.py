"""A prepared call as data and back: what a call record (:mod:`._call_store`) keeps of a planned call, and the
prepared call a later process makes from it without binding or planning.

A description is a tuple of plain values (``marshal`` writes it as it is)::

    (name, device, library, arrays, scalars, outputs, nargs, cupy_rules, shape, workspace, result, steps, used)

``arrays``, ``scalars`` (position, parameter, dtype) and ``outputs`` are the :class:`~..callpath._prepared.CallLayout`'s
(a scalar's Python type is the call's argument type at its position: part of the signature); ``steps`` hold
per launch its binary (cache key, lowered entry), grid, block, label, whether it depends on the one before,
and its frame (:meth:`~..callpath._frame.Frame.describe`); ``used`` is the ``_cached_codes`` key of the call's
specialization (None where unknown).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..._errors import KspecTypeError, kernel_label
from ...runtime import default_stream_getter, refuse_while_capturing, stream_handle
from ..binaries import cached_function, module_loaded
from ..callpath import CallLayout, Frame, PreparedCall, Step

DEVICE = 1  # a description's device (the call records of a file are all one device's)
USED = 12


def describe(prepared: PreparedCall, used: Any) -> tuple[Any, ...] | None:
    """A prepared call as a description (``used``: its specialization's ``_cached_codes`` key), or None where it
    cannot be one: a launch whose binary the binary cache does not hold, a texture argument."""
    layout, steps, out_shape, workspace, result = prepared.parts
    if any(step.binary is None for step in steps) or any(texture for *_s, texture in layout.scalars):
        return None
    return (
        prepared.kernel_name, prepared.device_id, layout.library, tuple(layout.arrays),
        tuple((i, name, dtype) for i, name, dtype, _type, _texture in layout.scalars), tuple(layout.outputs),
        layout.nargs, layout.cupy_rules, tuple(out_shape), workspace, (result[0], tuple(result[1])),
        tuple((*step.binary, step.grid, step.block, step.what, step.dependent, *step.frame.describe())  # type: ignore[misc]
              for step in steps),
        used,
    )  # fmt: skip


def restore(described: tuple[Any, ...], types: tuple[type, ...], stream: object,
            binary: Callable[[str], bytes | None]) -> PreparedCall | None:  # fmt: skip
    """The prepared call a description holds, its binaries loaded (``binary``: the record's copy by cache key,
    else the binary cache's); None where one is nowhere or the description does not fit the call (the call
    then plans). ``stream``: the call's; a first load while it captures a graph raises as planning would."""
    try:
        name, device_id, library, arrays, scalars, outputs, nargs, cupy_rules, shape, workspace, result, steps, _u = described
        if nargs != len(types):
            return None
        layout = CallLayout(library, arrays, tuple((i, p, dtype, types[i], False) for i, p, dtype in scalars),
                            outputs, nargs, cupy_rules)  # fmt: skip
        if not all(module_loaded(step[0], device_id) for step in steps):
            try:
                handle = default_stream_getter(library)(device_id) if stream is None else stream_handle(stream)
            except KspecTypeError:  # not a stream: planning says so, naming the kernel
                return None
            refuse_while_capturing(handle, kernel_label(name))
        made = []
        for key, entry, grid, block, what, dependent, *frame in steps:
            fn = cached_function(key, entry, device_id, name, binary)
            if fn is None:
                return None
            made.append(Step(fn, grid, block, what, Frame.restored(frame), dependent, (key, entry)))
        return PreparedCall(name, layout, device_id, made, shape, workspace, result)
    except (TypeError, ValueError, IndexError):  # not a description this code wrote: the call plans
        return None
