"""ReductionKernel: CuPy's reduction kernels, from a constructor call or a spec file.

``kspec.ReductionKernel('T x', 'T y', 'x * x', 'a + b', 'y = sqrt(a)', '0', 'l2norm')`` builds the same
:class:`kspec.spec.ReductionSpec` a spec file holds. A call binds its arguments, plans the reduction
(:func:`kspec.kernels._plan.plan_reduction`), picks a strategy for the shape (a group of lanes per row,
a block per row, column-wise for an outer reduced axis, or a two-pass split for long rows and few outputs;
no atomics, so results do not depend on timing) and launches it. Several outputs come back as a tuple
(CuPy returns only the first).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._errors import KspecValueError
from ..runtime._device import Device, get_device
from ..runtime._memory import allocate as allocate_bytes
from ..spec import ReductionSpec
from . import _typed
from ._bind import Bound, bind
from ._elementwise import raw_view_values
from ._frame import Frame
from ._plan import Pass, ReductionPlan, Strategy, plan_reduction, reduction_strategy


class ReductionKernel(_typed.SpecKernel):
    """A reduction kernel: ``k(*inputs)`` or ``k(*inputs, *outputs)``; kwargs ``axis``, ``keepdims``, ``out``, ``stream``."""

    SPEC = ReductionSpec

    def __init__(
        self,
        in_params: str,
        out_params: str,
        map_expr: str,
        reduce_expr: str,
        post_map_expr: str,
        identity: str | None,
        name: str = "reduce_kernel",
        reduce_type: str | None = None,
        reduce_dims: bool = True,
        preamble: str = "",
        options: Sequence[str] = (),
    ) -> None:
        texts = dict(in_params=in_params, out_params=out_params, map_expr=map_expr, reduce_expr=reduce_expr,
                     post_map_expr=post_map_expr, name=name, preamble=preamble)
        fields: dict[str, Any] = dict(identity=identity, reduce_type=reduce_type, reduce_dims=bool(reduce_dims),
                                      options=options)
        self._setup(self._build_spec(ReductionSpec, texts, fields))

    @property
    def map_expr(self) -> str:
        return str(self._spec.map_expr)

    @property
    def reduce_expr(self) -> str:
        return str(self._spec.reduce_expr)

    @property
    def post_map_expr(self) -> str:
        return str(self._spec.post_map_expr)

    @property
    def identity(self) -> str | None:
        return self._spec.identity  # type: ignore[no-any-return]

    @property
    def reduce_type(self) -> str | None:
        return self._spec.reduce_type  # type: ignore[no-any-return]

    def __call__(
        self, *args: Any, out: Any = None, axis: object = None, keepdims: bool = False, stream: object = None, **kwargs: Any
    ) -> Any:
        inputs, outputs = self._split_args(args, kwargs, "axis=, keepdims=, out= and stream=")
        if out is not None:
            if outputs is not None:
                raise KspecValueError(f"kernel '{self.name}': out was given both as an argument and as out=")
            outputs = tuple(out) if isinstance(out, tuple) else (out,)
            if len(outputs) != self._nout:
                raise KspecValueError(
                    f"kernel '{self.name}': out= must hold {self._nout} array(s) (one per output), got {len(outputs)}"
                )
        bound = bind(self._spec, inputs, outputs)
        plan = plan_reduction(self._spec, bound, self._specializer, axis=axis, keepdims=bool(keepdims))
        return self._run(bound, plan, stream)

    def _run(self, bound: Bound, plan: ReductionPlan, stream: object) -> Any:
        device_id = bound.device_id if bound.device_id is not None else get_device().id
        handle = self._stream(stream, bound.library, device_id)
        results, pointers = self._outputs(bound, plan.allocate, plan.out_shape, stream if stream is not None else handle, device_id)
        if plan.out_size:
            _typed.activate(device_id)
            strategy = reduction_strategy(plan, Device(device_id).multiprocessor_count)
            self._launch(plan, strategy, bound, pointers, handle, device_id, stream)
        return results[0] if len(results) == 1 else tuple(results)

    def _launch(
        self,
        plan: ReductionPlan,
        strategy: Strategy,
        bound: Bound,
        pointers: dict[str, int],
        handle: int,
        device_id: int,
        stream_owner: object,
    ) -> None:
        loaded = _typed.loaded_kernel(plan.specialization, device_id)
        workspace = None
        if strategy.workspace_items:
            itemsize = _reduce_itemsize(loaded)
            workspace = allocate_bytes(strategy.workspace_items * itemsize, device_id, handle, stream_owner)
            pointers = {**pointers, "_workspace": workspace.ptr}
        for step in strategy.passes:
            frame = Frame(loaded.rendered.abi[step.variant], _static_values(plan, step))
            params = frame.fill(pointers, bound.scalars)
            fn = loaded.function(step.variant)
            _typed.launch(fn, step.grid, step.block, params, handle, device_id, f"kernel '{self.name}' ({step.variant.entry})")
        del workspace  # freed in stream order after the launches that use it


def _reduce_itemsize(loaded: _typed.LoadedKernel) -> int:
    item = loaded.rendered.reduce_item
    assert item is not None
    if item.itemsize is not None:
        return item.itemsize
    found = loaded.module.global_symbol(item.symbol)
    assert found is not None, item.symbol
    import numpy as np

    from ..runtime._devicearray import device_array_from_pointer

    size_align = device_array_from_pointer(found[0], found[1], np.uint64, (2,), loaded.module.device_id, None).get()
    size, align = int(size_align[0]), int(size_align[1])
    return -(-size // align) * align


def _static_values(plan: ReductionPlan, step: Pass) -> dict[str, Any]:
    final = step.variant.entry == "split_final"
    static: dict[str, Any] = {
        "_reduce_shape": {
            "out_size": plan.out_size,
            "red_size": plan.red_size,
            "kept_extent": plan.kept,
            "red_extent": plan.red if not final else (plan.red_size,),
            "kept_ndim": len(plan.kept),
            "red_ndim": len(plan.red) if not final else 1,
        },
        "_group": step.group,
        "_workspace": {"nchunks": step.nchunks, "chunk": step.chunk},
    }
    for name, (kept, red) in plan.in_strides.items():
        static[name] = {"kept_stride": kept, "red_stride": red}
    for name, kept in plan.out_strides.items():
        static[name] = {"stride": kept}
    for name, layout in plan.raw.items():
        static[name] = raw_view_values(layout)
    return static
