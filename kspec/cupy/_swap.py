"""The swap itself: which of CuPy's names kspec serves, where they are bound, and putting them back.

CuPy's Python-level entry points to user kernels are its constructors (``ElementwiseKernel``, ``ReductionKernel``,
``RawKernel``, ``RawModule``), ``cupy.fuse`` and the decorator and builtins of ``cupyx.jit``. They are bound as
``cupy.X`` and ``cupy._core.X`` (where CuPy's own Python code, cupyx.scipy among it, looks them up at call time),
as ``cupyx.jit.X``, and in every module that imported them by name (``from cupy import ElementwiseKernel``)
before the swap. The swap rebinds each of those to kspec's object and remembers the original, so ``disable``
restores exactly what it changed. Both also clear CuPy's memo of built kernels (``cupy._util.clear_memo``:
cupyx and CuPy's Python routines keep what their kernel builders returned, per device), so the next call builds
its kernels with the constructors now in place instead of reusing the other library's. Compiled (Cython) modules are left alone: CuPy's own compiled routines build
their kernels through C-level calls the swap cannot reach, and a Cython module may call C methods on what it
builds; their kernels stay CuPy's.
"""

from __future__ import annotations

import sys
import threading
from types import ModuleType
from typing import Any

# CuPy's constructors and fuse, as kspec names them (the same names in both libraries)
CONSTRUCTORS = ("ElementwiseKernel", "ReductionKernel", "RawKernel", "RawModule", "fuse")
_HOMES = ("cupy", "cupy._core")  # where CuPy binds them; cupyx.jit's names are handled apart

_lock = threading.RLock()
_saved: list[tuple[ModuleType, str, Any]] = []  # (module, name, CuPy's object) for every rebinding made
_state = {"enabled": False}


def _replacements() -> dict[int, Any]:
    """id(CuPy's object) -> kspec's, for every name the swap serves; imports CuPy (the caller asked for it)."""
    import cupy
    import cupy._core as core
    import cupyx.jit

    from .. import jit as kjit
    from .. import kernels
    from ..fuse import fuse

    ours = {"fuse": fuse, **{name: getattr(kernels, name) for name in CONSTRUCTORS if name != "fuse"}}
    table: dict[int, Any] = {}
    for name in CONSTRUCTORS:
        for module in (cupy, core):
            original = module.__dict__.get(name)
            if original is not None:
                table[id(original)] = (original, ours[name])
    for name in kjit.__all__:
        original = cupyx.jit.__dict__.get(name)
        if original is not None and not isinstance(original, ModuleType):
            table[id(original)] = (original, getattr(kjit, name))
    return table


def _is_python_module(module: object) -> bool:
    """A module whose globals are looked up at run time: Python source (not an extension, not a builtin)."""
    origin = getattr(module, "__file__", None)
    return isinstance(module, ModuleType) and isinstance(origin, str) and origin.endswith(".py")


def _bindings(table: dict[int, Any]) -> list[tuple[ModuleType, str, Any, Any]]:
    """(module, name, CuPy's object, kspec's) for every binding of one of CuPy's objects the swap replaces."""
    found = []
    homes = {sys.modules.get(name) for name in (*_HOMES, "cupyx.jit")}
    for module in list(sys.modules.values()):
        if module is None or not (module in homes or _is_python_module(module)):
            continue
        if module.__name__.startswith("kspec.") or module.__name__ == "kspec":
            continue
        try:
            items = list(vars(module).items())
        except TypeError:
            continue
        for name, value in items:
            entry = table.get(id(value))
            if entry is not None and entry[0] is value:
                found.append((module, name, entry[0], entry[1]))
    return found


def enable() -> None:
    """Serve CuPy's kernel constructors, ``cupy.fuse`` and ``cupyx.jit`` from kspec in this process."""
    with _lock:
        if _state["enabled"]:
            return
        for module, name, original, replacement in _bindings(_replacements()):
            setattr(module, name, replacement)
            _saved.append((module, name, original))
        _state["enabled"] = True
        _forget_built_kernels()


def disable() -> None:
    """Put back every binding :func:`enable` changed (names rebound since then by other code are left as they are)."""
    with _lock:
        while _saved:
            module, name, original = _saved.pop()
            setattr(module, name, original)
        if _state["enabled"]:
            _forget_built_kernels()
        _state["enabled"] = False


def _forget_built_kernels() -> None:
    util = sys.modules.get("cupy._util")
    clear = getattr(util, "clear_memo", None)
    if callable(clear):
        clear()


def is_enabled() -> bool:
    """Whether CuPy's constructors are kspec's now (:func:`enable` ran and :func:`disable` did not since)."""
    return _state["enabled"]

