"""ElementwiseKernel: CuPy's elementwise kernels, from a constructor call or a spec file.

``kspec.ElementwiseKernel('float32 x, float32 y', 'float32 z', 'z = (x - y) * (x - y)', 'squared_diff')``
builds the same :class:`kspec.spec.ElementwiseSpec` a spec file holds. A call binds its arguments
(:mod:`._bind`), plans the launch (:mod:`._plan`), allocates missing outputs in the inputs' library and
launches one entry point of the specialization's module. Where kspec differs from CuPy, it is stricter or
clearer: an unbound placeholder names itself, a float scalar for an integer parameter is refused, C++
keywords as names are refused at construction; ``size=`` with non-raw arrays is an error as in CuPy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..runtime._device import Device, get_device
from ..spec import ElementwiseSpec
from . import _typed
from ._bind import Bound, bind
from ._frame import Frame
from ._plan import ElementwisePlan, plan_elementwise


class ElementwiseKernel(_typed.SpecKernel):
    """An elementwise kernel: ``k(*inputs)`` or ``k(*inputs, *outputs)``; kwargs ``size``, ``block_size``, ``stream``."""

    SPEC = ElementwiseSpec

    def __init__(
        self,
        in_params: str,
        out_params: str,
        operation: str,
        name: str = "kernel",
        reduce_dims: bool = True,
        preamble: str = "",
        no_return: bool = False,
        return_tuple: bool = False,
        *,
        options: Sequence[str] = (),
        loop_prep: str = "",
        after_loop: str = "",
    ) -> None:
        texts = dict(in_params=in_params, out_params=out_params, operation=operation, name=name,
                     preamble=preamble, loop_prep=loop_prep, after_loop=after_loop)
        fields: dict[str, Any] = dict(reduce_dims=bool(reduce_dims), no_return=bool(no_return),
                                      return_tuple=bool(return_tuple), options=options)
        self._setup(self._build_spec(ElementwiseSpec, texts, fields))

    @property
    def operation(self) -> str:
        return str(self._spec.operation)

    @property
    def no_return(self) -> bool:
        return bool(self._spec.no_return)

    @property
    def return_tuple(self) -> bool:
        return bool(self._spec.return_tuple)

    def __call__(self, *args: Any, size: object = None, block_size: object = None, stream: object = None, **kwargs: Any) -> Any:
        inputs, outputs = self._split_args(args, kwargs, "size=, block_size= and stream=")
        bound = bind(self._spec, inputs, outputs)
        plan = plan_elementwise(self._spec, bound, self._specializer, size=size, block_size=block_size)
        return self._run(bound, plan, stream)

    def _run(self, bound: Bound, plan: ElementwisePlan, stream: object) -> Any:
        device_id = bound.device_id if bound.device_id is not None else get_device().id
        handle = self._stream(stream, bound.library, device_id)
        results, pointers = self._outputs(bound, plan.allocate, plan.shape, stream if stream is not None else handle, device_id)
        if plan.variant is not None:
            _typed.activate(device_id)
            loaded = _typed.loaded_kernel(plan.specialization, device_id)
            fn = loaded.function(plan.variant)
            frame = Frame(loaded.rendered.abi[plan.variant], _static_values(plan))
            grid = plan.grid(Device(device_id).multiprocessor_count)
            params = frame.fill(pointers, bound.scalars)
            _typed.launch(fn, grid, plan.block, params, handle, device_id, f"kernel '{self.name}' ({plan.variant.entry})")
        if self._spec.no_return:
            return None
        if len(results) == 1 and not self._spec.return_tuple:
            return results[0]
        return tuple(results)


def _static_values(plan: ElementwisePlan) -> dict[str, Any]:
    """Everything of the parameter buffer that is not a pointer or a scalar value."""
    static: dict[str, Any] = {}
    variant = plan.variant
    assert variant is not None
    if variant.entry == "contig":
        static["_size"] = plan.size
    else:
        shape: dict[str, Any] = {"size": plan.size, "extent": plan.extents}
        if variant.ndim == 0:
            shape["ndim"] = len(plan.extents)
        static["_shape"] = shape
        for name, strides in plan.strides.items():
            static[name] = {"stride": strides}
    for name, layout in plan.raw.items():
        static[name] = raw_view_values(layout)
    return static


def raw_view_values(layout: Any) -> dict[str, Any]:
    return {
        "size_": layout.size,
        "ndim_": len(layout.shape),
        "c_contiguous_": int(layout.c_contiguous),
        "shape_": layout.shape,
        "strides_": layout.strides,
    }
