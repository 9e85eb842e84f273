"""``FusedFunction.output_specs`` / ``plan_launch``: a fused function's program planned for ArraySpecs.

The program traced for the arguments' types (the one a call runs) is walked step by step, each kernel
planned by its own ``output_specs`` / ``plan_launch`` on the ArraySpecs of its inputs: the call's arguments,
or the values earlier steps wrote. Values the function returns are the plan's outputs; values only passed
from one kernel to the next live in the workspace, after which each step's own workspace (a split
reduction's partials) is placed. Only functions that return new arrays are planned: one that updates an
argument in place, indexes one (``x[...]``), or returns an argument or a constant raises
:class:`kspec.KspecNotImplementedError` saying so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._errors import KspecNotImplementedError, KspecTypeError
from ..kernels import ArraySpec, LaunchPlan, LaunchStep
from . import _plan
from ._program import Program

_ALIGN = 256


def _refuse(name: str, what: str) -> KspecNotImplementedError:
    return KspecNotImplementedError(
        f"kspec.fuse: function '{name}': output_specs / plan_launch plan functions that return new arrays only; "
        f"this one {what}"
    )


def check_abstract(name: str, args: Sequence[Any]) -> None:
    """A planned call needs an ArraySpec among its arguments (without one a call runs the plain function)."""
    if not any(isinstance(a, ArraySpec) for a in args):
        raise KspecTypeError(
            f"kspec.fuse: function '{name}': output_specs / plan_launch take ArraySpecs where a call takes arrays, "
            "and need at least one"
        )


def _returned(name: str, program: Program) -> list[int]:
    """The node ids the function returns, in order (the plan's outputs)."""
    found: list[int] = []
    for kind, payload in program.results:
        if kind == _plan.ARG_RESULT:
            raise _refuse(name, "returns an argument")
        if kind != _plan.NODE_RESULT:
            raise _refuse(name, f"returns {'a nested tuple' if kind == _plan.TUPLE_RESULT else 'a constant or None'}")
        if payload in found:
            raise _refuse(name, "returns one value twice")
        found.append(payload)
    return found


def plan_program(name: str, program: Program, args: Sequence[Any], load: bool) -> LaunchPlan:
    """The LaunchPlan of ``program`` on ``args`` (``load``: with its launches; else outputs only, and no
    steps, nothing compiled or loaded)."""
    if any(step.written_args for step in program.steps):
        raise _refuse(name, "updates an argument in place")
    returned = _returned(name, program)
    array_index = {i: k for k, i in enumerate(i for i, a in enumerate(args) if isinstance(a, ArraySpec))}
    where: dict[int, tuple[str, int]] = {node: ("output", j) for j, node in enumerate(returned)}
    values: dict[int, ArraySpec] = {}
    workspace = 0
    steps: list[LaunchStep] = []
    device_id: int | None = None
    for step, kernel in zip(program.steps, program.kernels()):
        ins: list[Any] = []
        sources: list[tuple[str, int]] = []  # where each array input of the step's kernel is, in order
        for kind, index in step.inputs:
            if kind == "view":
                raise _refuse(name, "indexes an argument (x[...]); index it before the call")
            value = args[index] if kind == "arg" else values[index]
            ins.append(value)
            if isinstance(value, ArraySpec):
                sources.append(("input", array_index[index]) if kind == "arg" else where[index])
        if load:
            plan = kernel.plan_launch(*ins, **step.kwargs)
            outputs, device_id = plan.outputs, plan.device_id
        else:
            outputs = kernel.output_specs(*ins, **step.kwargs)
        for node, spec in zip(step.produces, outputs):
            values[node] = spec
            if node not in where:  # a value passed on to a later kernel only
                where[node] = ("workspace", workspace)
                workspace += -(-spec.nbytes // _ALIGN) * _ALIGN
        if load:
            own = workspace
            workspace += plan.workspace
            for launch in plan.steps:
                pointers = tuple(sorted((offset, *_placed(role, index, sources, step.produces, where, own))
                                        for offset, role, index in launch.pointers))  # fmt: skip
                steps.append(launch._replace(pointers=pointers))
    outputs = tuple(values[node] for node in returned)
    if device_id is None:
        device_id = outputs[0].device_id if outputs else 0
    return LaunchPlan(outputs, "tuple" if program.returns_tuple else "single", tuple(steps), workspace, device_id)


def _placed(role: str, index: int, sources: list[tuple[str, int]], produces: list[int],
            where: dict[int, tuple[str, int]], own_workspace: int) -> tuple[str, int]:  # fmt: skip
    """A step kernel's pointer (role, index) as the fused call's."""
    if role == "input":
        return sources[index]
    if role == "output":
        return where[produces[index]]
    return ("workspace", own_workspace + index)
