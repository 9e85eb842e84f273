"""Test support for the host loop templates (templates/host/*.cpp.j2): a rendered host module built and
launched through kspec's CPU device (tests/helpers/host_build.py), with calls run through the real planner and
parameter frames and NumPy arrays standing in for device arrays (their pointers are host pointers; the host
entries read them directly).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from helpers.host_build import HostModule, build as build_host
from kspec.kernels.planning._binding import bind
from kspec.kernels.callpath._frame import Frame
from kspec.kernels.planning._plan import frame_values as elementwise_static, plan_elementwise
from kspec.kernels.planning._reduction_plan import plan_reduction
from kspec.kernels.planning._reduction_strategy import pass_frame_values as reduction_static, reduction_strategy
from kspec.render import RenderedModule, render_host
from kspec.runtime._devicearray import DeviceArray

_BUILT: dict[str, HostModule] = {}
_RENDERED: dict[str, RenderedModule] = {}


def build(module: RenderedModule) -> HostModule:
    """``module`` compiled for the CPU device and loaded; memoized by source."""
    if module.source not in _BUILT:
        _BUILT[module.source] = build_host(module.source, "host_loops", module.name_expressions)
    return _BUILT[module.source]


def stand_in(obj: Any) -> Any:
    """A NumPy array as a kspec device array over the same memory (host pointers, on the CPU device)."""
    if isinstance(obj, np.ndarray):
        return DeviceArray._wrap(obj.ctypes.data, obj.shape, obj.dtype, 0, obj, strides=obj.strides)
    return obj


def rendered(specialization: Any) -> RenderedModule:
    """render_host, once per specialization (a timing should not count Jinja)."""
    if specialization.key not in _RENDERED:
        _RENDERED[specialization.key] = render_host(specialization)
    return _RENDERED[specialization.key]


def _bound(kernel: Any, args: tuple[Any, ...]) -> Any:
    inputs, outputs = kernel._split_args(tuple(stand_in(a) for a in args), {}, "")
    return bind(kernel._spec, inputs, outputs)


def _allocate(items: tuple[tuple[str, str], ...], shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    return {name: np.zeros(shape, np.dtype(dtype)) for name, dtype in items}


def _pointers(bound: Any, allocated: dict[str, np.ndarray]) -> dict[str, int]:
    pointers = {name: arg.info.ptr for name, arg in bound.arrays.items()}
    pointers.update({name: a.ctypes.data for name, a in allocated.items()})
    return pointers


def run_elementwise(kernel: Any, *args: Any, size: object = None, block_size: object = None, threads: int = 2,
                    sm_count: int = 2) -> tuple[Any, str]:
    """``kernel(*args)`` on the host: the kernel's own planner, frames and launch, a host module's entry; also
    the entry the planner chose ("none" for an empty loop)."""
    bound = _bound(kernel, args)
    plan = plan_elementwise(kernel._spec, bound, kernel._specializer, size=size, block_size=block_size)
    allocated = _allocate(plan.allocate, plan.shape)
    entry = "none"
    if plan.variant is not None:
        entry = plan.variant.entry
        module = rendered(plan.specialization)
        host = build(module)
        frame = Frame(module.abi[plan.variant], elementwise_static(plan))
        address = frame.fill(_pointers(bound, allocated), bound.scalars)
        host.run(module.variants[plan.variant], plan.grid(sm_count), plan.block, address, threads)
    return _results(kernel, args, allocated), entry


def _results(kernel: Any, args: tuple[Any, ...], allocated: dict[str, np.ndarray]) -> Any:
    nin = len(kernel._spec.in_params)
    results = [allocated[p.name] if p.name in allocated else args[nin + j] for j, p in enumerate(kernel._spec.out_params)]
    return results[0] if len(results) == 1 else tuple(results)


def run_reduction(kernel: Any, *args: Any, axis: object = None, keepdims: bool = False, threads: int = 2,
                  sm_count: int = 2) -> tuple[Any, str]:
    """``kernel(*args, axis=, keepdims=)`` on the host; also the strategy kind the planner chose."""
    bound = _bound(kernel, args)
    plan = plan_reduction(kernel._spec, bound, kernel._specializer, axis=axis, keepdims=keepdims)
    allocated = _allocate(plan.allocate, plan.out_shape)
    kind = "none"
    if plan.out_size:
        strategy = reduction_strategy(plan, sm_count)
        kind = strategy.kind
        module = rendered(plan.specialization)
        host = build(module)
        pointers = _pointers(bound, allocated)
        workspace = None
        if strategy.workspace_items:
            item = module.reduce_item
            assert item is not None
            itemsize = item.itemsize
            if itemsize is None:  # an opaque reduce type: sizeof/alignof from the module's global
                size, align = (ctypes.c_uint64 * 2).in_dll(host.lib, item.symbol)
                itemsize = -(-size // align) * align
            workspace = np.zeros(strategy.workspace_items * itemsize + 256, np.uint8)
            pointers["_workspace"] = -(-workspace.ctypes.data // 256) * 256
        for step in strategy.passes:
            frame = Frame(module.abi[step.variant], reduction_static(plan, step))
            address = frame.fill(pointers, bound.scalars)
            host.run(module.variants[step.variant], step.grid, step.block, address, threads)
    return _results(kernel, args, allocated), kind
