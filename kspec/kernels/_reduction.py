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

from .._args import flag, options_tuple
from .._errors import KspecValueError, about_kernel, kernel_label
from ..render import VariantKey
from ..runtime import EXPORTED, current_stream, export_outputs, open_stream_blocks as _stream_entered
from . import _loaded, _spec_kernel
from ._bind import Bound, bind
from ._elementwise import raw_view_values
from ._frame import Frame
from ._plan_reduction import Pass, ReductionPlan, plan_reduction, reduction_strategy
from ._prepared import Launch, PreparedCall, bound_pointers, signature, sm_count


class ReductionKernel(_spec_kernel.SpecKernel):
    """A reduction kernel: ``k(*inputs)`` or ``k(*inputs, *outputs)``; kwargs ``axis``, ``keepdims``, ``out``, ``stream``."""

    SPEC = _spec_kernel.SpecClass("ReductionSpec")
    KIND = "reduction"

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
        fields: dict[str, Any] = dict(identity=identity, reduce_type=reduce_type,
                                      reduce_dims=flag(reduce_dims, "reduce_dims"), options=options_tuple(options))
        self._setup(self._build_spec(texts, fields))

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
        return self._spec.identity

    @property
    def reduce_type(self) -> str | None:
        return self._spec.reduce_type

    def __call__(
        self, *args: Any, out: Any = None, axis: object = None, keepdims: bool = False, stream: object = None, **kwargs: Any
    ) -> Any:
        if stream is None and _stream_entered[0]:  # inside `with kspec.Stream(...)`
            stream = current_stream()
        full = args if out is None or len(args) != self._nin else (*args, *(out if isinstance(out, tuple) else (out,)))
        sig = None if kwargs else signature(full)
        key = None
        if sig is not None and (out is None or full is not args):
            if isinstance(axis, (list, tuple)):
                axis_key: object = tuple(axis)
                plain = all(type(a) is int for a in axis)
            else:
                axis_key, plain = axis, axis is None or type(axis) is int
            if plain:
                key = (sig[0], axis_key, bool(keepdims))
                prepared = self._prepared.get(key)
                if prepared is not None:
                    if sig[2]:  # CAI inputs: their producers' streams, ordered on every call
                        prepared.order_producers(sig[2], stream)
                    return self._results(full, prepared.run(full, sig[1], stream))
        inputs, outputs = self._split_args(args, kwargs, "axis=, keepdims=, out= and stream=")
        self._check_stream(stream)
        if out is not None:
            if outputs is not None:
                raise KspecValueError(
                    "cannot specify 'out' as both a positional and keyword argument: "
                    f"kernel '{self.name}' got its output both as an argument and as out="
                )
            outputs = tuple(out) if isinstance(out, tuple) else (out,)
            if len(outputs) != self._nout:
                raise KspecValueError(
                    about_kernel(self.name, f"out= must hold {self._nout} array(s) (one per output), got {len(outputs)}")
                )
        bound = bind(self._spec, inputs, outputs, launch=True, stream=stream)
        plan = plan_reduction(self._spec, bound, self._specializer, axis=axis, keepdims=bool(keepdims))
        prepared = self._prepare(bound, plan)
        self._remember(key, prepared)
        full = (*inputs, *outputs) if outputs is not None else tuple(inputs)
        pointers = sig[1] if sig is not None else bound_pointers(bound, self._spec)
        allocated = prepared.run(full, pointers, stream)
        if prepared.library in EXPORTED:  # JAX / Numba inputs: outputs go back as theirs, after the launch
            allocated = export_outputs(allocated, prepared.library)
        return self._results(full, allocated)

    def _prepare(self, bound: Bound, plan: ReductionPlan) -> PreparedCall:
        assert bound.device_id is not None  # a reduction always has an array input
        device_id = bound.device_id
        launches = []
        workspace = 0
        if plan.out_size:
            strategy = reduction_strategy(plan, sm_count(device_id))
            loaded = _loaded.loaded_kernel(plan.specialization, device_id, self._binaries)
            if strategy.workspace_items:
                workspace = strategy.workspace_items * _reduce_itemsize(loaded, strategy.passes[0].variant)
            for step in strategy.passes:
                frame = Frame(loaded.interface.abi[step.variant], _static_values(plan, step))
                what = kernel_label(self.name, step.variant.entry)
                launches.append(Launch(step.variant, frame, step.grid, step.block, what))
        return PreparedCall(self, bound, device_id, plan.specialization, plan.allocate, plan.out_shape, launches, workspace)

    def _results(self, args: tuple[Any, ...], allocated: dict[str, Any]) -> Any:
        results = [allocated[p.name] if p.name in allocated else args[self._nin + j] for j, p in enumerate(self._spec.out_params)]
        return results[0] if len(results) == 1 else tuple(results)


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
    import numpy as np

    from ..runtime import device_array_from_pointer

    size_align = device_array_from_pointer(found[0], found[1], np.uint64, (2,), module.device_id, None).get()
    size, align = int(size_align[0]), int(size_align[1])
    return -(-size // align) * align


def _static_values(plan: ReductionPlan, step: Pass) -> dict[str, Any]:
    final = step.variant.entry == "split_final"
    shape = step.shape or plan  # pass 1 of the "inner" strategy has a shape of its own
    static: dict[str, Any] = {
        "_reduce_shape": {
            "out_size": shape.out_size,
            "red_size": shape.red_size,
            "kept_extent": shape.kept,
            "red_extent": shape.red if not final else (shape.red_size,),
            "kept_ndim": len(shape.kept),
            "red_ndim": len(shape.red) if not final else 1,
        },
        "_group": step.group,
        "_workspace": {"nchunks": step.nchunks, "chunk": step.chunk},
    }
    for name, (kept, red) in shape.in_strides.items():
        static[name] = {"kept_stride": kept, "red_stride": red}
    for name, kept in shape.out_strides.items():
        static[name] = {"stride": kept}
    for name, layout in plan.raw.items():
        static[name] = raw_view_values(layout)
    return static
