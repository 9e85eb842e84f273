"""The steps a trace records: ufunc calls, in-place updates, casts, ``where``, ``clip`` and reductions.

Every entry point (operators, NumPy's protocols, CuPy's override hooks, ndarray methods) ends here, so one
function decides the dtype of each kind of step, always NumPy 2's answer for the same operands.
"""

from __future__ import annotations

import operator as _operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._errors import AxisError, FuseValueError, KspecError, KspecValueError
from . import _graph, _rules
from ._graph import Node
from ._value import Recorder, TraceValue, user_location
from ._ufuncs import ARITY, resolve

_PY_SCALARS = (bool, int, float, complex)
_REDUCE_ALIASES = {"amax": "max", "amin": "min", "max": "max", "min": "min", "sum": "sum", "prod": "prod",
                   "all": "all", "any": "any", "alltrue": "all", "sometrue": "any", "nansum": "nansum",
                   "nanprod": "nanprod", "nanmax": "nanmax", "nanmin": "nanmin"}
_UFUNC_REDUCE = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min",
                 "logical_and": "all", "logical_or": "any"}


def as_node(tracer: Recorder, value: Any, what: str) -> Node:
    """The node of an operand: a traced value, or a constant of the function (weak for Python numbers)."""
    if isinstance(value, TraceValue):
        return value._node
    if type(value) in _PY_SCALARS:
        tp = type(value)
        return Node(_graph.CONST, _rules.default_dtype(tp), _graph.SCALAR_NDIM, attrs={"value": value}, weak=tp)
    if isinstance(value, (np.generic, np.ndarray)) and np.ndim(value) == 0:
        name = _rules.dtype_name(value.dtype)
        if name is not None:
            return Node(_graph.CONST, name, _graph.SCALAR_NDIM, attrs={"value": value.item()})
    tracer.fail(
        f"{what}: an operand of type {type(value).__module__}.{type(value).__name__} is neither a traced value nor a "
        "number; arrays used inside a fused function must be its arguments"
    )


def _wrap(nodes: Sequence[Node]) -> Any:
    values = tuple(TraceValue(n) for n in nodes)
    return values[0] if len(values) == 1 else values


def _ufunc_nodes(tracer: Recorder, name: str, operands: Sequence[Any], dtype: Any = None, python_op: bool = False) -> list[Node]:
    if name not in ARITY:
        tracer.fail(f"numpy.{name} is not supported inside a fused function")
    nin, nout = ARITY[name]
    if len(operands) != nin:
        tracer.fail(f"{name} takes {nin} operand(s), got {len(operands)}")
    nodes = [as_node(tracer, v, name) for v in operands]
    weak_only = python_op and all(n.weak is not None for n in nodes)
    requested = None
    if dtype is not None:
        requested = _rules.dtype_name(dtype)
        if requested is None:
            tracer.fail(f"{name}(..., dtype={dtype!r}): not a dtype kspec supports")
    if all(n.weak is not None for n in nodes):
        # Python numbers alone: NumPy computes in their default dtypes (numpy.greater(0, -1) is an int64 loop);
        # a Python operator's result stays weak, a ufunc's is a NumPy scalar
        kinds: list[str | type] = [n.dtype for n in nodes]
    else:
        kinds = [n.weak if n.weak is not None else n.dtype for n in nodes]
    try:
        loop_in, loop_out = resolve(name, kinds, dtype=requested)
    except KspecError as exc:
        tracer.fail(str(exc))
    ndim = _graph.result_ndim(nodes)
    where = user_location()
    return [
        Node(_graph.UFUNC, loop_out[k], ndim, tuple(nodes),
             {"name": name, "loop_in": tuple(loop_in), "loop_out": tuple(loop_out), "index": k},
             weak=_rules.python_type(loop_out[k]) if weak_only else None, where=where)
        for k in range(nout)
    ]


def operator(tracer: Recorder, name: str, operands: Sequence[Any]) -> Any:
    """A Python operator: NumPy's ufunc of that meaning (Python numbers alone stay weak, as in Python)."""
    nodes = _ufunc_nodes(tracer, name, operands, python_op=True)
    if name == "power" and type(operands[1]) is int and operands[1] == 2 and isinstance(operands[0], TraceValue):
        # x ** 2 is square(x) where the loops agree (NumPy takes the same shortcut): a multiply, not powf
        squared = _ufunc_nodes(tracer, "square", operands[:1], python_op=True)
        if squared[0].dtype == nodes[0].dtype and squared[0].weak == nodes[0].weak:
            nodes = squared
    return _wrap(nodes)


