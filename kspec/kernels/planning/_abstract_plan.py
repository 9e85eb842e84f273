"""``kernel.output_specs`` and ``kernel.plan_launch``: a spec kernel's call planned for ArraySpecs.

The call's own planner binds and plans it (:func:`._planner.plan_elementwise_call`,
:func:`._reduction_planner.plan_reduction_call` with ``abstract=True``: every check and error of a call);
``output_specs`` stops there (nothing compiles, loads or allocates, no driver starts), ``plan_launch`` goes on
to the launches a call would make (:func:`._planner.elementwise_steps`, :func:`._reduction_planner.reduction_steps`:
the specialization loaded as a call loads it) and writes each one's parameter buffer down with pointers 0,
for a framework that launches it itself (XLA through a custom call). Nothing here launches.
"""

from __future__ import annotations

from typing import Any

from ..._errors import KspecValueError, about_kernel
from ...runtime import HOST_DEVICE_ID, device_kind
from ._array_spec import ArraySpec, LaunchPlan, LaunchStep, aligned, spec_of_output
from ._binding import Bound
from ..callpath import Step
from ._protocol import PlannedKernel


def call_device(bound: Bound) -> int:
    """The device a call plans for: its arrays', else (scalars only) kspec's CPU device when it is on, else
    CUDA device 0 (output_specs starts no driver to ask for the current one)."""
    if bound.device_id is not None:
        return bound.device_id
    return HOST_DEVICE_ID if device_kind() == "cpu" else 0


def output_specs_of(kernel: PlannedKernel, bound: Bound, out_shape: tuple[int, ...]) -> tuple[ArraySpec, ...]:
    """One ArraySpec per output parameter, in order: the output given, or the C-contiguous one the call
    allocates."""
    device_id = call_device(bound)
    outputs = []
    for p in kernel.spec.out_params:
        given = bound.arrays.get(p.name)
        outputs.append(given.obj if given is not None else spec_of_output(out_shape, bound.dtypes[p.name], device_id))
    return tuple(outputs)


def result_kind(kernel: PlannedKernel) -> str:
    """What a call returns: "none" (no_return), "single" (its one output) or "tuple"."""
    spec = kernel.spec
    if getattr(spec, "no_return", False):
        return "none"
    return "single" if kernel.nout == 1 and not getattr(spec, "return_tuple", False) else "tuple"


def launch_plan_of(kernel: PlannedKernel, bound: Bound, out_shape: tuple[int, ...], plan: Any) -> LaunchPlan:
    """The LaunchPlan of a bound and planned call: its launches on the arrays' device, loaded there."""
    device_id = call_device(bound)
    if device_id == HOST_DEVICE_ID and device_kind() != "cpu":
        raise KspecValueError(about_kernel(
            kernel.name, "ArraySpecs on device 'cpu' plan a launch on kspec's CPU device, which is off; turn it on "
            "first (kspec.use_device('cpu') or KSPEC_DEVICE=cpu)"))
    steps, workspace = kernel.abstract_steps(plan, device_id)
    spec = kernel.spec
    inputs = [p.name for p in spec.in_params if p.name in bound.arrays]
    roles = {name: ("input", k) for k, name in enumerate(inputs)}
    roles.update({p.name: ("output", j) for j, p in enumerate(spec.out_params)})
    if workspace:
        roles["_workspace"] = ("workspace", 0)
    launches = tuple(launch_step(step, bound.scalars, roles) for step in steps)
    return LaunchPlan(output_specs_of(kernel, bound, out_shape), result_kind(kernel), launches, aligned(workspace),
                      device_id)


def launch_step(step: Step, scalars: dict[str, bytes], roles: dict[str, tuple[str, int]]) -> LaunchStep:
    """A launch as a LaunchStep: its frame's static bytes with the scalars written, and where each pointer
    goes (``roles``: parameter -> (role, index); a pointer slot of no role stays 0)."""
    frame = step.frame
    params = bytearray(frame.static)
    for name, value in scalars.items():
        at = frame.scalar_offset(name)
        if at is not None:
            params[at : at + len(value)] = value
    pointers = tuple(sorted((offset, *roles[name]) for name, offset in frame.pointer_slots().items() if name in roles))
    return LaunchStep(int(step.fn), step.grid, step.block, 0, bytes(params), frame.slot_offsets, pointers)
