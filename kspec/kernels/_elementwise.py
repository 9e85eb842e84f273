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

from .._errors import KspecTypeError
from ..render import Specialization
from ..runtime._device import Device, get_device
from ..runtime._interop import array_info
from ..spec import ElementwiseSpec
from . import _typed
from ._bind import Bound, bind
from ._frame import Frame
from ._plan import ElementwisePlan, plan_elementwise


class ElementwiseKernel:
    """An elementwise kernel: ``k(*inputs)`` or ``k(*inputs, *outputs)``; kwargs ``size``, ``block_size``, ``stream``."""

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
        for what, value in (("in_params", in_params), ("out_params", out_params), ("operation", operation),
                            ("name", name), ("preamble", preamble), ("loop_prep", loop_prep), ("after_loop", after_loop)):
            if not isinstance(value, str):
                raise KspecTypeError(f"{what}: expected a str, got {type(value).__name__}")
        spec = ElementwiseSpec(
            name=name,
            in_params=in_params,
            out_params=out_params,
            operation=operation,
            preamble=preamble,
            loop_prep=loop_prep,
            after_loop=after_loop,
            reduce_dims=bool(reduce_dims),
            no_return=bool(no_return),
            return_tuple=bool(return_tuple),
            options=(options,) if isinstance(options, str) else tuple(options),
        )
        self._setup(spec)

    @classmethod
    def from_spec(cls, spec: ElementwiseSpec) -> ElementwiseKernel:
        """The callable of an elementwise spec (from a spec file or built in Python)."""
        if not isinstance(spec, ElementwiseSpec):
            raise KspecTypeError(f"spec: expected an ElementwiseSpec, got {type(spec).__name__}")
        kernel = object.__new__(cls)
        kernel._setup(spec)
        return kernel

    def _setup(self, spec: ElementwiseSpec) -> None:
        self._spec = spec
        self._key = _spec_key(spec)
        self._nin = len(spec.in_params)
        self._nout = len(spec.out_params)
        self._frames: dict[tuple[int, int], Frame] = {}

    # -- CuPy's attributes -------------------------------------------------------------------------------

    @property
    def spec(self) -> ElementwiseSpec:
        return self._spec

    @property
    def name(self) -> str:
        return self._spec.name

    @property
    def in_params(self) -> tuple[Any, ...]:
        return self._spec.in_params

    @property
    def out_params(self) -> tuple[Any, ...]:
        return self._spec.out_params

    @property
    def params(self) -> tuple[Any, ...]:
        return self._spec.params

    @property
    def nin(self) -> int:
        return self._nin

    @property
    def nout(self) -> int:
        return self._nout

    @property
    def nargs(self) -> int:
        return self._nin + self._nout

    @property
    def operation(self) -> str:
        return self._spec.operation

    @property
    def preamble(self) -> str:
        return self._spec.preamble

    @property
    def options(self) -> tuple[str, ...]:
        return tuple(self._spec.options)

    @property
    def reduce_dims(self) -> bool:
        return self._spec.reduce_dims

    @property
    def no_return(self) -> bool:
        return self._spec.no_return

    @property
    def return_tuple(self) -> bool:
        return self._spec.return_tuple

    def __repr__(self) -> str:
        return f"<kspec.ElementwiseKernel {self.name!r}>"

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (ElementwiseKernel.from_spec, (self._spec,))

    # -- the call ----------------------------------------------------------------------------------------

    def __call__(self, *args: Any, size: object = None, block_size: object = None, stream: object = None, **kwargs: Any) -> Any:
        if kwargs:
            bad = next(iter(kwargs))
            raise KspecTypeError(
                f"kernel '{self.name}': unexpected keyword argument {bad!r} (ElementwiseKernel takes size=, "
                "block_size= and stream=)"
            )
        n = len(args)
        if n != self._nin and n != self._nin + self._nout:
            raise KspecTypeError(
                f"kernel '{self.name}' takes {self._nin} arguments (inputs) or {self._nin + self._nout} "
                f"(inputs and outputs), got {n}"
            )
        inputs = args[: self._nin]
        outputs = args[self._nin :] if n > self._nin else None
        bound = bind(self._spec, inputs, outputs)
        plan = plan_elementwise(self._spec, bound, self._specializer, size=size, block_size=block_size)
        return self._run(bound, plan, stream)

    def _specializer(self, types: dict[str, str], scalars: frozenset[str]) -> Specialization:
        return _typed.specialization_of(self._spec, self._key, types, scalars)

    def _run(self, bound: Bound, plan: ElementwisePlan, stream: object) -> Any:
        device_id = bound.device_id if bound.device_id is not None else get_device().id
        try:
            handle = _typed.resolve_stream(stream, bound.library, device_id)
        except KspecTypeError as exc:
            raise KspecTypeError(f"kernel '{self.name}': {exc}") from None
        results = []
        pointers: dict[str, int] = {}
        for p in self._spec.out_params:
            given = bound.arrays.get(p.name)
            if given is None:
                dtype = dict(plan.allocate)[p.name]
                obj = _typed.allocate(bound.library, plan.shape, dtype, handle, device_id)
                results.append(obj)
                pointers[p.name] = array_info(obj).ptr
            else:
                results.append(given.obj)
        if plan.variant is not None:
            for name, arg in bound.arrays.items():
                pointers[name] = arg.info.ptr
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


def _spec_key(spec: Any) -> str:
    import hashlib
    import json

    text = json.dumps(spec.to_data(), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()
