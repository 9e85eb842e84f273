"""The launch of a prepared call, generated as one function: the only code that launches a spec kernel.

A prepared call (:mod:`._prepared`) knows everything but the pointer and scalar values: its launches'
functions, grids, blocks and parameter frames (:mod:`._frame`), the outputs to allocate and the workspace.
:func:`make_launch` writes that down as the source of one function, with every decision taken when it is
made, and compiles it. The source names its offsets, functions and sizes instead of spelling them, so it
depends only on the call's structure (how many launches, pointer runs, scalars, outputs) and is compiled
once for every kernel of that structure:

``launch(args, stream, p0, ..., pN)``: pick the stream; per launch, write the pointers into this thread's
parameter buffer (one ``struct.pack_into`` per run of adjacent slots) and pack the scalars; allocate the
outputs (and a split reduction's workspace); launch in order; return what the kernel returns.

A call's first and later launches run the same function; benchmarks/kernels/bench.py ("host cost") measures it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

from ..._named_tuple import NamedTuple
from ._frame import Frame
from ..._generated_code import compiled, note_source


class Step(NamedTuple):
    """One kernel launch of a prepared call."""

    fn: Any  # the loaded function
    grid: int
    block: int
    what: str  # the kernel and entry, for errors
    frame: Frame
    dependent: bool = False  # may start while the step before it finishes (it waits for that step's writes)
    binary: tuple[str, str] | None = None  # (binary-cache key, lowered entry) of fn, where the cache holds it


class Scalar(NamedTuple):
    """A scalar argument: its position, parameter, ``struct`` format (None: always the packer) and packer."""

    position: int
    name: str
    format: str | None
    pack: Callable[[Any], bytes]


class Output(NamedTuple):
    """An output the call allocates: its parameter and dtype, an allocator for the current stream (or None),
    and the position of an input to allocate it ``EMPTY_LIKE`` (or None)."""

    name: str
    dtype: str
    quick: Callable[[], Any] | None
    like: int | None


# What a launch returns: (form, items); an item is an argument position, or -1 - k for the k-th allocated output.
Result = tuple[int, tuple[int, ...]]
RESULT_NONE, RESULT_ONE, RESULT_TUPLE = 0, 1, 2


def result_source(result: Result) -> str:
    """A :data:`Result` as an expression over ``args`` and the allocated outputs ``o0``, ``o1``..."""
    form, items = result
    spelled = [f"args[{i}]" if i >= 0 else f"o{-1 - i}" for i in items]
    if form == RESULT_NONE:
        return "None"
    if form == RESULT_ONE:
        return spelled[0]
    return f"({''.join(s + ', ' for s in spelled)})"


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


def make_launch(**described: Any) -> Callable[..., Any]:
    """The launch function of a prepared call (see the module docstring), in Python: what runs where
    :func:`._launch_native.native_launch` does not (the compiled call path), and the reference for it. Takes
    :func:`launch_source`'s arguments."""
    source, ns = launch_source(**described)
    exec(compiled(source, "launch"), ns)
    return ns["launch_call"]


def note_launch_source(**described: Any) -> None:
    """Tell a capture the source :func:`make_launch` would compile for a call the compiled call path launches: a
    process served by the capture's build may have no compiled call path (kspec/_generated_code.py)."""
    note_source(launch_source(**described)[0], "launch")


