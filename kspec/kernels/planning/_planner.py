"""The planner: a call nobody prepared yet becomes a :class:`~..callpath._prepared.PreparedCall`.

Every check and every error of a spec kernel's call happens here, once per signature: the arguments are
split and bound (:mod:`._binding`), the launch is planned (:mod:`._plan`, :mod:`._reduction_plan`), the
specialization is loaded on the device (:mod:`..binaries._loaded`), each launch gets its parameter frame
(:mod:`..callpath._frame`), and the prepared call is made. The call path (:mod:`..callpath._call_path`) keeps it under the
call's signature and launches it; the planner launches nothing. Reductions: :mod:`._reduction_planner`.
"""

from __future__ import annotations

from typing import Any

from ..._errors import kernel_label
from ...runtime import default_stream_getter, get_device, stream_handle
from ..binaries import loaded_kernel
from ._binding import Bound, bind, library_without_arrays, texture_handles
from ..callpath import Frame, PreparedCall, sm_count, Step
from ._plan import ElementwisePlan, frame_values, plan_elementwise
from ._call_layout import bound_pointers, call_layout
from ._protocol import PlannedKernel


def prepare_elementwise(kernel: PlannedKernel, args: tuple[Any, ...], stream: object, size: object,
                        block_size: object) -> tuple[PreparedCall, tuple[int, ...]]:
    """The prepared call of an ElementwiseKernel call, and its arguments' pointers."""
    bound, plan, textures = plan_elementwise_call(kernel, args, stream, size, block_size)
    device_id = bound.device_id if bound.device_id is not None else get_device().id
    if bound.device_id is None:  # no array argument: something else says where outputs go
        bound = bound._replace(library=library_without_arrays(stream, bound.cupy_rules, device_id))
    handle = launch_stream(bound, stream, device_id) if plan.variant is not None else None
    steps = elementwise_steps(kernel, plan, device_id, handle)
    return prepared_call(kernel, bound, device_id, steps, plan.allocate, plan.shape, 0, len(args), textures)


def plan_elementwise_call(kernel: PlannedKernel, args: tuple[Any, ...], stream: object, size: object, block_size: object,
                          abstract: bool = False, launch: bool = True) -> tuple[Bound, ElementwisePlan, frozenset[str]]:
    """Bind and plan an ElementwiseKernel call (every check and error of one): the bound arguments, the plan
    and the inputs given texture objects. ``abstract``: the arrays are ArraySpecs (kernel.output_specs);
    ``launch=False``: the entry point is not chosen (:func:`plan_elementwise`)."""
    spec = kernel.spec
    args, textures = texture_handles(args, spec)  # texture/surface objects go by value, as uint64 handles
    inputs, outputs = kernel.split_args(args, {}, "size=, block_size= and stream=")
    kernel.check_stream(stream)
    bound = bind(spec, inputs, outputs, textures, launch=not abstract, stream=stream, abstract=abstract,
                 cupy_rules=kernel.cupy_rules)
    tuning = None
    if launch:  # the device whose record entry counts: ArraySpecs plan for theirs (kspec/kernels/planning/_abstract_plan.py)
        if abstract:
            from ._abstract_plan import call_device

            tuning = kernel.plan_tuning(call_device(bound))
        else:
            tuning = kernel.plan_tuning(bound.device_id)
    plan = plan_elementwise(spec, bound, kernel.specializer, size=size, block_size=block_size, launch=launch,
                            tuning=tuning)  # fmt: skip
    return bound, plan, textures


def elementwise_steps(kernel: PlannedKernel, plan: ElementwisePlan, device_id: int, handle: int | None) -> list[Step]:
    """The launch of a plan on a device (none for size 0), its specialization loaded there. ``handle``: the
    launch stream (a first load while it captures a graph is refused), None when nothing launches now."""
    if plan.variant is None:
        return []
    loaded = loaded_kernel(plan.specialization, device_id, kernel.binaries, handle)
    frame = Frame(loaded.interface.abi[plan.variant], frame_values(plan))
    return [Step(loaded.function(plan.variant, handle), plan.grid(sm_count(device_id)), plan.block,
                 kernel_label(kernel.name, plan.variant.entry), frame, False, loaded.locator(plan.variant))]  # fmt: skip


def launch_stream(bound: Bound, stream: object, device_id: int) -> int:
    """The handle of the stream the call launches on, chosen as its prepared call will choose it: what a
    first call checks for a graph capture before it compiles or loads (:mod:`..binaries._loaded`)."""
    return default_stream_getter(bound.library)(device_id) if stream is None else stream_handle(stream)


def prepared_call(kernel: PlannedKernel, bound: Bound, device_id: int, steps: list[Step], allocate: tuple[tuple[str, str], ...],
              out_shape: tuple[int, ...], workspace: int, nargs: int,
              textures: frozenset[str] = frozenset()) -> tuple[PreparedCall, tuple[int, ...]]:  # fmt: skip
    spec = kernel.spec  # as the kernel holds it: a served kernel keeps its plain spec (no Pydantic)
    params = [*spec.in_params, *spec.out_params][:nargs]
    layout = call_layout(bound, params, allocate, out_shape, textures)
    prepared = PreparedCall(kernel.name, layout, device_id, steps, out_shape, workspace, kernel.result_items(nargs))
    return prepared, bound_pointers(bound, params)
