"""The repeated-call fast path of ElementwiseKernel: two small functions generated per kernel.

A call whose signature was seen before needs only the argument pointers, the scalar values and one
``cuLaunchKernel``. Written generically (loops over the arguments, a dict of outputs, a results list) that
costs about 4 us of Python on top of the launch; CuPy's Cython call costs under 2 us. So two functions are
generated, with every per-call decision taken when they are made:

* a *stub* per tuple of argument types (``(cupy.ndarray, cupy.ndarray, float)``): it checks the types,
  reads each array's shape, strides, dtype, device and pointer through its library's cheapest attributes
  (the same values :func:`kspec.kernels._prepared.signature` reads), and looks the flat tuple up in a table;
* a *direct call* per prepared call (one launch, no workspace): it writes the pointers with one
  ``struct.pack_into`` per run of adjacent slots, packs the scalars, allocates the outputs, launches, and
  returns what the kernel returns.

A miss (other types, a new shape, keyword arguments) returns :data:`MISS` and the caller takes the full
path, which prepares the call and registers it here. benchmarks/bench.py ("host cost") measures the gain.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..runtime import CUPY, KSPEC, TORCH, kind_of

MISS: Any = object()  # "not served here": the caller takes the full path
_SCALAR_TYPES = (bool, int, float, complex)
MAX_ENTRIES = 256  # per argument-type tuple; past it the table starts over (calls stay correct, only slower)

# Per library: what to read of array ``a{i}`` for the key, and its pointer (``m{i}`` is read first, if given).
_ARRAY_READS = {
    CUPY: ("m{i} = a{i}.data", "a{i}.shape, a{i}.strides, a{i}.dtype, m{i}.device_id", "m{i}.ptr"),
    # get_device() also tells a host tensor (-1) from a device one: kept on a one-device machine too
    TORCH: ("", "a{i}.shape, a{i}.stride(), a{i}.dtype, a{i}.get_device()", "a{i}.data_ptr()"),
    # DeviceArray's slots: the per-call hot path (allow-listed in tests/test_layers.py, as in _prepared.py)
    KSPEC: ("", "a{i}._shape, a{i}._strides, a{i}._dtype, a{i}._device_id", "a{i}._ptr"),
}
# On a machine with one device every CuPy and kspec array is on device 0: the device need not be read.
_ONE_DEVICE_READS = {
    **_ARRAY_READS,
    CUPY: ("", "a{i}.shape, a{i}.strides, a{i}.dtype", "a{i}.data.ptr"),
    KSPEC: ("", "a{i}._shape, a{i}._strides, a{i}._dtype", "a{i}._ptr"),
}


def _compile(source: str, name: str, namespace: dict[str, Any]) -> Any:
    exec(compile(source, f"<kspec fast path: {name}>", "exec"), namespace)
    return namespace[name]


class Stubs:
    """One kernel's fast path: argument-type tuple -> (stub, table of flat keys -> direct calls)."""

    def __init__(self, stream_entered: Sequence[int], current_stream: Callable[[], Any], device_count: Callable[[], int]) -> None:
        self._entered = stream_entered
        self._current_stream = current_stream
        self._device_count = device_count  # the machine's, known once the driver is up (when calls register)
        self._by_types: dict[tuple[type, ...], tuple[Callable[..., Any], Callable[..., Any], dict[Any, Any]]] = {}
        self.call: Callable[[tuple[Any, ...], Any], Any] = _miss  # the stub of the latest argument types

    def register(self, args: tuple[Any, ...], direct: Callable[..., Any]) -> None:
        """Serve later calls with ``args``' signature through ``direct(args, pointers, stream)``."""
        types = tuple(type(a) for a in args)
        entry = self._by_types.get(types)
        if entry is None:
            reads = _ONE_DEVICE_READS if self._device_count() == 1 else _ARRAY_READS
            made = _make_stub(types, reads, self._entered, self._current_stream)
            if made is None:
                return
            entry = self._by_types[types] = made
        stub, key_of, table = entry
        if len(table) >= MAX_ENTRIES:
            table.clear()
        table[key_of(args)] = direct
        self.call = stub


def _miss(args: tuple[Any, ...], stream: Any) -> Any:
    return MISS


def _make_stub(
    types: tuple[type, ...], array_reads: dict[str, tuple[str, str, str]], entered: Sequence[int], current_stream: Callable[[], Any]
) -> Any:
    """(stub, key_of, table) for one tuple of argument types, or None when a type has no fast reading."""
    if not types:
        return None
    names = [f"a{i}" for i in range(len(types))]
    reads, keys, pointers = [], [], []
    for i, tp in enumerate(types):
        kind = kind_of(tp)
        if kind in array_reads:
            first, key, ptr = (s.format(i=i) for s in array_reads[kind])
            if first:
                reads.append(first)
            keys.append(key)
            pointers.append(ptr)
        elif tp in _SCALAR_TYPES or issubclass(tp, np.generic):
            pointers.append("0")  # a scalar's type is checked; its value is packed by the direct call
        else:
            return None
    unpack = f"{', '.join(names)}, = args"
    check = " or ".join(f"type(a{i}) is not T{i}" for i in range(len(types)))
    key = f"({', '.join(keys)},)" if keys else "()"
    body = "\n    ".join(reads)
    source = f"""
def stub(args, stream):
    try:
        {unpack}
    except ValueError:  # another number of arguments
        return MISS
    if {check}:
        return MISS
    {body or 'pass'}
    call = table_get({key})
    if call is None:
        return MISS
    if stream is None and entered[0]:
        stream = current_stream()
    return call(args, stream, {', '.join(pointers)})

def key_of(args):
    {unpack}
    {body or 'pass'}
    return {key}
"""
    table: dict[Any, Any] = {}
    namespace: dict[str, Any] = {f"T{i}": tp for i, tp in enumerate(types)}
    namespace.update(MISS=MISS, table_get=table.get, entered=entered, current_stream=current_stream)
    stub = _compile(source, "stub", namespace)
    return stub, namespace["key_of"], table


