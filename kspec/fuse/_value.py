"""The symbolic values of a trace, and what they ask of the trace they belong to.

A :class:`TraceValue` stands for an argument or an intermediate result. Python operators, NumPy ufuncs
(``__array_ufunc__``), NumPy functions (``__array_function__``), CuPy ufuncs
(``__cupy_override_elementwise_kernel__``) and the ndarray methods CuPy's functions call on a foreign
object (``x.sum(axis, dtype, out, keepdims)``) all go to the trace in progress, a :class:`Recorder`
(:class:`._tracer.Tracer`, which hands them to :mod:`._steps`, :mod:`._index` and :mod:`._cupy`); those
create the new values. Anything whose answer would depend on the data (``bool(x)``, ``if x > 0``) or on a
shape the trace does not know (``x.shape``) is an error naming the function and its line.

This module imports none of the modules that record steps: they import it, for the values they create.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Sequence
from typing import Any, NoReturn, Protocol

import numpy as np

from .._errors import FuseError
from . import _graph
from ._graph import Node

_HERE = os.path.dirname(os.path.abspath(__file__))
_SKIPPED_ROOTS = (_HERE, os.path.dirname(np.__file__))
_NO_SCALAR = "Cannot convert to Python scalar in cupy.fuse"  # CuPy's words (TypeError) for bool(x), int(x), ...
_local = threading.local()  # .recorder: the trace in progress on this thread


class Recorder(Protocol):
    """The trace in progress, as its values and the steps see it (:class:`._tracer.Tracer`)."""

    func_name: str
    arg_values: list[TraceValue]
    views: dict[tuple[Any, ...], Node]  # (argument index, index key) -> its view's node

    def fail(self, what: str, where: str | None = None, *, phrase: str = "",
             error: type[FuseError] = FuseError) -> NoReturn: ...

    # -- what a traced value asks of it: each records a step and returns the value(s) it makes ------------

    def operator(self, name: str, operands: Sequence[Any]) -> Any: ...

    def inplace(self, name: str, target: TraceValue, other: Any) -> Any: ...

    def numpy_ufunc(self, uf: np.ufunc, method: str, inputs: Sequence[Any], kwargs: dict[str, Any]) -> Any: ...

    def numpy_function(self, func: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any: ...

    def cupy_kernel(self, kernel: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any: ...

    def cupy_reduction(self, kernel: Any, value: TraceValue, axis: Any, dtype: Any, out: Any, keepdims: Any) -> Any: ...

    def getitem(self, value: TraceValue, key: Any) -> TraceValue: ...

    def setitem(self, target: TraceValue, key: Any, value: Any) -> None: ...

    def astype(self, value: Any, dtype: Any) -> TraceValue: ...

    def copy(self, value: Any) -> TraceValue: ...

    def real(self, value: Any) -> TraceValue: ...

    def imag(self, value: Any) -> TraceValue: ...

    def clip(self, value: Any, low: Any, high: Any, out: Any = None) -> Any: ...

    def reduction(self, op: str, value: Any, axis: Any = None, dtype: Any = None, out: Any = None,
                  keepdims: Any = False) -> Any: ...


def current() -> Recorder | None:
    """The trace in progress on this thread, if any."""
    return getattr(_local, "recorder", None)


def set_current(recorder: Recorder | None) -> None:
    """Make ``recorder`` the trace in progress on this thread (None: no trace)."""
    _local.recorder = recorder


def user_location() -> str:
    """``file:line`` of the innermost frame outside kspec.fuse, NumPy and CuPy: the user's line."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_SKIPPED_ROOTS) and "/cupy/" not in filename and not filename.startswith("<frozen"):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return "<unknown>"


def _tracer() -> Recorder:
    tracer = current()
    if tracer is None:  # a TraceValue that escaped its trace (stored in a global, returned in a closure)
        raise FuseError("kspec.fuse: a traced value was used after its function returned; fused functions must not keep them")
    return tracer


