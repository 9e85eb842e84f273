"""One traced signature: its kernels' specs, and how a call feeds them and assembles the results.

Tracing and spec building need no GPU; the kernels (:class:`kspec.ElementwiseKernel` /
:class:`kspec.ReductionKernel` made from the specs) are created on the first real call, so ``spec()`` and
``cuda_source()`` work on a machine without one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .._errors import FuseError, KspecError, KspecOverflowError
from . import _codegen, _cupy, _graph, _index, _plan
from ._graph import Node
from ._tracer import Tracer
from ._forms import ArgType, ProgramForm, StepForm, check_name
from ._value import TraceValue, argument


@dataclass
class _Step:
    """One kernel of the program and where its arguments come from."""

    spec: Any
    inputs: list[tuple[str, Any]]  # ("arg", argument index), ("view", (index, key items)) or ("value", node id)
    written_args: list[int]  # elementwise kernels that update arguments: those, passed as outputs
    produces: list[int]  # node ids of the new arrays it returns, in order
    kwargs: dict[str, Any]  # axis= / keepdims= of a reduction
    scalars: frozenset[str]  # input parameters passed by value


class Program:
    """The kernels of one signature, ready to run (kernels made on first run)."""

    def __init__(self, steps: list[_Step], results: list[tuple[str, Any]], returns_tuple: bool,
                 int_checks: list[tuple[int, str]] | None = None) -> None:
        self.steps = steps
        self._int_checks = [(i, d, *_int_range(d)) for i, d in (int_checks or [])]
        self._results = results
        self._returns_tuple = returns_tuple
        self._run: Callable[[Sequence[Any]], Any] | None = None
        self._kernels: list[Any] | None = None
        self._lock = threading.Lock()

    @property
    def specs(self) -> tuple[Any, ...]:
        return tuple(step.spec for step in self.steps)

    def runner(self) -> Callable[[Sequence[Any]], Any]:
        """The callable that runs the program on a call's arguments (its kernels made on first use)."""
        run = self._run
        if run is None:
            with self._lock:
                run = self._run = self._run or self._build()
        return run

    @property
    def results(self) -> list[tuple[str, Any]]:
        """How the call's result is built, item by item (kind and payload: kspec/fuse/_plan.py's constants)."""
        return self._results

    @property
    def returns_tuple(self) -> bool:
        return self._returns_tuple

    def form(self, args: Sequence[Any]) -> ProgramForm | None:
        """The program as data for ``args``; None where a step updates an argument in place or reads a view."""
        steps = []
        for step in self.steps:
            if step.written_args or any(kind not in ("arg", "value") for kind, _ in step.inputs):
                return None
            inputs = tuple((kind, int(i)) for kind, i in step.inputs)
            steps.append(StepForm(step.spec, inputs, tuple(step.produces), dict(step.kwargs)))
        return ProgramForm(tuple(steps), list(self._results), self._returns_tuple, tuple(args))

    def kernels(self) -> list[Any]:
        """The kernel of each step (made once: ElementwiseKernel / ReductionKernel of its spec)."""
        kernels = self._kernels
        if kernels is None:
            from ..kernels import ElementwiseKernel, ReductionKernel

            kernels = self._kernels = [
                (ReductionKernel if step.spec.KIND == "reduction" else ElementwiseKernel).from_spec(step.spec)
                for step in self.steps
            ]
        return kernels

    def check_ints(self, args: Sequence[Any]) -> None:
        """NumPy 2's rule: a Python int argument must fit the integer dtype a step converts it to."""
        for index, dtype, low, high in self._int_checks:
            if not low <= args[index] <= high:
                raise KspecOverflowError(f"Python integer {args[index]} out of bounds for {dtype}")

    def _build(self) -> Callable[[Sequence[Any]], Any]:
        results, returns_tuple = self._results, self._returns_tuple
        run = self._run_steps(self.kernels(), results, returns_tuple)
        if not self._int_checks:
            return run
        check_ints = self.check_ints

        def checked(args: Sequence[Any]) -> Any:
            check_ints(args)
            return run(args)

        return checked

    def single_kernel(self, nargs: int) -> Any | None:
        """The kernel a call with ``nargs`` arguments runs as its only work, where it takes them in order and its
        one output is the call's result (so ``kernel(*args, out)`` writes what the call returns); else None."""
        if self._int_checks or not self._one_kernel() or len(self.steps[0].produces) != 1:
            return None
        if [i for _, i in self.steps[0].inputs] != list(range(nargs)) or self.steps[0].spec.KIND == "reduction":
            return None
        return self.kernels()[0]

    def _one_kernel(self) -> bool:
        """One kernel on the arguments as they are, whose first output is the result."""
        step = self.steps[0] if len(self.steps) == 1 else None
        return (step is not None and not step.written_args and not step.kwargs
                and all(kind == "arg" for kind, _ in step.inputs)
                and self._results == [("node", step.produces[0])] and not self._returns_tuple)  # fmt: skip

    def _run_steps(self, kernels: list[Any], results: list[tuple[str, Any]], returns_tuple: bool) -> Callable[[Sequence[Any]], Any]:
        if self._one_kernel():
            # The common case, kept to one call: one elementwise kernel whose first output is the result.
            kernel, index = kernels[0], [i for _, i in self.steps[0].inputs]
            if len(self.steps[0].produces) == 1:
                if index == list(range(len(index))):
                    def call(args: Sequence[Any]) -> Any:
                        return kernel(*args) if len(args) == len(index) else kernel(*args[: len(index)])

                    call.single_kernel = kernel  # type: ignore[attr-defined]  # FusedFunction's fast path
                    return call
                return lambda args: kernel(*[args[i] for i in index])
            return lambda args: kernel(*[args[i] for i in index])[0]

        def run(args: Sequence[Any]) -> Any:
            values: dict[int, Any] = {}
            for step, kernel in zip(self.steps, kernels):
                ins = [args[i] if kind == "arg" else values[i] if kind == "value" else _index.view(args[i[0]], i[1])
                       for kind, i in step.inputs]
                if step.written_args:
                    kernel(*ins, *[args[i] for i in step.written_args])
                    continue
                out = kernel(*ins, **step.kwargs)
                for node_id, array in zip(step.produces, out if isinstance(out, tuple) else (out,)):
                    values[node_id] = array
            items = [_result(kind, payload, args, values) for kind, payload in results]
            return tuple(items) if returns_tuple else items[0]

        return run