def launch_source(
    *,
    steps: Sequence[Step],
    arrays: Sequence[tuple[int, str]],
    scalars: Sequence[Scalar],
    outputs: Sequence[Output],
    workspace: int,
    result: Result,
    nargs: int,
    constants: dict[str, Any],
) -> tuple[str, dict[str, Any]]:
    """The source of a prepared call's launch function and the namespace it runs in.

    ``arrays``: (argument position, parameter) of the arrays given; ``outputs`` are ``o0``, ``o1``... in
    ``result``. ``constants`` holds what the code reads: DEVICE,
    LIBRARY, SHAPE, SEVERAL (several devices), EXPORT (outputs go back as the inputs' library's), STREAM
    (``kspec.runtime.default_stream_source``: where the default stream's handle is read) and the functions
    choose_stream, launch, launch_dependent (:func:`kspec.runtime.dependent_launcher`), relaunch, cu_stream,
    allocate, allocate_bytes, activate, pointer_of, export, EMPTY_LIKE.
    """
    ns: dict[str, Any] = dict(constants)
    ns.update(StructError=struct.error, U64=struct.Struct("<Q").pack_into, WORKSPACE=workspace)
    stream_of, attribute = constants["STREAM"]  # the default stream: STREAM_OF(DEVICE)[.attribute]
    ns["STREAM_OF"] = stream_of
    default = f"STREAM_OF(DEVICE){'.' + attribute if attribute else ''}"
    body = [f"handle = {default} if stream is None else choose_stream(stream)"]
    for j, step in enumerate(steps):
        ns.update({f"FN{j}": step.fn, f"GRID{j}": step.grid, f"BLOCK{j}": step.block, f"WHAT{j}": step.what,
                   f"LOCAL{j}": step.frame.thread_local, f"BUFFER{j}": step.frame.buffer})  # fmt: skip
        body += ["try:  # this thread's parameter buffer (Frame.buffer makes it on the thread's first call)",
                 f"    buf{j} = LOCAL{j}.buf", f"    address{j} = LOCAL{j}.address",
                 "except AttributeError:", f"    buf{j}, address{j} = BUFFER{j}()"]  # fmt: skip
        slots = [(off, i) for i, name in arrays if (off := step.frame.pointer_offset(name)) is not None]
        for k, (offset, positions) in enumerate(pointer_runs(slots)):
            ns[f"PACK{j}_{k}"], ns[f"OFF{j}_{k}"] = struct.Struct("<" + "Q" * len(positions)).pack_into, offset
            body.append(f"PACK{j}_{k}(buf{j}, OFF{j}_{k}, {', '.join(f'p{i}' for i in positions)})")
        for k, scalar in enumerate(scalars):
            at = step.frame.scalar_offset(scalar.name)
            if at is None:
                continue
            ns[f"SLOW{k}"], ns[f"AT{j}_{k}"] = scalar.pack, at
            slow = [f"v = SLOW{k}(args[{scalar.position}])", f"buf{j}[AT{j}_{k}:AT{j}_{k} + len(v)] = v"]
            if scalar.format is None:
                body += slow
            else:
                ns[f"FAST{k}"] = struct.Struct(scalar.format).pack_into
                body += ["try:", f"    FAST{k}(buf{j}, AT{j}_{k}, args[{scalar.position}])",
                         "except (StructError, OverflowError):", *(f"    {s}" for s in slow)]  # fmt: skip
    library = constants["LIBRARY"]
    for k, out in enumerate(outputs):
        ns[f"DT{k}"] = out.dtype
        slow_alloc = f"allocate(LIBRARY, SHAPE, DT{k}, handle if stream is None else stream, DEVICE)"
        if out.quick is not None and out.like is not None:
            body.append(f"o{k} = EMPTY_LIKE(args[{out.like}]) if stream is None else {slow_alloc}")
        elif out.quick is not None:
            ns[f"QUICK{k}"] = out.quick
            body.append(f"o{k} = QUICK{k}() if stream is None else {slow_alloc}")
        else:
            body.append(f"o{k} = {slow_alloc}")
        offsets = [(j, off) for j, step in enumerate(steps) if (off := step.frame.pointer_offset(out.name)) is not None]
        if offsets:
            body.append(f"q = {_POINTER_OF.get(library, 'pointer_of({o})').format(o=f'o{k}')}")
            for j, off in offsets:
                ns[f"OUT{j}_{k}"] = off
                body.append(f"U64(buf{j}, OUT{j}_{k}, q)")
    if workspace:
        body.append("ws = allocate_bytes(WORKSPACE, DEVICE, handle, stream)")
        for j, step in enumerate(steps):
            off = step.frame.pointer_offset("_workspace")
            if off is not None:
                ns[f"WS{j}"] = off
                body.append(f"U64(buf{j}, WS{j}, ws.ptr)")
    if steps:
        if constants["SEVERAL"]:
            body.append("activate(DEVICE)")
        streams: dict[int, Any] = {}  # handle -> the bindings' CUstream, without a call into the runtime

        def new_stream(handle: int) -> Any:
            if len(streams) > 64:  # handles of destroyed streams would otherwise pile up
                streams.clear()
            made = streams[handle] = constants["cu_stream"](handle)
            return made

        ns.update(streams_get=streams.get, new_stream=new_stream)
        body += ["hs = streams_get(handle)", "if hs is None:", "    hs = new_stream(handle)"]
        for j, step in enumerate(steps):
            call = (f"launch_dependent(FN{j}, GRID{j}, BLOCK{j}, hs, address{j})" if step.dependent and j
                    else f"launch(FN{j}, GRID{j}, 1, 1, BLOCK{j}, 1, 1, 0, hs, address{j}, 0)")
            body += [f"(err,) = {call}",
                     "if err:  # nothing was queued: the general launcher retries on a lost context or raises",
                     f"    relaunch(FN{j}, GRID{j}, BLOCK{j}, address{j}, handle, DEVICE, WHAT{j})"]  # fmt: skip
    if workspace:
        body.append("del ws  # freed in stream order, after the launches that use it")
    if constants["EXPORT"]:  # JAX / Numba inputs: outputs go back as theirs, after the launch
        body += [f"o{k} = export(o{k}, LIBRARY)" for k in range(len(outputs))]
    body.append(f"return {result_source(result)}")
    params = "".join(f", p{i}" for i in range(nargs))
    return f"def launch_call(args, stream{params}):\n" + "".join(f"    {line}\n" for line in body), ns
