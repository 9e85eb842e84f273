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

from .._args import flag, options_tuple
from .._errors import kernel_label
from ..runtime import (
    EXPORTED,
    current_stream,
    export_outputs,
    get_device,
    initialized_device_count,
    open_stream_blocks as _stream_entered,
)
from . import _loaded, _spec_kernel
from ._bind import Bound, bind, texture_handles
from ._fastcall import MISS, Stubs
from ._frame import Frame
from ._plan import ElementwisePlan, plan_elementwise
from ._prepared import Launch, PreparedCall, bound_pointers, signature, sm_count


class ElementwiseKernel(_spec_kernel.SpecKernel):
    """An elementwise kernel: ``k(*inputs)`` or ``k(*inputs, *outputs)``; kwargs ``size``, ``block_size``, ``stream``."""

    SPEC = _spec_kernel.SpecClass("ElementwiseSpec")
    KIND = "elementwise"

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
        fields: dict[str, Any] = dict(reduce_dims=flag(reduce_dims, "reduce_dims"), no_return=flag(no_return, "no_return"),
                                      return_tuple=flag(return_tuple, "return_tuple"), options=options_tuple(options))
        self._setup(self._build_spec(texts, fields))

    def _setup(self, spec: Any, binaries: Any = None) -> None:
        super()._setup(spec, binaries)
        self._fast = Stubs(_stream_entered, current_stream, initialized_device_count)

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
        if size is None and block_size is None and not kwargs:  # a signature seen before: kspec/kernels/_fastcall.py
            result = self._fast.call(args, stream)
            if result is not MISS:
                return result
        return self._call(args, size, block_size, stream, kwargs)

    NOT_PREPARED: Any = MISS  # what call_prepared returns for a call it cannot serve

    def call_prepared(self, args: tuple[Any, ...], stream: object = None) -> Any:
        """``self(*args, stream=stream)`` if a call with the same signature (argument types, shapes, strides,
        dtypes, devices) ran before, else :attr:`NOT_PREPARED` with nothing done. For front ends that call a
        kernel per call of their own (kspec.fuse), so they need not read the arguments' signature twice."""
        return self._fast.call(args, stream)

    def _call(self, args: tuple[Any, ...], size: object, block_size: object, stream: object, kwargs: dict[str, Any]) -> Any:
        """The full path: every check, and a prepared call remembered for the call's signature."""
        if stream is None and _stream_entered[0]:  # inside `with kspec.Stream(...)`
            stream = current_stream()
        sig = None if kwargs else signature(args)
        textures: frozenset[str] = frozenset()
        if sig is None and not kwargs:  # texture/surface objects go by value as their uint64 handles
            args, textures = texture_handles(args, self._spec)
            if textures:
                sig = signature(args)
        key = None
        if sig is not None and _plain(size) and _plain(block_size):
            key = (sig[0], size, block_size)
            prepared = self._prepared.get(key)
            if prepared is not None:
                if size is None and block_size is None and not textures:
                    self._serve_fast(args, prepared)  # a repeat: from now on through kspec/kernels/_fastcall.py
                if sig[2]:  # CAI inputs (never served by the fast path): their producers, on every call
                    prepared.order_producers(sig[2], stream)
                return self._results(args, prepared.run(args, sig[1], stream))
        inputs, outputs = self._split_args(args, kwargs, "size=, block_size= and stream=")
        self._check_stream(stream)
        bound = bind(self._spec, inputs, outputs, textures, launch=True, stream=stream)
        plan = plan_elementwise(self._spec, bound, self._specializer, size=size, block_size=block_size)
        prepared = self._prepare(bound, plan)
        self._remember(key if bound.device_id is not None else None, prepared)
        pointers = sig[1] if sig is not None else bound_pointers(bound, self._spec)
        allocated = prepared.run(args, pointers, stream)
        if prepared.library in EXPORTED:  # JAX / Numba inputs: outputs go back as theirs, after the launch
            allocated = export_outputs(allocated, prepared.library)
        return self._results(args, allocated)

    def _prepare(self, bound: Bound, plan: ElementwisePlan) -> PreparedCall:
        device_id = bound.device_id if bound.device_id is not None else get_device().id
        launches = []
        if plan.variant is not None:
            loaded = _loaded.loaded_kernel(plan.specialization, device_id, self._binaries)
            frame = Frame(loaded.interface.abi[plan.variant], _static_values(plan))
            what = kernel_label(self.name, plan.variant.entry)
            launches.append(Launch(plan.variant, frame, plan.grid(sm_count(device_id)), plan.block, what))
        return PreparedCall(self, bound, device_id, plan.specialization, plan.allocate, plan.shape, launches)

    def _serve_fast(self, args: tuple[Any, ...], prepared: PreparedCall) -> None:
        """Serve repeats of this signature through a generated direct call. Made on the second call, not the
        first: generating it costs a few hundred microseconds, which a kernel called once need not pay."""
        if not prepared.direct_made:
            prepared.direct_made = True
            prepared.direct = prepared.direct_call(self._result_expression(len(args)), len(args))
        if prepared.direct is not None:
            self._fast.register(args, prepared.direct)

    def _result_expression(self, nargs: int) -> str:
        """What a direct call returns (kspec/kernels/_fastcall.py): outputs given as arguments, else the
        allocated ones (``o0``, ``o1``, ... in the prepared call's allocation order, the outputs' order)."""
        if self._spec.no_return:
            return "None"
        given = nargs == self._nin + self._nout
        items = [f"args[{self._nin + j}]" if given else f"o{j}" for j in range(self._nout)]
        if len(items) == 1 and not self._spec.return_tuple:
            return items[0]
        return f"({', '.join(items)},)"

    def _results(self, args: tuple[Any, ...], allocated: dict[str, Any]) -> Any:
        if self._spec.no_return:
            return None
        results = [allocated[p.name] if p.name in allocated else args[self._nin + j] for j, p in enumerate(self._spec.out_params)]
        if len(results) == 1 and not self._spec.return_tuple:
            return results[0]
        return tuple(results)


def _plain(value: object) -> bool:
    """A keyword value that can be part of a signature as it is."""
    return value is None or type(value) is int


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