def _int_range(dtype: str) -> tuple[int, int]:
    import numpy as np

    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def _narrowed_ints(roots: list[tuple[_graph.Node, int | None]]) -> list[tuple[int, str]]:
    """(argument index, dtype) for each Python-int argument that a step converts to a narrower integer."""
    found: dict[int, str] = {}
    for node in _graph.postorder([n for n, _ in roots]):
        if node.kind == _graph.UFUNC:
            wanted = zip(node.inputs, node.attrs["loop_in"])
        elif node.kind == _graph.WHERE:
            wanted = zip(node.inputs[1:], (node.dtype, node.dtype))
        else:
            continue
        for inp, dtype in wanted:
            if inp.kind == _graph.ARG and inp.weak is int and dtype not in ("int64", "bool") and dtype[0] in "iu":
                found.setdefault(inp.attrs["index"], dtype)
    return sorted(found.items())


def _result(kind: str, payload: Any, args: Sequence[Any], values: dict[int, Any]) -> Any:
    if kind == _plan.TUPLE_RESULT:
        return tuple(_result(k, p, args, values) for k, p in payload)
    if kind == _plan.ARG_RESULT:
        return args[payload]
    if kind == _plan.NODE_RESULT:
        return values[payload]
    return payload  # a constant, or None


def trace(func: Callable[..., Any], func_name: str, kernel_name: str, arg_names: Sequence[str],
          arg_types: Sequence[ArgType]) -> Program:
    """Run ``func`` on symbolic arguments of ``arg_types`` and build the program of kernels it amounts to.

    A trace that fails with an error not of kspec's own (or one raised inside CuPy's code), while CuPy is
    loaded, runs once more with CuPy's fusion dispatch on (:mod:`._cupy`): CuPy routines with no hook for
    foreign objects (``cupy.nansum``) then reach the trace. Only then, since CuPy refuses some calls while fusing that work without it
    (``cupy.amax(x, keepdims=True)``). CuPy's own ``cupy.fuse`` also traces a second time when its first
    way fails."""
    try:
        return _trace_once(func, func_name, kernel_name, arg_names, arg_types, cupy_dispatch=False)
    except Exception as exc:
        # kspec's own errors stand, unless CuPy's code raised them on its non-fusing path (cupy.nanmax asks
        # `if isnan(result).any()` of a traced value when it does not know it is being fused)
        if not _cupy.loaded() or (isinstance(exc, KspecError) and not _cupy.raised_in_cupy(exc)):
            raise
        first = exc
    try:
        return _trace_once(func, func_name, kernel_name, arg_names, arg_types, cupy_dispatch=True)
    except Exception as exc:
        exc.add_note(
            f"kspec.fuse traced {func_name!r} a second time with CuPy's fusion dispatch on, since its first trace "
            f"failed inside CuPy ({type(first).__name__}: {first}); CuPy's routines then behave as under cupy.fuse, "
            "which refuses some calls (keepdims=, cupy.nanmax). NumPy's functions (numpy.nansum, numpy.nanmax) "
            "and the array methods (x.max(keepdims=True)) trace without it."
        )
        raise


