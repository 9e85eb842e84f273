"""The planner: a call nobody prepared yet becomes a :class:`~._prepared.PreparedCall`.

Every check and every error of a spec kernel's call happens here, once per signature: the arguments are
split and bound (:mod:`._bind`), the launch is planned (:mod:`._plan`, :mod:`._plan_reduction`), the
specialization is loaded on the device (:mod:`._loaded`), each launch gets its parameter frame
(:mod:`._frame`), and the prepared call is made. The call path (:mod:`._callpath`) keeps it under the
call's signature and launches it; the planner launches nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._errors import kernel_label
from ..render import VariantKey
from ..runtime import device_array_from_pointer, get_device
from . import _loaded
from ._bind import Bound, bind, texture_handles
from ._frame import Frame
from ._launch_code import Step
from ._plan import frame_values, plan_elementwise
from ._plan_reduction import pass_frame_values, plan_reduction, reduction_strategy
from ._prepared import PreparedCall, bound_pointers, sm_count


def prepare_elementwise(kernel: Any, args: tuple[Any, ...], stream: object, size: object,
                        block_size: object) -> tuple[PreparedCall, tuple[int, ...]]:
    """The prepared call of an ElementwiseKernel call, and its arguments' pointers."""
    spec = kernel._spec
    args, textures = texture_handles(args, spec)  # texture/surface objects go by value, as uint64 handles
    inputs, outputs = kernel._split_args(args, {}, "size=, block_size= and stream=")
    kernel._check_stream(stream)
    bound = bind(spec, inputs, outputs, textures, launch=True, stream=stream)
    plan = plan_elementwise(spec, bound, kernel._specializer, size=size, block_size=block_size)
    device_id = bound.device_id if bound.device_id is not None else get_device().id
    steps = []
    if plan.variant is not None:
        loaded = _loaded.loaded_kernel(plan.specialization, device_id, kernel._binaries)
        frame = Frame(loaded.interface.abi[plan.variant], frame_values(plan))
        steps.append(Step(loaded.function(plan.variant), plan.grid(sm_count(device_id)), plan.block,
                          kernel_label(kernel.name, plan.variant.entry), frame))  # fmt: skip
    return _prepared(kernel, bound, device_id, steps, plan.allocate, plan.shape, 0, len(args), textures)


def prepare_reduction(kernel: Any, args: tuple[Any, ...], stream: object, axis: object,
                      keepdims: bool) -> tuple[PreparedCall, tuple[int, ...]]:
    """The prepared call of a ReductionKernel call (outputs given as arguments), and its arguments' pointers."""
    spec = kernel._spec
    inputs, outputs = kernel._split_args(args, {}, "axis=, keepdims=, out= and stream=")
    kernel._check_stream(stream)
    bound = bind(spec, inputs, outputs, launch=True, stream=stream)
    plan = plan_reduction(spec, bound, kernel._specializer, axis=axis, keepdims=keepdims)
    assert bound.device_id is not None  # a reduction always has an array input
    device_id = bound.device_id
    steps = []
    workspace = 0
    if plan.out_size:
        strategy = reduction_strategy(plan, sm_count(device_id))
        loaded = _loaded.loaded_kernel(plan.specialization, device_id, kernel._binaries)
        if strategy.workspace_items:
            workspace = strategy.workspace_items * _reduce_itemsize(loaded, strategy.passes[0].variant)
        for step in strategy.passes:
            frame = Frame(loaded.interface.abi[step.variant], pass_frame_values(plan, step))
            steps.append(Step(loaded.function(step.variant), step.grid, step.block,
                              kernel_label(kernel.name, step.variant.entry), frame))  # fmt: skip
    return _prepared(kernel, bound, device_id, steps, plan.allocate, plan.out_shape, workspace, len(args))


def _prepared(kernel: Any, bound: Bound, device_id: int, steps: list[Step], allocate: tuple[tuple[str, str], ...],
              out_shape: tuple[int, ...], workspace: int, nargs: int,
              textures: frozenset[str] = frozenset()) -> tuple[PreparedCall, tuple[int, ...]]:  # fmt: skip
    spec = kernel._spec  # as the kernel holds it: a served kernel keeps its plain spec (no Pydantic)
    params = [*spec.in_params, *spec.out_params][:nargs]
    prepared = PreparedCall(kernel.name, bound, params, device_id, steps, allocate, out_shape, workspace,
                            kernel._result_expression(nargs), textures)  # fmt: skip
    return prepared, bound_pointers(bound, params)


def _reduce_itemsize(loaded: _loaded.LoadedKernel, variant: VariantKey) -> int:
    """The workspace bytes per partial, read (for a type only the compiler knows) from a global that every
    binary of the module defines, here the one holding ``variant``."""
    item = loaded.interface.reduce_item
    assert item is not None
    if item.itemsize is not None:
        return item.itemsize
    module = loaded.module(variant)
    found = module.global_symbol(item.symbol)
    assert found is not None, item.symbol
    size_align = device_array_from_pointer(found[0], found[1], np.uint64, (2,), module.device_id, None).get()
    size, align = int(size_align[0]), int(size_align[1])
    return -(-size // align) * align
