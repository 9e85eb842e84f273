"""ReductionKernel: CuPy's reduction kernels, from a constructor call or a spec file.

``kspec.ReductionKernel('T x', 'T y', 'x * x', 'a + b', 'y = sqrt(a)', '0', 'l2norm')`` builds the same
:class:`kspec.spec.ReductionSpec` a spec file holds. A call binds its arguments, plans the reduction
(:func:`kspec.kernels.planning._reduction_plan.plan_reduction`), picks a strategy for the shape (a group of lanes per row,
a block per row, column-wise for an outer reduced axis, or a two-pass split for long rows and few outputs;
no atomics, so results do not depend on timing), once per signature (:mod:`.planning._planner`); every call
runs through :mod:`.callpath._call_path`. Several outputs come back as a tuple
(CuPy returns only the first).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._args import flag, options_tuple
from .._errors import KspecValueError, about_kernel
from . import _spec_kernel
from ._planner_view import PlannerView
from ._spec_kernel import grad_key
from .callpath import MISS, PreparedCall
from ._elementwise import ElementwiseKernel
from .planning import ArraySpec, plan_reduction_call, prepare_reduction, reduction_steps


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
        *,
        grad: Mapping[str, str] | str | None = None,
    ) -> None:
        key = self._adopt((type(self), in_params, out_params, map_expr, reduce_expr, post_map_expr, type(identity), identity,
                           name, reduce_type, reduce_dims, preamble, options if type(options) is not list else tuple(options),
                           grad_key(grad))
                          if type(reduce_dims) is bool else None)
        if key is None:  # built before: kspec/kernels/records/_constructor_memo.py
            return

        def build() -> Any:  # the spec, checked: now, or on first need (kspec/kernels/_spec_kernel.py's _built)
            texts = dict(in_params=in_params, out_params=out_params, map_expr=map_expr, reduce_expr=reduce_expr,
                         post_map_expr=post_map_expr, name=name, preamble=preamble)
            fields: dict[str, Any] = dict(identity=identity, reduce_type=reduce_type,
                                          reduce_dims=flag(reduce_dims, "reduce_dims"), options=options_tuple(options),
                                          cupy_headers=True)  # CuPy's implicit environment: M_PI, CArray, atomics...
            return self._build_spec(texts, fields, grad)

        self._built(key, build)

    def backward_kernel(self, shared: bool = False) -> ElementwiseKernel:
        """The elementwise kernel of this spec's backward (``grad``: a table or ``"auto"``), made once;
        ``shared``: the variant without the gradients equal to an earlier input's (``spec.shared_gradients()``)."""
        return self._backward_with(ElementwiseKernel, shared)

    def row_sum_kernel(self, summed: tuple[str, ...]) -> ElementwiseKernel:
        """The elementwise kernel of this spec's backward with the gradients of the inputs ``summed`` summed over
        the rows of the pass (kspec.grad's fold of broadcast inputs' gradients: kspec/spec/_row_sums.py)."""
        return self._row_sum_with(ElementwiseKernel, tuple(summed))

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
    def identity(self) -> str:
        """CuPy's text: the identity as given (a number as its str), ``''`` for none (the spec's None)."""
        identity = self._spec.identity
        return "" if identity is None else str(identity)

    @property
    def reduce_type(self) -> str:
        """CuPy's value: as given, else the first output's ``ctype`` (the spec keeps None: the default)."""
        reduce_type = self._spec.reduce_type
        return self.out_params[0].ctype if reduce_type is None else str(reduce_type)

    def __call__(
        self, *args: Any, out: Any = None, axis: object = None, keepdims: bool = False, stream: object = None, **kwargs: Any
    ) -> Any:
        if out is not None:
            args = self._with_out(args, out)
        if kwargs:
            self._split_args(args, kwargs, "axis=, keepdims=, out= and stream=")  # raises: CuPy takes no others
        calls = self._calls  # the call path: kspec/kernels/callpath/_call_path.py
        if axis is None or type(axis) is int:
            extra: Any = (axis, True if keepdims else False)
        elif isinstance(axis, (list, tuple)) and all(type(a) is int for a in axis):
            extra = (tuple(axis), True if keepdims else False)
        else:  # NumPy integers, or a value the planner explains: planned every call
            return calls.once(args, stream, (axis, bool(keepdims)))
        result = calls.call(args, stream, extra)
        return result if result is not MISS else calls.miss(args, stream, extra)

    def _with_out(self, args: tuple[Any, ...], out: Any) -> tuple[Any, ...]:
        """The call's arguments with ``out=`` appended as its outputs."""
        if len(args) != self._nin:
            self._split_args(args, {}, "axis=, keepdims=, out= and stream=")  # raises on a wrong count
            raise KspecValueError(
                "cannot specify 'out' as both a positional and keyword argument: "
                f"kernel '{self.name}' got its output both as an argument and as out="
            )
        outputs = tuple(out) if isinstance(out, tuple) and not isinstance(out, ArraySpec) else (out,)
        if len(outputs) != self._nout:
            raise KspecValueError(about_kernel(self.name, f"out= must hold {self._nout} array(s) (one per output), got {len(outputs)}"))
        return (*args, *outputs)

    def _plan_call(self, args: tuple[Any, ...], stream: object, extra: Any) -> tuple[PreparedCall, tuple[int, ...]]:
        axis, keepdims = extra
        return prepare_reduction(PlannerView(self), args, stream, axis, keepdims)

    def _call_keywords(self, extra: Any) -> dict[str, Any]:
        axis, keepdims = extra  # out= is among the arguments already (_with_out)
        return {"axis": axis, "keepdims": keepdims}

    def _abstract_plan(self, args: tuple[Any, ...], kwargs: dict[str, Any],
                       launch: bool) -> tuple[Any, tuple[int, ...], Any]:  # fmt: skip
        out, axis, keepdims = kwargs.pop("out", None), kwargs.pop("axis", None), kwargs.pop("keepdims", False)
        if out is not None:
            args = self._with_out(args, out)
        if kwargs:
            self._split_args(args, kwargs, "axis=, keepdims= and out= here")  # raises
        bound, plan = plan_reduction_call(PlannerView(self), args, None, axis, True if keepdims else False, abstract=True)
        return bound, plan.out_shape, plan

    def _abstract_steps(self, plan: Any, device_id: int) -> tuple[list[Any], int]:
        return reduction_steps(PlannerView(self), plan, device_id, None)
