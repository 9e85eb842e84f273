"""A prepared call's launch on the compiled call path (kspec/_fastcall_c/'s ``FastLaunch``).

The same launch :func:`._launch_code.make_launch` writes as Python source, given to C as data: per step its
function, grid, block, the frame's static bytes and slot offsets, where each pointer comes from (an argument,
an output, the workspace) and where each scalar goes (with its ``struct`` letter, and the packer that decides
whatever C does not: values out of range, other types); the outputs' allocators; what the call returns; and
the constants the Python launch reads (the stream source, the allocators, the error branch). C decides
nothing the description does not say, so both paths launch the same thing and the Python one is the
reference the tests compare against.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...runtime import direct_launch_address, fastcall_module, prepare_cupy_layout
from ._launch_code import Output, Result, Scalar, Step

_POINTER_KIND = {"cupy": 0, "torch": 1}  # how C reads an output's pointer: `.data.ptr`, `.data_ptr()`, else pointer_of


def native_launch(*, steps: Sequence[Step], arrays: Sequence[tuple[int, str]], scalars: Sequence[Scalar],
                  outputs: Sequence[Output], workspace: int, result: Result, nargs: int,
                  constants: dict[str, Any]) -> Any | None:  # fmt: skip
    """The compiled launch of a prepared call (``launch(args, stream, p0, ..., pN)``), or None where the call
    takes the Python path: no compiled call path in this process, or outputs exported to another framework."""
    fastcall = fastcall_module()
    if fastcall is None or constants["EXPORT"]:
        return None
    direct = direct_launch_address(constants["launch"])
    if constants["LIBRARY"] == "cupy":  # the current stream from CuPy's C API, where that holds
        prepare_cupy_layout()
    described = []
    for step in steps:
        frame = step.frame
        pointers = [(off, i) for i, name in arrays if (off := frame.pointer_offset(name)) is not None]
        pointers += [(off, -1 - k) for k, out in enumerate(outputs) if (off := frame.pointer_offset(out.name)) is not None]
        at = frame.pointer_offset("_workspace")
        if workspace and at is not None:
            pointers.append((at, fastcall.WORKSPACE))
        packed = tuple((at, s.position, (s.format or "")[-1:], s.pack)
                       for s in scalars if (at := frame.scalar_offset(s.name)) is not None)  # fmt: skip
        described.append((step.fn, int(step.fn) if direct else 0, step.grid, step.block, step.dependent, step.what,
                          frame.static, tuple(frame.slot_offsets), tuple(pointers), packed))  # fmt: skip
    pointer_kind = _POINTER_KIND.get(constants["LIBRARY"], 2)
    made = tuple((out.quick, -1 if out.like is None else out.like, out.dtype, pointer_kind) for out in outputs)
    c = constants
    stream_of, attribute = c["STREAM"]
    return fastcall.fast_launch(tuple(described), made, result, (
        nargs, c["DEVICE"], c["LIBRARY"], c["SHAPE"], stream_of, attribute or None, c["choose_stream"], direct,
        c["launch"], c["cu_stream"], c["launch_dependent"], c["relaunch"], c["allocate"], c["allocate_bytes"],
        workspace, c["activate"] if c["SEVERAL"] else None, c["pointer_of"], c["EMPTY_LIKE"],
    ))  # fmt: skip
