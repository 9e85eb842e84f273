"""A call's signature: what the hot path reads of each argument, one reader per array library.

A spec kernel's call is keyed by its *signature*: per argument its type and, for arrays, shape, byte
strides, dtype and device (the device only in a process with several), plus the call's keyword values
(``extra``). Nothing in a signature depends on pointer or scalar values, so one prepared call
(:mod:`._prepared`) serves every call with it.

:data:`READS` says, per array library, which attributes give the key and the pointer: the cheapest ones
each library has. From it, :func:`make_dispatcher` generates, per tuple of argument types, a *dispatcher*
(check the types, read the key and the pointers, look the key up, launch) and its *reader* (the same reads,
for the miss path). Generated rather than written as a loop over the arguments: a loop costs a few
microseconds per call, CuPy's whole Cython call under two (benchmarks/kernels/bench.py, "host cost").

A call with no array (scalars and ``size=`` only) runs on the current device and allocates its outputs where
its stream's library or the process's CuPy says (:func:`kspec.kernels.planning._binding.library_without_arrays`): its
key holds the current device, the type of ``stream=`` and whether CuPy is imported.

Arrays given through ``__cuda_array_interface__`` are keyed from its dict in a one-device process
(:func:`cai_entry`); their producer's ``stream`` is no part of the key but is ordered before every launch.
DLPack, JAX and Numba arrays, and types no reader knows, have no dispatcher: their calls always plan.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..._named_tuple import NamedTuple
from ...runtime import (CAI, CUPY, HOST, KSPEC, TORCH, accepts_kind, current_device_id, fastcall_module,
                       initialized_device_count, is_texture_type, kind_of, prepare_cupy_layout, protocol_library,
                       protocol_library_of)
from ..._generated_code import compiled

MISS: Any = object()  # "not served here": the caller plans the call
MAX_ENTRIES = 256  # prepared calls per argument-type tuple; past it the table starts over (calls stay correct)
SCALAR_TYPES = (bool, int, float, complex)

# Per kind: (lines run first, key items, pointer) of argument ``a{i}``; ``{miss}`` is what a line returns
# when the argument cannot be keyed after all. Several devices: the device is part of the key.
READS: dict[str, tuple[str, str, str]] = {
    CUPY: ("m{i} = a{i}.data", "a{i}.shape, a{i}.strides, a{i}.dtype, m{i}.device_id", "m{i}.ptr"),
    # get_device() also tells a host tensor (-1) from a device one: read on a one-device machine too
    # a tensor that requires grad under grad mode: autograd records the call (the miss path hands it to kspec.torch)
    TORCH: ("if a{i}.requires_grad and grad_on(): return {miss}", "a{i}.shape, a{i}.stride(), a{i}.dtype, a{i}.get_device()",
            "a{i}.data_ptr()"),
    # DeviceArray's slots: the per-call hot path (allow-listed in tests/project_tests/test_layers.py)
    KSPEC: ("", "a{i}._shape, a{i}._strides, a{i}._dtype, a{i}._device_id", "a{i}._ptr"),
    # NumPy arrays are device arrays on the CPU device only: checked per call (the device may change)
    HOST: ("if not host_ok(HOST): return {miss}", "a{i}.shape, a{i}.strides, a{i}.dtype, a{i}.flags.writeable",
           "a{i}.ctypes.data"),
    CAI: ("e{i} = cai_entry(a{i})\nif e{i} is None: return {miss}", "e{i}[0]", "e{i}[1]"),
}
# One device: every CuPy and kspec array is on device 0, so the device need not be read.
ONE_DEVICE_READS = {
    **READS,
    CUPY: ("", "a{i}.shape, a{i}.strides, a{i}.dtype", "a{i}.data.ptr"),
    KSPEC: ("", "a{i}._shape, a{i}._strides, a{i}._dtype", "a{i}._ptr"),
}


def cai_entry(a: Any) -> tuple[tuple[Any, ...], int, Any] | None:
    """(key, pointer, producer stream or None) of an array given through ``__cuda_array_interface__``, or None
    where the call must plan: a process with several devices (the pointer's device is a driver query),
    JAX and Numba arrays (outputs go back as theirs), a dict binding refuses or explains. The key holds what
    binding and planning read (shape, typestr, strides, read-only flag); binding checked the rest (version,
    mask, byte order) when the call was planned."""
    if initialized_device_count() != 1:
        return None
    cai = getattr(a, "__cuda_array_interface__", None)  # an instance attribute in simple wrappers
    if type(cai) is not dict or cai.get("mask") is not None or protocol_library(a) is not None:
        return None
    try:
        version = cai.get("version", 0)
        if type(version) is not int or version < 2:
            return None
        strides = cai.get("strides")
        data = cai["data"]
        key = (type(a), tuple(cai["shape"]), cai["typestr"], None if strides is None else tuple(strides), bool(data[1]))
        hash(key)
        return key, int(data[0] or 0), cai.get("stream")
    except (KeyError, TypeError, IndexError, ValueError):
        return None


# The compiled dispatcher's argument kinds (kspec/_fastcall_c/'s enum Kind): the same reads as READS.
# `__cuda_array_interface__` inputs (7) only in a one-device process, as cai_entry reads them.
_NATIVE_KINDS: dict[tuple[str | None, bool], int] = {
    (CUPY, False): 1, (TORCH, False): 2, (KSPEC, False): 3, (HOST, False): 4, (CAI, False): 7,
    (CUPY, True): 5, (TORCH, True): 2, (KSPEC, True): 6, (HOST, True): 4,
}  # fmt: skip
_CUPY_KINDS = frozenset({_NATIVE_KINDS[(CUPY, False)], _NATIVE_KINDS[(CUPY, True)]})


def native_kinds(types: tuple[type, ...], several_devices: bool) -> tuple[int, ...] | None:
    """Per argument type its compiled dispatcher's kind (0: a scalar or texture), or None where a type needs
    the Python dispatcher (JAX and Numba arrays, which always plan) or the call has no array."""
    kinds = []
    for tp in types:
        if tp in SCALAR_TYPES or issubclass(tp, np.generic) or is_texture_type(tp):
            kinds.append(0)
            continue
        kind = _NATIVE_KINDS.get((kind_of(tp) or CAI, several_devices))
        if kind is None or (kind == 4 and tp is not np.ndarray) or (kind == 7 and protocol_library_of(tp) is not None):
            return None
        kinds.append(kind)
    return tuple(kinds) if any(kinds) else None


def argument_reads(tp: type, several_devices: bool) -> tuple[str, str, str] | None:
    """(lines, key items, pointer) reading an argument of type ``tp``, with ``{i}`` for its position and
    ``{miss}`` for what to return when it cannot be keyed; ``("", "", "0")`` for a scalar or texture (its type
    is checked, its value packed by the launch); None for a type that always plans."""
    if tp in SCALAR_TYPES or issubclass(tp, np.generic) or is_texture_type(tp):
        return "", "", "0"
    kind = kind_of(tp)
    if kind == HOST and tp is not np.ndarray:
        return None
    if kind is None:
        kind = CAI  # maybe an instance-attribute interface: cai_entry tells, per call
    return (READS if several_devices else ONE_DEVICE_READS).get(kind)


class Dispatcher(NamedTuple):
    """The generated functions of one argument-type tuple and their table of prepared calls.

    ``dispatch(args, stream=None, extra=None)``: the call's result, or :data:`MISS` (new key, other types);
    ``read(args, stream=None)``: (key items, pointers, producer streams), or None when an argument cannot be
    keyed (``stream`` as the call gave it). A table key is ``(extra, *key items)``."""

    dispatch: Callable[..., Any]
    read: Callable[..., tuple[tuple[Any, ...], tuple[int, ...], list[Any]] | None]
    table: dict[Any, Any]


def make_dispatcher(types: tuple[type, ...], several_devices: bool, entered: Sequence[int],
                    current_stream: Callable[[], Any]) -> Dispatcher | None:
    """The dispatcher of one argument-type tuple (see :class:`Dispatcher`), or None when a type has no
    reader (the call always plans). ``entered``/``current_stream``: a ``with kspec.Stream`` block's stream
    is the call's when no ``stream=`` is given."""
    recipe = _recipes.get((types, several_devices))
    if recipe is None:
        if len(_recipes) >= MAX_ENTRIES:
            _recipes.clear()
        recipe = _recipes[(types, several_devices)] = _recipe(types, several_devices)
    if recipe is None:
        return None
    make, kinds = recipe
    table: dict[Any, Any] = {}
    dispatch, read = make(table.get, entered, current_stream)
    fastcall = fastcall_module()
    if kinds is not None and fastcall is not None and isinstance(entered, list):  # the same reads, in C
        if _CUPY_KINDS.intersection(kinds):  # CuPy arrays: read as CuPy's Cython code reads them, where that holds
            prepare_cupy_layout()
        dispatch = fastcall.dispatcher(types, kinds, table, entered, current_stream, accepts_kind, HOST, MISS)
    return Dispatcher(dispatch, read, table)


# (argument types, several devices) -> (the maker of a kernel's dispatcher functions: (table_get, entered,
# current_stream) -> (dispatch, read); the C dispatcher's kinds or None), or None: made once per tuple, so a
# kernel's dispatcher is two closures over its table, not a compile or an exec
_recipes: dict[tuple[tuple[type, ...], bool], tuple[Callable[..., Any], tuple[int, ...] | None] | None] = {}


def _recipe(types: tuple[type, ...], several_devices: bool) -> tuple[Callable[..., Any], tuple[int, ...] | None] | None:
    """The maker of :func:`make_dispatcher`'s functions for an argument-type tuple (generated, compiled and run
    once: each kernel then makes its dispatcher by one call of it), or None when a type has no reader."""
    reads = [argument_reads(tp, several_devices) for tp in types]
    if any(r is None for r in reads):
        return None
    lines_d, lines_r, keys, pointers, producers = [], [], [], [], []
    for i, read in enumerate(reads):
        assert read is not None
        first, key, pointer = (s.format(i=i, miss="{miss}") for s in read)
        for line in filter(None, first.split("\n")):
            lines_d.append(line.format(miss="MISS"))
            lines_r.append(line.format(miss="None"))
        if key:
            keys.append(key)
        pointers.append(pointer)
        if first.startswith(f"e{i} ="):
            producers.append(f"e{i}[2]")
    if not keys:  # no array: where the call runs and allocates (the module docstring)
        keys.append("current_device(), type(stream), 'cupy' in modules")
    unpack = f"({''.join(f'a{i}, ' for i in range(len(types)))}) = args"  # "() = args" for a kernel without inputs
    check = " or ".join(f"type(a{i}) is not T{i}" for i in range(len(types))) or "False"
    key_items = f"({''.join(k + ', ' for k in keys)})"
    order = ""
    ordered = f"[s for s in ({''.join(p + ', ' for p in producers)}) if s is not None]" if producers else "[]"
    if producers:  # CAI inputs: their producers' streams, ordered before every launch
        order = (f"    producers = [s for s in ({', '.join(producers)},) if s is not None]\n"
                 "    if producers:\n        prepared.order_producers(producers, stream)\n")
    body = (
        "def dispatch(args, stream=None, extra=None):\n"
        f"    try:\n        {unpack}\n    except ValueError:\n        return MISS\n"
        f"    if {check}:\n        return MISS\n"
        + "".join(f"    {line}\n" for line in lines_d)
        + f"    prepared = table_get((extra, {''.join(k + ', ' for k in keys)}))\n"
        "    if prepared is None:\n        return MISS\n"
        "    if stream is None and entered[0]:\n        stream = current_stream()\n"
        + order
        + f"    return prepared.launch(args, stream, {', '.join(pointers)})\n\n"
        "def read(args, stream=None):\n"
        f"    {unpack}\n"
        + "".join(f"    {line}\n" for line in lines_r)
        + f"    return {key_items}, ({''.join(p + ', ' for p in pointers)}), {ordered}\n"
    )
    source = ("def make(table_get, entered, current_stream):\n"
              + "".join(f"    {line}\n" if line else "\n" for line in body.splitlines())
              + "    return dispatch, read\n")  # fmt: skip
    ns: dict[str, Any] = {f"T{i}": tp for i, tp in enumerate(types)}
    ns.update(MISS=MISS, cai_entry=cai_entry, host_ok=accepts_kind, HOST=HOST, current_device=current_device_id,
              modules=sys.modules, grad_on=getattr(sys.modules.get("torch"), "is_grad_enabled", None))  # fmt: skip
    exec(compiled(source, "dispatcher"), ns)
    return ns["make"], native_kinds(types, several_devices)