def ufunc(tracer: Recorder, name: str, operands: Sequence[Any], out: Any = None, dtype: Any = None) -> Any:
    """``numpy.<name>(*operands, out=..., dtype=...)``: the result, or ``out`` updated in place."""
    nodes = _ufunc_nodes(tracer, name, operands, dtype=dtype)
    if out is None:
        return _wrap(nodes)
    targets = out if isinstance(out, tuple) else (out,)
    if len(targets) != len(nodes):
        tracer.fail(f"{name} has {len(nodes)} output(s), out= gives {len(targets)}")
    for target, node in zip(targets, nodes):
        if target is not None:
            assign(tracer, target, node, f"ufunc '{name}'")
    results = tuple(t if t is not None else TraceValue(n) for t, n in zip(targets, nodes))
    return results[0] if len(results) == 1 else results


def inplace(tracer: Recorder, name: str, target: TraceValue, other: Any) -> Any:
    """``x op= y``: an array is updated in place (NumPy's same_kind rule); a scalar is rebound, as in Python."""
    if target._node.is_scalar:
        return operator(tracer, name, (target, other))
    return ufunc(tracer, name, (target, other), out=target)


def assign(tracer: Recorder, target: Any, node: Node, what: str, casting: str = "same_kind") -> None:
    """Store ``node`` into the array ``target`` (an ``out=``, an in-place operator, or ``x[...] = v`` with
    ``casting="unsafe"``, NumPy's rule for assignment)."""
    if not isinstance(target, TraceValue) or target._node.is_scalar:
        tracer.fail(f"{what}: out= must be an array argument of the fused function or a traced array, got {type(target).__name__}")
    dest = target._node
    if node.ndim > dest.ndim:  # NumPy's and CuPy's words, and their type (ValueError)
        tracer.fail(f"{what}: the result has {node.ndim} dimension(s), the output {dest.ndim}",
                    phrase="non-broadcastable output operand", error=FuseValueError)
    if casting == "same_kind" and not _rules.can_cast_same_kind(node.dtype, dest.dtype):
        tracer.fail(f"{what}: Cannot cast output from dtype('{node.dtype}') to dtype('{dest.dtype}') with casting rule 'same_kind'")
    target._node = Node(_graph.CAST, dest.dtype, dest.ndim, (node,), where=user_location())


def astype(tracer: Recorder, value: Any, dtype: Any) -> TraceValue:
    node = as_node(tracer, value, "astype")
    name = _rules.dtype_name(dtype)
    if name is None:
        tracer.fail(f"astype({dtype!r}): not a dtype kspec supports")
    return TraceValue(Node(_graph.CAST, name, node.ndim, (node,), where=user_location()))


def copy(tracer: Recorder, value: Any) -> TraceValue:
    """``cupy.copy(x)`` / ``x.copy()``: a new array of the same values."""
    node = as_node(tracer, value, "copy")
    return TraceValue(Node(_graph.CAST, node.dtype, node.ndim, (node,), where=user_location()))


def real(tracer: Recorder, value: Any) -> TraceValue:
    node = as_node(tracer, value, "real")
    if node.dtype.startswith("complex"):
        part = "float32" if node.dtype == "complex64" else "float64"
        return TraceValue(Node(_graph.CAST, part, node.ndim, (node,), where=user_location()))
    return value if isinstance(value, TraceValue) else TraceValue(node)


def imag(tracer: Recorder, value: Any) -> TraceValue:
    node = as_node(tracer, value, "imag")
    part = {"complex64": "float32", "complex128": "float64"}.get(node.dtype, node.dtype)
    return TraceValue(Node(_graph.IMAG, part, node.ndim, (node,), where=user_location()))


def where(tracer: Recorder, condition: Any, x: Any, y: Any) -> TraceValue:
    cond = as_node(tracer, condition, "where")
    if cond.dtype != "bool":
        cond = Node(_graph.CAST, "bool", cond.ndim, (cond,))
    a, b = as_node(tracer, x, "where"), as_node(tracer, y, "where")
    dtype = _rules.result_type([(a.dtype, a.weak), (b.dtype, b.weak)])
    return TraceValue(Node(_graph.WHERE, dtype, _graph.result_ndim((cond, a, b)), (cond, a, b), where=user_location()))