class TraceValue:
    """A symbolic array or scalar inside a fused function. ``_node`` is its current value: in-place
    operations (``x += y``, ``out=x``) replace it, so every alias of the object sees the update, as with
    NumPy arrays."""

    __slots__ = ("_node", "_arg_index", "__weakref__")
    __array_priority__ = 10000  # NumPy operators defer to ours (ndarray + TraceValue -> our __radd__)

    def __init__(self, node: Node, arg_index: int | None = None) -> None:
        self._node = node
        self._arg_index = arg_index

    # -- what the trace knows without data ----------------------------------------------------------

    @property
    def dtype(self) -> Any:
        from .. import dtypes

        return dtypes.BY_NAME[self._node.dtype].numpy or self._node.dtype

    @property
    def ndim(self) -> int:
        return max(self._node.ndim, 0)

    @property
    def shape(self) -> NoReturn:
        _tracer().fail(".shape is not known while tracing: a fused kernel serves every shape of its argument types")

    @property
    def size(self) -> NoReturn:
        _tracer().fail(".size is not known while tracing: a fused kernel serves every shape of its argument types")

    @property
    def T(self) -> NoReturn:
        _tracer().fail("transposing (.T) is not an elementwise operation; transpose the argument before the call")

    def __repr__(self) -> str:
        return f"<kspec.fuse traced value dtype={self._node.dtype} ndim={self.ndim}>"

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        """What ``isinstance`` sees besides the real type: CuPy's fusion array class for a traced array once
        CuPy is loaded, so ``cupy.get_array_module(x)`` (an isinstance test, with no hook) answers ``cupy`` as
        it does inside ``cupy.fuse``. ``type(x)`` and ``isinstance(x, TraceValue)`` are unchanged."""
        return (_cupy_fusion_array_class() if self._node.ndim >= 0 else None) or TraceValue

    # -- data-dependent Python ---------------------------------------------------------------------

    def __bool__(self) -> NoReturn:
        _tracer().fail(
            "the truth value of a traced array is not known while tracing (data-dependent control flow: an "
            "`if`, `while`, `and`/`or` or bool() on a value computed from the arguments); express it with "
            "numpy.where(cond, a, b) or cupy.where, or move the branch outside the fused function",
            phrase=_NO_SCALAR,
        )

    def _no_conversion(self, what: str) -> NoReturn:
        _tracer().fail(f"{what} of a traced array is not known while tracing (it depends on the data)", phrase=_NO_SCALAR)

    def __int__(self) -> NoReturn:
        self._no_conversion("int()")

    def __float__(self) -> NoReturn:
        self._no_conversion("float()")

    def __complex__(self) -> NoReturn:
        self._no_conversion("complex()")

    def __index__(self) -> NoReturn:
        self._no_conversion("use as an index")

    def __len__(self) -> NoReturn:
        _tracer().fail("len() is not known while tracing: a fused kernel serves every shape of its argument types")

    def __iter__(self) -> NoReturn:
        _tracer().fail("iterating over a traced array is not supported: fused functions are elementwise")

    def __getitem__(self, key: Any) -> "TraceValue":
        return _tracer().getitem(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        _tracer().setitem(self, key, value)

    def __array__(self, *args: object, **kwargs: object) -> NoReturn:
        _tracer().fail("a traced value cannot become a NumPy array (the data lives on the device and is not known yet)")

    def __matmul__(self, other: object) -> NoReturn:
        _tracer().fail("matmul (@) is not an elementwise operation; fused functions are elementwise plus reductions")

    __rmatmul__ = __matmul__

    def __getattr__(self, name: str) -> NoReturn:
        if name.startswith("__"):
            raise AttributeError(name)
        _tracer().fail(f"x.{name} is not supported inside a fused function")

    # -- protocols of NumPy and CuPy -----------------------------------------------------------------

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return _tracer().numpy_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return _tracer().numpy_function(func, args, kwargs)

    def __cupy_override_elementwise_kernel__(self, kernel: Any, *args: Any, **kwargs: Any) -> Any:
        return _tracer().cupy_kernel(kernel, args, kwargs)

    def __cupy_override_reduction_kernel__(self, kernel: Any, axis: Any, dtype: Any, out: Any, keepdims: Any) -> Any:
        return _tracer().cupy_reduction(kernel, self, axis, dtype, out, keepdims)

    # -- ndarray methods (CuPy's functions call them on a foreign object) -----------------------------

    def astype(self, dtype: Any, order: Any = "K", casting: Any = None, subok: Any = None, copy: Any = True) -> "TraceValue":
        return _tracer().astype(self, dtype)

    def copy(self, order: Any = "K") -> "TraceValue":
        return _tracer().copy(self)

    def sum(self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False) -> "TraceValue":
        return _tracer().reduction("sum", self, axis, dtype, out, keepdims)

    def prod(self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False) -> "TraceValue":
        return _tracer().reduction("prod", self, axis, dtype, out, keepdims)

    def max(self, axis: Any = None, out: Any = None, keepdims: bool = False) -> "TraceValue":
        return _tracer().reduction("max", self, axis, None, out, keepdims)

    def min(self, axis: Any = None, out: Any = None, keepdims: bool = False) -> "TraceValue":
        return _tracer().reduction("min", self, axis, None, out, keepdims)

    def all(self, axis: Any = None, out: Any = None, keepdims: bool = False) -> "TraceValue":
        return _tracer().reduction("all", self, axis, None, out, keepdims)

    def any(self, axis: Any = None, out: Any = None, keepdims: bool = False) -> "TraceValue":
        return _tracer().reduction("any", self, axis, None, out, keepdims)

    def clip(self, min: Any = None, max: Any = None, out: Any = None) -> Any:
        return _tracer().clip(self, min, max, out)

    @property
    def real(self) -> "TraceValue":
        return _tracer().real(self)

    @property
    def imag(self) -> "TraceValue":
        return _tracer().imag(self)

    def conj(self) -> "TraceValue":
        return self._ufunc("conjugate", self)

    conjugate = conj

    # -- operators: each is the NumPy ufunc of the same meaning ------------------------------------

    def _ufunc(self, name: str, *operands: Any) -> Any:
        return _tracer().operator(name, operands)

    def _inplace(self, name: str, other: Any) -> Any:
        return _tracer().inplace(name, self, other)


def _binary(name: str) -> tuple[Any, Any, Any]:
    def forward(self: TraceValue, other: Any) -> Any:
        return self._ufunc(name, self, other)

    def reflected(self: TraceValue, other: Any) -> Any:
        return self._ufunc(name, other, self)

    def inplace(self: TraceValue, other: Any) -> Any:
        return self._inplace(name, other)

    return forward, reflected, inplace


_BINARY = {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "divide", "floordiv": "floor_divide",
    "mod": "remainder", "pow": "power", "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
    "lshift": "left_shift", "rshift": "right_shift",
}
for _py, _uf in _BINARY.items():
    _f, _r, _i = _binary(_uf)
    setattr(TraceValue, f"__{_py}__", _f)
    setattr(TraceValue, f"__r{_py}__", _r)
    setattr(TraceValue, f"__i{_py}__", _i)

for _py, _uf in {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal"}.items():
    setattr(TraceValue, f"__{_py}__", _binary(_uf)[0])
TraceValue.__eq__ = _binary("equal")[0]  # type: ignore[method-assign]
TraceValue.__ne__ = _binary("not_equal")[0]  # type: ignore[method-assign]
TraceValue.__hash__ = None  # type: ignore[assignment]  # like ndarray: == is elementwise
for _py, _uf in {"neg": "negative", "pos": "positive", "abs": "absolute", "invert": "invert"}.items():
    setattr(TraceValue, f"__{_py}__", lambda self, _uf=_uf: self._ufunc(_uf, self))
setattr(TraceValue, "__divmod__", lambda self, other: self._ufunc("divmod", self, other))  # noqa: B010 (undeclared for the checker)
setattr(TraceValue, "__rdivmod__", lambda self, other: self._ufunc("divmod", other, self))  # noqa: B010 (undeclared for the checker)


def _cupy_fusion_array_class() -> type | None:
    """CuPy's class of traced arrays (``cupy.get_array_module`` returns ``cupy`` for its instances), when CuPy
    is loaded (kspec never imports it)."""
    found = getattr(sys.modules.get("cupy._core.fusion"), "_FusionVarArray", None)
    return found if isinstance(found, type) else None


def argument(tracer: Recorder, index: int, dtype: str, ndim: int, weak: type | None) -> TraceValue:
    """The symbolic value of argument ``index``."""
    node = Node(_graph.ARG, dtype, ndim, attrs={"index": index}, weak=weak)
    value = TraceValue(node, index)
    tracer.arg_values.append(value)
    return value
