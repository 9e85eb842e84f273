"""Running a :class:`kspec.LaunchPlan` by hand, as a framework that launches kspec's binaries itself does (XLA
through a custom call): allocate the outputs and the workspace, write the pointers into each step's parameter
buffer, launch with the driver. Tests compare what that computes with what a call of the kernel computes."""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable, Sequence
from typing import Any

import kspec


def launch_plan(plan: kspec.LaunchPlan, inputs: Sequence[int], outputs: Sequence[int], workspace: int,
                function: Callable[[int], Any], launch: Callable[..., tuple[int]]) -> None:  # fmt: skip
    """Launch every step of ``plan`` with these pointers (``inputs``: one per array input, in argument order;
    ``outputs``: one per plan output; ``workspace``: the base of ``plan.workspace`` bytes). ``function`` makes
    the driver's function object of a step's handle; ``launch`` is the driver's ``cuLaunchKernel``."""
    keep = []
    for step in plan.steps:
        buf = ctypes.create_string_buffer(step.params, max(len(step.params), 8))
        for offset, role, index in step.pointers:
            pointer = inputs[index] if role == "input" else outputs[index] if role == "output" else workspace + index
            struct.pack_into("<Q", buf, offset, pointer)
        base = ctypes.addressof(buf)
        slots = (ctypes.c_void_p * max(1, len(step.slot_offsets)))(*[base + o for o in step.slot_offsets])
        keep.append((buf, slots))
        (err,) = launch(function(step.function), step.grid, 1, 1, step.block, 1, 1, step.shared, 0,
                        ctypes.addressof(slots), 0)  # fmt: skip
        assert not err, f"launch failed: {err}"


def host_function(handle: int) -> Any:
    """The CPU device's function object of a LaunchStep's handle (the entry's address): the loaded kernels
    hold it."""
    from kspec.kernels.binaries import _loaded

    for loaded in list(_loaded._loaded.values()):
        for fn in loaded.functions.values():
            if int(fn) == handle:
                return fn
    raise AssertionError(f"no loaded function has handle 0x{handle:x}")
