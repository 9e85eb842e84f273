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
_state = {"enabled": False, "jit": False}  # jit: cupyx.jit's names are swapped too


def _constructor_table() -> dict[int, tuple[Any, Any]]:
    """id(CuPy's object) -> (CuPy's, kspec's) for the constructors and fuse, as bound in ``cupy`` and
    ``cupy._core`` (both imported by the caller)."""
    from .. import kernels
    from ..fuse import fuse

    ours = {"fuse": fuse, **{name: getattr(kernels, name) for name in CONSTRUCTORS if name != "fuse"}}
    table: dict[int, tuple[Any, Any]] = {}
    for home in _HOMES:
        module = sys.modules[home]
        for name in CONSTRUCTORS:
            original = module.__dict__.get(name)
            if original is not None:
                table[id(original)] = (original, ours[name])
    return table


def _jit_table() -> dict[int, tuple[Any, Any]]:
    """The same for the names of ``cupyx.jit`` (imported by the caller) that kspec.jit has: its decorator,
    builtins, and namespaces such as ``cg``."""
    from .. import jit as kjit

    namespace = sys.modules["cupyx.jit"].__dict__
    return {id(namespace[name]): (namespace[name], getattr(kjit, name)) for name in kjit.__all__ if name in namespace}


# Never rebound: kspec itself, and CuPy's own implementation of what is swapped (cupyx.jit's transpiler and
# builtins, which cupy.vectorize still uses, and cupy._core's submodules); nor, outside the homes, the module that
# defines an original (the check in _bindings): CuPy's machinery stays whole and only its public names change.
_NEVER = ("kspec.", "cupyx.jit.", "cupy._core.")


def _is_python_module(module: ModuleType) -> bool:
    """A module whose globals are looked up at run time: Python source (not an extension, not a builtin)."""
    origin = module.__dict__.get("__file__")
    return isinstance(origin, str) and origin.endswith(".py")


def _bindings(table: dict[int, tuple[Any, Any]]) -> list[tuple[ModuleType, str, Any, Any]]:
    """(module, name, CuPy's object, kspec's) for every binding of one of CuPy's objects the swap replaces.

    Only plain modules are read, through their ``__dict__``: an object of another type in ``sys.modules`` may
    run code on any attribute access (a lazy module imports itself then: from inside CuPy's own import, as the
    launcher's hook runs, that was a circular import of cupyx on the GPU machine), and one not loaded yet holds
    no bindings."""
    found = []
    homes = {id(m) for name in (*_HOMES, "cupyx.jit") if (m := sys.modules.get(name)) is not None}
    for module in list(sys.modules.values()):
        if module is None:  # a name blocked from import (sys.modules[name] = None): nothing bound there
            continue
        home = id(module) in homes
        if not home and (type(module) is not ModuleType or not _is_python_module(module)):
            continue
        if not home and (module.__name__ == "kspec" or module.__name__.startswith(_NEVER)):
            continue
        items = list(module.__dict__.items())
        for name, value in items:
            entry = table.get(id(value))
            if entry is not None and entry[0] is value and (home or getattr(value, "__module__", None) != module.__name__):
                found.append((module, name, entry[0], entry[1]))
    return found


def enable(*, import_cupy: bool = True) -> None:
    """Serve CuPy's kernel constructors, ``cupy.fuse`` and ``cupyx.jit`` from kspec in this process.

    ``cupyx.jit``'s names are swapped here where it is imported; else :func:`swap_jit` swaps them once it is
    (kspec.cupy.enable() has kspec/cupy/_hook.py's finder wait for it). Importing it here would import ``cupyx``,
    and with it SciPy's sparse package (a quarter of a second on the GPU host), in programs that use CuPy alone,
    as CuPy's own import does not. ``import_cupy=False`` (the launcher's import hook, inside CuPy's own import):
    swap what is imported now."""
    with _lock:
        if _state["enabled"]:
            return
        if import_cupy:
            import cupy._core  # noqa: F401  (binds cupy too)
        _rebind(_constructor_table())
        _join_cupy_machinery()
        _state["enabled"] = True
        if "cupyx.jit" in sys.modules and hasattr(sys.modules["cupyx.jit"], "rawkernel"):
            swap_jit()
        _forget_built_kernels()
    from ..kernels import preload_call_path

    preload_call_path()  # what the first kernel call would load, loaded at the program's start as CuPy's is


def swap_jit() -> None:
    """Swap ``cupyx.jit``'s names, once it is imported, where the constructors are swapped already."""
    with _lock:
        if _state["enabled"] and not _state["jit"]:
            _rebind(_jit_table())
            _state["jit"] = True


def _rebind(table: dict[int, tuple[Any, Any]]) -> None:
    for module, name, original, replacement in _bindings(table):
        setattr(module, name, replacement)
        _saved.append((module, name, original))


def _join_cupy_machinery() -> None:
    """What CuPy's own machinery does around kernels, done for kspec's: failed compiles are CuPy's CompileException
    too (kspec/cupy/_compile_error.py); raw modules are kept in CuPy's kernel cache too where a program pointed it
    (kspec/cupy/_cache_bridge.py); ``cupy._util.clear_memo()`` -- which makes CuPy look its kernels up again --
    also forgets kspec's constructor calls, so the next identical call loads its module again, as CuPy's would."""
    from .. import kernels
    from ._cache_bridge import CupyKernelCache
    from ._compile_error import compile_error_type

    kernels.set_module_cache(CupyKernelCache())
    kernels.set_compile_error_type(compile_error_type)
    util = sys.modules.get("cupy._util")
    clear = getattr(util, "clear_memo", None)
    if util is None or not callable(clear):
        return

    def clear_memo(*args: Any, **kwargs: Any) -> Any:
        kernels.clear_constructor_memos()
        return clear(*args, **kwargs)

    clear_memo.__wrapped__ = clear  # type: ignore[attr-defined]
    setattr(util, "clear_memo", clear_memo)  # noqa: B010  (a module of CuPy's: mypy knows no attributes of it)
    _saved.append((util, "clear_memo", clear))


def disable() -> None:
    """Put back every binding :func:`enable` changed (names rebound since then by other code are left as they are)."""
    with _lock:
        if _state["enabled"]:
            from .. import kernels

            kernels.set_module_cache(None)
            kernels.set_compile_error_type(None)
        while _saved:
            module, name, original = _saved.pop()
            setattr(module, name, original)
        if _state["enabled"]:
            _forget_built_kernels()
        _state["enabled"] = _state["jit"] = False


def _forget_built_kernels() -> None:
    util = sys.modules.get("cupy._util")
    clear = getattr(util, "clear_memo", None)
    clear = getattr(clear, "__wrapped__", clear)  # CuPy's own: kspec's constructor calls stay remembered
    if callable(clear):
        clear()


def is_enabled() -> bool:
    """Whether CuPy's constructors are kspec's now (:func:`enable` ran and :func:`disable` did not since)."""
    return _state["enabled"]