def clip(tracer: Recorder, value: Any, low: Any, high: Any, out: Any = None) -> Any:
    if low is None and high is None:
        tracer.fail("clip: give a_min, a_max or both")
    result = value
    if low is not None:
        result = ufunc(tracer, "maximum", (result, low))
    if high is not None:
        result = ufunc(tracer, "minimum", (result, high))
    if out is not None:
        assign(tracer, out, result._node, "clip")
        return out
    return result


def reduction(tracer: Recorder, op: str, value: Any, axis: Any = None, dtype: Any = None, out: Any = None,
              keepdims: Any = False) -> Any:
    """``sum``/``prod``/``max``/``min``/``all``/``any`` over ``axis`` (None, an int or a tuple)."""
    op = _REDUCE_ALIASES.get(op, op)
    if op not in _rules.REDUCTIONS:
        tracer.fail(f"the reduction {op!r} is not supported (fused reductions: {', '.join(_rules.REDUCTIONS)})")
    node = as_node(tracer, value, op)
    if node.is_scalar:
        tracer.fail(f"{op}() of a scalar: reduce an array argument, or compute it outside the fused function")
    if op.startswith("nan"):
        has_nan = _rules.kind(node.dtype) in "fc"
        if op in ("nansum", "nanprod"):  # NumPy: a NaN counts as 0 in a sum, 1 in a product
            if has_nan:
                traced = TraceValue(node)
                node = where(tracer, ufunc(tracer, "isnan", (traced,)), 0 if op == "nansum" else 1, traced)._node
            op = op[3:]
        elif not has_nan:  # nanmax / nanmin of integers or booleans: max / min
            op = op[3:]
    axes = _normalize_axes(tracer, op, axis, node.ndim)
    requested = None
    if dtype is not None:
        requested = _rules.dtype_name(dtype)
        if requested is None:
            tracer.fail(f"{op}(..., dtype={dtype!r}): not a dtype kspec supports")
    result = _rules.reduction_dtype(op, node.dtype, requested)
    if not axes:  # NumPy: reducing over no axis is a cast
        reduced = Node(_graph.CAST, result, node.ndim, (node,), where=user_location())
    else:
        ndim = node.ndim if keepdims else node.ndim - len(axes)
        attrs = {"op": op, "axes": axes, "keepdims": bool(keepdims), "acc": _rules.accumulator_dtype(result)}
        reduced = Node(_graph.REDUCE, result, ndim, (node,), attrs, where=user_location())
    if out is not None:
        assign(tracer, out, reduced, op)
        return out
    return TraceValue(reduced)