def pointer_runs(slots: Sequence[tuple[int, int]]) -> list[tuple[int, list[int]]]:
    """Pointer slots (offset, argument position) -> runs of adjacent 8-byte slots: (first offset, positions)."""
    runs: list[tuple[int, list[int]]] = []
    for offset, position in sorted(slots):
        if runs and runs[-1][0] + 8 * len(runs[-1][1]) == offset:
            runs[-1][1].append(position)
        else:
            runs.append((offset, [position]))
    return runs


_POINTER_OF = {"cupy": "{o}.data.ptr", "torch": "{o}.data_ptr()"}


def make_direct_call(
    *,
    pointer_slots: Sequence[tuple[int, int]],
    scalar_slots: Sequence[tuple[int, int, str | None, Callable[[Any], bytes]]],
    allocations: Sequence[tuple[int | None, str, Callable[[], Any] | None, int | None]],
    result: str,
    nargs: int,
    constants: dict[str, Any],
) -> Callable[..., Any]:
    """The direct call of one prepared launch (see the module docstring): ``direct(args, stream, p0, ...)``
    with one pointer per argument position (0 for scalars).

    ``scalar_slots``: (offset, argument position, struct format or None, packer to bytes); the struct format
    is tried first and anything it refuses goes to the packer, which raises kspec's error. ``allocations``:
    (pointer offset or None, dtype name, quick allocator or None, argument position or None) per output to
    allocate, in order (with a position, an output on the current stream is ``EMPTY_LIKE(args[position])``,
    which the caller found to be the same array as the quick allocator's, made faster); they are
    ``o0``, ``o1``... in ``result``, an expression over ``args`` and those names. ``constants`` holds what the
    code reads: DEVICE, FN, GRID, BLOCK, WHAT, LIBRARY, SHAPE, SEVERAL and the functions default_stream,
    choose_stream, buffer (and LOCAL, the thread-local it fills), launch, relaunch, cu_stream, allocate,
    activate, pointer_of, EMPTY_LIKE.
    """
    ns: dict[str, Any] = dict(constants)
    ns["StructError"] = struct.error
    lines = [
        f"def direct(args, stream, {', '.join(f'p{i}' for i in range(nargs))}):",
        "    handle = default_stream(DEVICE) if stream is None else choose_stream(stream)",
        "    try:  # this thread's parameter buffer (Frame.buffer makes it on the thread's first call)",
        "        buf = LOCAL.buf",
        "        address = LOCAL.address",
        "    except AttributeError:",
        "        buf, address = buffer()",
    ]
    for j, (offset, positions) in enumerate(pointer_runs(pointer_slots)):
        ns[f"PACK{j}"] = struct.Struct("<" + "Q" * len(positions)).pack_into
        lines.append(f"    PACK{j}(buf, {offset}, {', '.join(f'p{i}' for i in positions)})")
    for j, (offset, position, fmt, packer) in enumerate(scalar_slots):
        ns[f"SLOW{j}"] = packer
        slow = [f"v = SLOW{j}(args[{position}])", f"buf[{offset}:{offset} + len(v)] = v"]
        if fmt is None:
            lines += [f"    {s}" for s in slow]
        else:
            ns[f"FAST{j}"] = struct.Struct(fmt).pack_into
            lines += ["    try:", f"        FAST{j}(buf, {offset}, args[{position}])",
                      "    except (StructError, OverflowError):", *(f"        {s}" for s in slow)]
    ns["U64"] = struct.Struct("<Q").pack_into
    library = constants["LIBRARY"]
    for k, (out_offset, dtype, quick, like) in enumerate(allocations):
        ns[f"DT{k}"] = dtype
        slow_alloc = f"allocate(LIBRARY, SHAPE, DT{k}, handle if stream is None else stream, DEVICE)"
        if quick is not None and like is not None:
            lines.append(f"    o{k} = EMPTY_LIKE(args[{like}]) if stream is None else {slow_alloc}")
        elif quick is not None:
            ns[f"QUICK{k}"] = quick
            lines.append(f"    o{k} = QUICK{k}() if stream is None else {slow_alloc}")
        else:
            lines.append(f"    o{k} = {slow_alloc}")
        if out_offset is not None:
            ptr = _POINTER_OF.get(library, "pointer_of({o})").format(o=f"o{k}")
            lines.append(f"    U64(buf, {out_offset}, {ptr})")
    if constants["SEVERAL"]:
        lines.append("    activate(DEVICE)")
    streams: dict[int, Any] = {}  # handle -> the bindings' CUstream, without a call into the runtime

    def new_stream(handle: int) -> Any:
        if len(streams) > 64:  # handles of destroyed streams would otherwise pile up
            streams.clear()
        made = streams[handle] = constants["cu_stream"](handle)
        return made

    ns.update(streams_get=streams.get, new_stream=new_stream)
    lines += [
        "    hs = streams_get(handle)",
        "    if hs is None:",
        "        hs = new_stream(handle)",
        "    (err,) = launch(FN, GRID, 1, 1, BLOCK, 1, 1, 0, hs, address, 0)",
        "    if err:  # nothing was queued: the general launcher retries on a lost context or raises",
        "        relaunch(FN, GRID, BLOCK, address, handle, DEVICE, WHAT)",
        f"    return {result}",
    ]
    return _compile("\n".join(lines) + "\n", "direct", ns)
