"""A trace in progress: the :class:`Tracer` that a fused function's values report to.

Entered as a context manager, it is the thread's current trace (:func:`._value.current`), and with
``cupy_dispatch`` CuPy's fusion dispatch reports to it too (:mod:`._cupy`). Each request of a traced value
(the :class:`._value.Recorder` protocol) goes to the module that records that kind of step: :mod:`._steps`
(ufuncs, casts, ``where``, ``clip``, reductions), :mod:`._index` (indexing) and :mod:`._cupy` (CuPy's
kernels).
"""

from __future__ import annotations

from typing import Any, NoReturn

from .._errors import FuseError
from . import _cupy, _index, _steps, _value
from ._graph import Node
from ._value import TraceValue, user_location


class Tracer:
    """One trace in progress: the function it runs, and the arguments whose values it may overwrite."""

    def __init__(self, func_name: str, cupy_dispatch: bool = False) -> None:
        self.func_name = func_name
        self.cupy_dispatch = cupy_dispatch  # route CuPy's fusion dispatch here (see _cupy)
        self.arg_values: list[TraceValue] = []
        self.views: dict[tuple[Any, ...], Node] = {}  # (argument index, index key) -> its view's node
        self._cupy_state: Any = None

    def __enter__(self) -> "Tracer":
        _value.set_current(self)
        self._cupy_state = _cupy.enter(self) if self.cupy_dispatch else None
        return self

    def __exit__(self, *exc: object) -> None:
        _value.set_current(None)
        _cupy.leave(self._cupy_state)

    def fail(self, what: str, where: str | None = None, *, phrase: str = "", error: type[FuseError] = FuseError) -> NoReturn:
        """Raise ``error`` naming the function and the user's line; ``phrase``: CuPy's words for the same
        error, which start the message."""
        lead = f"{phrase}: " if phrase else ""
        raise error(f"{lead}kspec.fuse: function '{self.func_name}' ({where or user_location()}): {what}")

    # -- what a traced value asks (the Recorder protocol): each module's function, bound to this trace ----

    operator = _steps.operator
    inplace = _steps.inplace
    numpy_ufunc = _steps.numpy_ufunc
    numpy_function = _steps.numpy_function
    astype = _steps.astype
    copy = _steps.copy
    real = _steps.real
    imag = _steps.imag
    clip = _steps.clip
    reduction = _steps.reduction
    getitem = _index.getitem
    setitem = _index.setitem
    cupy_kernel = _cupy.cupy_kernel

    def cupy_reduction(self, kernel: Any, value: TraceValue, axis: Any, dtype: Any, out: Any, keepdims: Any) -> Any:
        return _cupy.History(self).call_reduction(kernel, value, axis=axis, dtype=dtype, out=out, keepdims=keepdims)


__all__ = ["Tracer"]