def _normalize_axes(tracer: Recorder, op: str, axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    items = axis if isinstance(axis, (tuple, list)) else (axis,)
    axes = []
    for a in items:
        try:
            k = _operator.index(a)
        except TypeError:
            tracer.fail(f"{op}(axis={axis!r}): an axis must be an int or a tuple of ints")
        if not -ndim <= k < ndim:
            raise AxisError(
                f"kspec.fuse: function '{tracer.func_name}' ({user_location()}): {op}: axis {k} is out of bounds for "
                f"array of dimension {ndim}", axis=k, ndim=ndim
            )
        axes.append(k % ndim)
    if len(set(axes)) != len(axes):
        raise KspecValueError(f"kspec.fuse: function '{tracer.func_name}' ({user_location()}): {op}: duplicate value in 'axis'")
    return tuple(sorted(axes))


# -- the protocols ------------------------------------------------------------------------------------


def numpy_ufunc(tracer: Recorder, uf: np.ufunc, method: str, inputs: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    name = uf.__name__
    if method == "reduce":
        op = _UFUNC_REDUCE.get(name)
        if op is None:
            tracer.fail(f"numpy.{name}.reduce is not supported (fused reductions: add, multiply, maximum, minimum, logical_and, logical_or)")
        args = _bind(tracer, f"numpy.{name}.reduce", inputs, kwargs, ("array", "axis", "dtype", "out", "keepdims"), {"axis": 0})
        return reduction(tracer, op, args["array"], args.get("axis"), args.get("dtype"), args.get("out"), args.get("keepdims", False))
    if method != "__call__":
        tracer.fail(f"numpy.{name}.{method} is not supported inside a fused function")
    return call_ufunc(tracer, name, inputs, kwargs)


def call_ufunc(tracer: Recorder, name: str, inputs: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """A ufunc call with NumPy's keywords: ``out=``, ``dtype=``, and ``where=`` with ``out=``."""
    extra = {k: v for k, v in kwargs.items() if k not in ("out", "dtype", "where")}
    if extra.pop("casting", "same_kind") != "same_kind":
        tracer.fail(f"{name}: casting= is not supported inside a fused function")
    extra.pop("order", None), extra.pop("subok", None)
    if extra:
        tracer.fail(f"{name}: unexpected keyword argument {next(iter(extra))!r}")
    out = kwargs.get("out")
    if isinstance(out, tuple) and len(out) == 1:
        out = out[0]
    mask = kwargs.get("where", True)
    if mask is True:
        return ufunc(tracer, name, inputs, out=out, dtype=kwargs.get("dtype"))
    # where=: the result where mask holds, the output's current values elsewhere (so out= is needed: without
    # it NumPy leaves those elements uninitialized)
    targets = out if isinstance(out, tuple) else (out,)
    if out is None or any(not isinstance(t, TraceValue) for t in targets):
        tracer.fail(f"{name}(..., where=mask) needs out= (an array argument): NumPy leaves the elements where mask "
                    "is False uninitialized")
    results = ufunc(tracer, name, inputs, dtype=kwargs.get("dtype"))
    for target, result in zip(targets, results if isinstance(results, tuple) else (results,)):
        chosen = where(tracer, mask, result, target)
        assign(tracer, target, chosen._node, f"ufunc '{name}'")
    return out


_FUNCTION_PARAMS = {
    "sum": ("a", "axis", "dtype", "out", "keepdims"),
    "prod": ("a", "axis", "dtype", "out", "keepdims"),
    "max": ("a", "axis", "out", "keepdims"),
    "min": ("a", "axis", "out", "keepdims"),
    "all": ("a", "axis", "out", "keepdims"),
    "any": ("a", "axis", "out", "keepdims"),
    "nansum": ("a", "axis", "dtype", "out", "keepdims"),
    "nanprod": ("a", "axis", "dtype", "out", "keepdims"),
    "nanmax": ("a", "axis", "out", "keepdims"),
    "nanmin": ("a", "axis", "out", "keepdims"),
}


def numpy_function(tracer: Recorder, func: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """A NumPy function (``__array_function__``): reductions, where, clip, astype, real, imag."""
    name = getattr(func, "__name__", str(func))
    op = _REDUCE_ALIASES.get(name)
    if op is not None:
        bound = _bind(tracer, f"numpy.{name}", args, kwargs, _FUNCTION_PARAMS[op], {})
        return reduction(tracer, op, bound["a"], bound.get("axis"), bound.get("dtype"), bound.get("out"), bound.get("keepdims", False))
    if name == "where":
        if len(args) != 3 or kwargs:
            tracer.fail("numpy.where needs (condition, x, y) inside a fused function; the one-argument form has a data-dependent shape")
        return where(tracer, *args)
    if name == "clip":
        bound = _bind(tracer, "numpy.clip", args, kwargs, ("a", "a_min", "a_max", "out"), {})
        low = bound.get("a_min", kwargs.get("min"))
        high = bound.get("a_max", kwargs.get("max"))
        return clip(tracer, bound["a"], low, high, bound.get("out"))
    if name == "astype":
        return astype(tracer, args[0], args[1] if len(args) > 1 else kwargs.get("dtype"))
    if name in ("real", "imag"):
        return (real if name == "real" else imag)(tracer, args[0])
    if name in ("conj", "conjugate"):
        return ufunc(tracer, "conjugate", args[:1])
    if name == "copy":
        return copy(tracer, args[0])
    tracer.fail(
        f"numpy.{name} is not supported inside a fused function (supported: ufuncs, where, clip, astype, real, "
        "imag, and the reductions sum, prod, max/amax, min/amin, all, any)"
    )


def _bind(tracer: Recorder, what: str, args: Sequence[Any], kwargs: dict[str, Any], names: Sequence[str],
          defaults: dict[str, Any]) -> dict[str, Any]:
    """Positional and keyword arguments of ``what`` by name (NumPy's parameter order)."""
    if len(args) > len(names):
        tracer.fail(f"{what} takes at most {len(names)} positional arguments, got {len(args)}")
    bound = dict(defaults)
    bound.update(zip(names, args))
    for key, value in kwargs.items():
        if key in ("initial", "where") and value is not None and value is not True:
            tracer.fail(f"{what}: {key}= is not supported inside a fused function")
        if key in names or key in ("min", "max"):
            bound[key] = value
        elif key not in ("initial", "where"):
            tracer.fail(f"{what}: unexpected keyword argument {key!r}")
    return bound