def _trace_once(func: Callable[..., Any], func_name: str, kernel_name: str, arg_names: Sequence[str],
                arg_types: Sequence[ArgType], cupy_dispatch: bool) -> Program:
    with Tracer(func_name, cupy_dispatch) as tracer:
        values = [None if kind == "none" else
                  argument(tracer, k, dtype, extra if kind == "array" else _graph.SCALAR_NDIM,
                           extra if kind == "scalar" else None)
                  for k, (kind, dtype, extra) in enumerate(arg_types)]
        originals = [v._node if v is not None else None for v in values]
        returned = func(*values)
    items = returned if isinstance(returned, (tuple, list)) else (returned,)
    roots: list[tuple[_graph.Node, int | None]] = []
    results: list[tuple[str, Any]] = []
    for item in items:
        results.append(_classify(tracer, item, roots))
    for k, (value, original) in enumerate(zip(values, originals)):
        if value is not None and value._node is not original:
            roots.append((value._node, k))
    written = {k for _, k in roots if k is not None}
    viewed = sorted({index for index, _ in tracer.views} & written)
    if viewed:  # the view would be read while the same kernel writes the argument
        tracer.fail(f"it reads argument {viewed[0]} through an index (x[...]) and also updates that argument in "
                    "place; copy the argument before the call", where=_where_of(roots))
    try:
        planned = _plan.plan(roots, results, isinstance(returned, (tuple, list)))
    except ValueError:
        tracer.fail("it returns a value computed from scalar arguments and constants only; a fused kernel needs "
                    "an array to take its shape from (compute that value outside the fused function)",
                    where=_where_of(roots))
    origin = f"{func_name} ({_location(func)})"
    steps = _steps(planned, kernel_name, list(arg_names), origin)
    resolved = [_resolved(kind, p) for kind, p in planned.results]
    return Program(steps, resolved, planned.returns_tuple, _narrowed_ints(roots))


def _classify(tracer: Tracer, item: Any, roots: list[tuple[_graph.Node, int | None]]) -> tuple[str, Any]:
    if isinstance(item, (tuple, list)):  # a nested tuple (np.divmod's result among others) keeps its shape
        return (_plan.TUPLE_RESULT, [_classify(tracer, x, roots) for x in item])
    if item is None:
        return (_plan.NONE_RESULT, None)
    if isinstance(item, TraceValue):
        node = item._node
        if item._arg_index is not None:
            return (_plan.ARG_RESULT, item._arg_index)
        if node.kind == _graph.ARG and "view" in node.attrs:  # a view returned as it is: a new array of its values
            node = Node(_graph.CAST, node.dtype, node.ndim, (node,))
        elif node.kind == _graph.ARG:
            return (_plan.ARG_RESULT, node.attrs["index"])
        if node.kind == _graph.CONST:
            return (_plan.CONST_RESULT, node.attrs["value"])
        roots.append((node, None))
        return (_plan.NODE_RESULT, node)
    if type(item) in (bool, int, float, complex) or getattr(item, "ndim", None) == 0 and hasattr(item, "dtype"):
        return (_plan.CONST_RESULT, item)
    tracer.fail(f"it returns a {type(item).__name__}; a fused function returns traced values, arguments, "
                "numbers, None, or a tuple of them")


def _resolved(kind: str, payload: Any) -> tuple[str, Any]:
    """A result description with node ids in place of nodes (the program keeps no graph)."""
    if kind == _plan.TUPLE_RESULT:
        return (kind, [_resolved(k, p) for k, p in payload])
    return (kind, id(payload) if kind == _plan.NODE_RESULT else payload)


def _where_of(roots: list[tuple[_graph.Node, int | None]]) -> str | None:
    return next((n.where for n, _ in roots if n.where), None)


def _location(func: Callable[..., Any]) -> str:
    code = getattr(func, "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code is not None else "?"


def _steps(planned: _plan.Plan, kernel_name: str, arg_names: list[str], origin: str) -> list[_Step]:
    steps = []
    many = len(planned.stages) > 1
    for k, stage in enumerate(planned.stages):
        name = f"{kernel_name}_{k}" if many else kernel_name
        spec: Any
        if stage.reduce is not None:
            spec, inputs = _codegen.reduction_spec(name, stage, planned.materialized, arg_names, origin)
            written: list[int] = []
            kwargs = {"axis": stage.reduce.attrs["axes"], "keepdims": stage.reduce.attrs["keepdims"]}
        else:
            spec, inputs, written = _codegen.elementwise_spec(name, stage, planned.materialized, arg_names, origin)
            kwargs = {}
        sources = [_source(n) for n in inputs]
        scalars = frozenset(spec.scalars)
        steps.append(_Step(spec, sources, written, [id(n) for n in stage.outputs], kwargs, scalars))
    return steps


def _source(node: _graph.Node) -> tuple[str, Any]:
    """Where a kernel input comes from: ("arg", index), ("view", (index, key items)) or ("value", node id)."""
    if node.kind != _graph.ARG:
        return ("value", id(node))
    if "view" in node.attrs:
        return ("view", (node.attrs["index"], node.attrs["view"]))
    return ("arg", node.attrs["index"])


__all__ = ["ArgType", "FuseError", "Program", "check_name", "trace"]
