"""A call nobody prepared yet, planned: arguments bound to parameters (every check and error of a call), the
launch plan (layouts, variant, grid and block), reductions' plans and strategies, plans for ArraySpecs, the
tuned planner knobs, and the prepared call the planner makes. What the planner needs of a kernel is
:class:`PlannedKernel`.

A room of :mod:`kspec.kernels`: the rest of the layer uses it through the names below, each loading its module on
first access, so a process loads only what its calls use (one serving elementwise kernels never loads the reduction
planner); a room imports only the rooms below it (docs/architecture.md, "Rooms").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_getattr

if TYPE_CHECKING:  # what mypy reads (explicit re-exports); at run time each name loads its module on first access
    from ._abstract_plan import launch_plan_of as launch_plan_of, output_specs_of as output_specs_of
    from ._array_spec import ArraySpec as ArraySpec, LaunchPlan as LaunchPlan, LaunchStep as LaunchStep
    from ._binding import Bound as Bound, bind as bind, texture_handles as texture_handles
    from ._planner import (
        elementwise_steps as elementwise_steps, plan_elementwise_call as plan_elementwise_call,
        prepare_elementwise as prepare_elementwise,
    )
    from ._protocol import PlannedKernel as PlannedKernel
    from ._reduction_planner import (
        plan_reduction_call as plan_reduction_call, prepare_reduction as prepare_reduction,
        reduction_steps as reduction_steps,
    )
    from ._tuned_knobs import PlanTuned as PlanTuned, printing as printing, records_for as records_for

_LAZY = {
    "ArraySpec": "_array_spec",
    "Bound": "_binding",
    "LaunchPlan": "_array_spec",
    "LaunchStep": "_array_spec",
    "PlanTuned": "_tuned_knobs",
    "PlannedKernel": "_protocol",
    "bind": "_binding",
    "elementwise_steps": "_planner",
    "launch_plan_of": "_abstract_plan",
    "output_specs_of": "_abstract_plan",
    "plan_elementwise_call": "_planner",
    "plan_reduction_call": "_reduction_planner",
    "prepare_elementwise": "_planner",
    "prepare_reduction": "_reduction_planner",
    "printing": "_tuned_knobs",
    "records_for": "_tuned_knobs",
    "reduction_steps": "_reduction_planner",
    "texture_handles": "_binding",
}

__getattr__ = lazy_getattr(__name__, _LAZY, globals())

__all__ = sorted(_LAZY)
