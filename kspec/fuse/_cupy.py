"""What CuPy's functions see of a trace, when CuPy is loaded (kspec never imports it).

CuPy reaches a traced value three ways:

* a CuPy ufunc hands the call to any argument with ``__cupy_override_elementwise_kernel__``
  (:func:`cupy_kernel`);
* routines with no hook for a foreign object (``cupy.nansum``, ``cupy.nanprod``, ``cupy.nanmax``,
  ``cupy.nanmin``) first ask ``cupy._core._fusion_thread_local`` whether ``cupy.fuse`` is tracing, and if
  so call ``thread_local.history.call_reduction`` (``cupy.sum``, ``cupy.amax``, ``cupy.where``,
  ``cupy.clip`` ask too, and ``call_ufunc``). When a first trace fails, the second sets that flag
  (:func:`enter`) and installs a :class:`History` that forwards those calls to kspec's steps;
  :func:`leave` restores what was there. Not on the first trace: while fusing, CuPy refuses
  ``keepdims=True`` in its reductions, which kspec otherwise supports;
* ``cupy.get_array_module(x)`` is an ``isinstance`` test against CuPy's fusion classes, answered by
  ``TraceValue.__class__`` (:mod:`._value`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _steps
from ._value import Recorder
from ._ufuncs import CUPY_ONLY, SUPPORTED

# CuPy's reduction kernels by name (without "cupy_" and a "_with_dtype" / "_complex_dtype" tail): kspec's op.
_REDUCTIONS = {"sum": "sum", "prod": "prod", "max": "max", "min": "min", "all": "all", "any": "any",
               "nansum": "nansum", "nanprod": "nanprod", "nanmax": "nanmax", "nanmin": "nanmin"}


def _thread_local() -> Any:
    module = sys.modules.get("cupy._core._fusion_thread_local")
    if module is None:
        module = getattr(sys.modules.get("cupy._core"), "_fusion_thread_local", None)
    return getattr(module, "thread_local", None)


def loaded() -> bool:
    """Whether CuPy's fusion dispatch is there to route (CuPy imported)."""
    return _thread_local() is not None


def raised_in_cupy(exc: BaseException) -> bool:
    """Whether ``exc`` was raised with a frame of CuPy's Python code on the stack (below the traced function)."""
    tb = exc.__traceback__
    while tb is not None:
        if str(tb.tb_frame.f_globals.get("__name__", "")).partition(".")[0] in ("cupy", "cupyx"):
            return True
        tb = tb.tb_next
    return False


def enter(tracer: Recorder) -> Any:
    """Make CuPy's routines report to ``tracer``; returns what :func:`leave` restores (None: CuPy not loaded)."""
    local = _thread_local()
    if local is None:
        return None
    saved = (local, getattr(local, "is_new_fusing", False), getattr(local, "history", None))
    local.is_new_fusing = True
    local.history = History(tracer)
    return saved


def leave(saved: Any) -> None:
    if saved is not None:
        local, fusing, history = saved
        local.is_new_fusing, local.history = fusing, history


def _name(kernel: Any) -> str:
    return str(getattr(kernel, "name", None) or getattr(kernel, "__name__", "")).removeprefix("cupy_")


class History:
    """The object CuPy's routines call while fusing (the methods CuPy's own fusion history has)."""

    def __init__(self, tracer: Recorder) -> None:
        self._tracer = tracer

    def call_ufunc(self, ufunc: Any, *args: Any, **kwargs: Any) -> Any:
        return cupy_kernel(self._tracer, ufunc, args, kwargs)

    def call_reduction(self, kernel: Any, *args: Any, **kwargs: Any) -> Any:
        name = _name(kernel)
        for tail in ("_with_dtype", "_complex_dtype", "_auto_dtype", "_keep_dtype"):
            name = name.removesuffix(tail)
        op = _REDUCTIONS.get(name)
        if op is None:
            self._tracer.fail(f"cupy's reduction {name!r} is not supported inside a fused function "
                              f"(supported: {', '.join(_REDUCTIONS)})")
        if len(args) != 1:
            self._tracer.fail(f"{name}() takes 1 positional argument but {len(args)} were given")
        unknown = set(kwargs) - {"axis", "dtype", "out", "keepdims"}
        if unknown:
            self._tracer.fail(f"{name}: unexpected keyword argument {sorted(unknown)[0]!r}")
        return _steps.reduction(self._tracer, op, args[0], kwargs.get("axis"), kwargs.get("dtype"), kwargs.get("out"),
                                kwargs.get("keepdims", False))

    def call_indexing(self, value: Any, index: Any) -> Any:
        return value[index]


def cupy_kernel(tracer: Recorder, kernel: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """A CuPy ufunc called on a traced value (``__cupy_override_elementwise_kernel__``, or CuPy's fusion
    dispatch for ``cupy.where`` / ``cupy.clip`` / ``cupy.copy``)."""
    name = _name(kernel)
    if type(kernel).__name__ != "ufunc":
        tracer.fail(f"{type(kernel).__name__} '{name}' cannot be called inside a fused function; only CuPy's ufuncs can")
    if name == "where":
        return _steps.where(tracer, *args)
    if name == "clip":
        return _steps.clip(tracer, args[0], args[1], args[2], kwargs.get("out"))
    if name == "copy":  # cupy.copy(x), and the copy behind x[...] = v in CuPy's own fusion
        out = kwargs.get("out")
        if out is not None:
            _steps.assign(tracer, out, _steps.as_node(tracer, args[0], "copy"), "copy")
            return out
        return _steps.copy(tracer, args[0])
    if name in ("real", "imag"):
        return (_steps.real if name == "real" else _steps.imag)(tracer, args[0])
    if name in CUPY_ONLY:  # cupyx.rsqrt, cupy.sinc, cupy.i0, cupy.fix; cupy.angle's and cupy.around's ufuncs
        return _steps.call_ufunc(tracer, name, args, kwargs)
    numpy_ufunc = getattr(np, name, None)
    if not isinstance(numpy_ufunc, np.ufunc) or numpy_ufunc.__name__ not in SUPPORTED:
        tracer.fail(f"cupy.{name} is not supported inside a fused function")
    return _steps.call_ufunc(tracer, numpy_ufunc.__name__, args, kwargs)


__all__ = ["History", "cupy_kernel", "enter", "leave"]
