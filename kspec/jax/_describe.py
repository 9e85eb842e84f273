"""A kspec launch plan in the FFI handler's terms: checked, and written as the bytes the C handler reads.

``kernel.plan_launch`` (kspec.kernels) says which functions to launch, how, and where each buffer pointer goes
in their parameter buffers. The handler (kspec/jax/_handler.cc, or the Python one in :mod:`._pyhandler`) keeps
such a description for the process and runs it per call with the buffers XLA gives it. Everything the handler
trusts is checked here first (a pointer outside its buffer, an index naming no buffer): a bad plan is a
:class:`kspec.LaunchError` at trace time, never a wild write at run time.

Blob layout (little-endian, each part padded to 8 bytes), read by ``parse`` in _handler.cc:
``u32 magic "KSXD", u32 version, i32 kind, i32 device, i32 inputs, i32 outputs, u64 workspace, i32 threads,
i32 steps, u32 name length, u32 0, name``; per step ``u64 function, u32 grid, block, shared, params size,
slots, pointers, params, u32 slot offset * slots, (u32 offset, u32 role, u64 index) * pointers``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from .._errors import LaunchError

BLOB_MAGIC = 0x4458534B  # "KSXD"
BLOB_VERSION = 1
KIND_CUDA, KIND_HOST = 0, 1
ROLES = {"input": 0, "output": 1, "workspace": 2}
POINTER_BYTES = 8  # 64-bit processes only (CUDA and kspec's CPU device)
_UINT32 = 2**32


@dataclass(frozen=True)
class Step:
    """One launch: a function handle (CUfunction, or a CPU-device entry's address), its 1-D launch shape,
    the parameter buffer with pointers left 0, each parameter's offset in it, and the pointers to write."""

    function: int
    grid: int
    block: int
    shared: int
    params: bytes
    slot_offsets: tuple[int, ...]
    pointers: tuple[tuple[int, int, int], ...]  # (offset in params, role number, index)


@dataclass(frozen=True)
class Description:
    """What the handler runs for one planned call: ``inputs`` array operands and ``outputs`` results (plus
    one workspace result of ``workspace`` bytes when it is not 0), on ``device`` of ``kind``."""

    name: str
    kind: int
    device: int
    inputs: int
    outputs: int
    workspace: int
    threads: int
    steps: tuple[Step, ...]

    def blob(self) -> bytes:
        """The bytes the C handler's ``kspec_xla_register`` reads."""
        name = self.name.encode("utf-8", errors="replace")[:159]
        parts = [struct.pack("<IIiiiiQiiII", BLOB_MAGIC, BLOB_VERSION, self.kind, self.device, self.inputs,
                             self.outputs, self.workspace, self.threads, len(self.steps), len(name), 0), _pad(name)]  # fmt: skip
        for step in self.steps:
            parts.append(struct.pack("<QIIIIII", step.function, step.grid, step.block, step.shared, len(step.params),
                                     len(step.slot_offsets), len(step.pointers)))  # fmt: skip
            parts.append(_pad(step.params))
            parts.append(_pad(struct.pack(f"<{len(step.slot_offsets)}I", *step.slot_offsets)))
            parts += [struct.pack("<IIQ", offset, role, index) for offset, role, index in step.pointers]
        return b"".join(parts)


def _pad(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 8)


def describe(plan: Any, *, name: str, kind: int, device: int, inputs: int, threads: int = 1) -> Description:
    """The checked description of ``plan`` (a :class:`kspec.kernels.LaunchPlan`) for a call with ``inputs``
    array operands. :class:`kspec.LaunchError` naming the kernel and the step when the plan is inconsistent."""
    outputs = len(plan.outputs)
    workspace = int(plan.workspace)
    if workspace < 0:
        raise LaunchError(f"kernel '{name}': the plan asks for {workspace} bytes of workspace")
    steps = tuple(_step(name, number, step, inputs, outputs, workspace) for number, step in enumerate(plan.steps, 1))
    return Description(name, kind, int(device), inputs, outputs, workspace, max(1, int(threads)), steps)


def _step(name: str, number: int, step: Any, inputs: int, outputs: int, workspace: int) -> Step:
    def bad(what: str) -> LaunchError:
        return LaunchError(f"kernel '{name}': launch step {number} of its plan {what}; kspec.jax will not run it")

    params = bytes(step.params)
    function, grid, block, shared = int(step.function), int(step.grid), int(step.block), int(step.shared)
    if function == 0:
        raise bad("has no function (handle 0)")
    if not (0 < grid < _UINT32 and 0 < block < _UINT32 and 0 <= shared < _UINT32):
        raise bad(f"has grid {grid}, block {block}, shared memory {shared} bytes")
    slots = tuple(int(s) for s in step.slot_offsets)
    if any(not 0 <= s < len(params) for s in slots):
        raise bad(f"puts a parameter outside its {len(params)}-byte parameter buffer (offsets {slots})")
    limits = {"input": inputs, "output": outputs, "workspace": workspace}
    pointers = []
    for offset, role, index in step.pointers:
        offset, index = int(offset), int(index)
        if role not in ROLES:
            raise bad(f"has a pointer of role {role!r} (expected one of {', '.join(ROLES)})")
        if not 0 <= offset <= len(params) - POINTER_BYTES:
            raise bad(f"writes a pointer at byte {offset} of its {len(params)}-byte parameter buffer")
        if not 0 <= index < limits[role]:
            raise bad(f"points at {role} {index}, and the call has {limits[role]}"
                      + (" bytes of workspace" if role == "workspace" else f" {role} array(s)"))  # fmt: skip
        pointers.append((offset, ROLES[role], index))
    return Step(function, grid, block, shared, params, slots, tuple(pointers))

