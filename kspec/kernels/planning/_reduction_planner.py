"""The planner of a ReductionKernel call (:mod:`._planner` has the elementwise one and what both share).

A module of its own so that a process serving only elementwise kernels never loads the reduction planning.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._errors import kernel_label
from ...render import VariantKey
from ...runtime import device_array_from_pointer, refuse_while_capturing
from ..binaries import loaded_kernel, LoadedKernel, read_attribute, resident_blocks
from ._binding import Bound, bind
from ..callpath import Frame, PreparedCall, sm_count, Step
from ._reduction_plan import ReductionPlan, plan_reduction
from ._reduction_strategy import pass_frame_values, reduction_strategy
from ._planner import launch_stream, prepared_call
from ._protocol import PlannedKernel


def prepare_reduction(kernel: PlannedKernel, args: tuple[Any, ...], stream: object, axis: object,
                      keepdims: bool) -> tuple[PreparedCall, tuple[int, ...]]:
    """The prepared call of a ReductionKernel call (outputs given as arguments), and its arguments' pointers."""
    bound, plan = plan_reduction_call(kernel, args, stream, axis, keepdims)
    assert bound.device_id is not None  # a reduction always has an array input
    device_id = bound.device_id
    handle = launch_stream(bound, stream, device_id) if plan.out_size else None
    steps, workspace = reduction_steps(kernel, plan, device_id, handle)
    return prepared_call(kernel, bound, device_id, steps, plan.allocate, plan.out_shape, workspace, len(args))


def plan_reduction_call(kernel: PlannedKernel, args: tuple[Any, ...], stream: object, axis: object, keepdims: bool,
                        abstract: bool = False) -> tuple[Bound, ReductionPlan]:
    """Bind and plan a ReductionKernel call (every check and error of one). ``abstract``: the arrays are
    ArraySpecs (kernel.output_specs)."""
    spec = kernel.spec
    inputs, outputs = kernel.split_args(args, {}, "axis=, keepdims=, out= and stream=")
    kernel.check_stream(stream)
    bound = bind(spec, inputs, outputs, launch=not abstract, stream=stream, abstract=abstract,
                 cupy_rules=kernel.cupy_rules)
    return bound, plan_reduction(spec, bound, kernel.specializer, axis=axis, keepdims=keepdims)


def reduction_steps(kernel: PlannedKernel, plan: ReductionPlan, device_id: int, handle: int | None) -> tuple[list[Step], int]:
    """The launches of a plan on a device (none when it has no output element) and the workspace bytes they
    use, its specialization loaded there. ``handle``: the launch stream (see elementwise_steps)."""
    steps: list[Step] = []
    workspace = 0
    if not plan.out_size:
        return steps, workspace
    loaded = loaded_kernel(plan.specialization, device_id, kernel.binaries, handle)

    def max_threads(variant: VariantKey) -> int:  # registers bound the block: cols wants up to 1024 threads
        return read_attribute(loaded.function(variant, handle), "max_threads_per_block")

    def resident(variant: VariantKey, threads: int) -> int:  # blocks an SM holds: a split fills one wave
        return resident_blocks(loaded.function(variant, handle), threads)

    tuning = kernel.plan_tuning(device_id)
    knobs = tuning(reduction_label(plan)) if tuning is not None else None
    strategy = reduction_strategy(plan, sm_count(device_id), max_threads=max_threads, resident=resident, knobs=knobs)
    if strategy.workspace_items:
        workspace = strategy.workspace_items * _reduce_itemsize(loaded, strategy.passes[0].variant, handle)
    for step in strategy.passes:
        frame = Frame(loaded.interface.abi[step.variant], pass_frame_values(plan, step))
        steps.append(Step(loaded.function(step.variant, handle), step.grid, step.block,
                          kernel_label(kernel.name, step.variant.entry), frame, step.dependent,
                          loaded.locator(step.variant)))  # fmt: skip
    return steps, workspace


def reduction_label(plan: ReductionPlan) -> str:
    """The layout label a tuning record files a reduction's knobs under (kspec/_plan_tuning.py): ``inner``,
    ``cols`` or ``rows``, the widest input's item size, ``kept/reduced`` extents (merged, outermost first)."""
    from ..._plan_tuning import layout_label

    cls = "inner" if plan.inner_rows else "cols" if plan.contiguous_cols else "rows"
    itemsize = max((op.itemsize for op in plan.specialization.operands if op.is_array and not op.is_output), default=1)
    return layout_label(cls, itemsize, plan.kept[::-1], plan.red[::-1])


def _reduce_itemsize(loaded: LoadedKernel, variant: VariantKey, stream: int | None) -> int:
    """The workspace bytes per partial, read (for a type only the compiler knows) from a global that every
    binary of the module defines, here the one holding ``variant``; read once per loaded kernel (a copy to
    the host, which a graph capture on ``stream`` could not record)."""
    item = loaded.interface.reduce_item
    assert item is not None
    if item.itemsize is not None:
        return item.itemsize
    if loaded.reduce_itemsize is not None:
        return loaded.reduce_itemsize
    if stream is not None:
        refuse_while_capturing(stream, kernel_label(loaded.interface.name),
                               "read its partials' size from the device (a copy to the host) on a first call")  # fmt: skip
    module = loaded.module(variant, stream)
    found = module.global_symbol(item.symbol)
    assert found is not None, item.symbol
    size_align = device_array_from_pointer(found[0], found[1], np.uint64, (2,), module.device_id, None).get()
    size, align = int(size_align[0]), int(size_align[1])
    loaded.reduce_itemsize = -(-size // align) * align
    return loaded.reduce_itemsize
