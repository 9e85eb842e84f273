"""Enable the swap when CuPy is first imported: what ``python -m kspec.cupy`` and ``KSPEC_CUPY=1`` child processes
use, so that a program (or a test worker) that never imports CuPy never pays for importing it.

A finder first on ``sys.meta_path`` lets the import system find ``cupy`` (and ``cupyx.jit``) as usual and wraps
the loader's ``exec_module``: once CuPy's package has run, the constructors are swapped, before the importing code
sees the module; once ``cupyx.jit`` has, its names. Nothing else is imported from inside CuPy's import (``import
cupyx`` imports ``cupy`` first: importing cupyx.jit there would be circular).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import MutableMapping
from types import ModuleType
from typing import Any

ENV = "KSPEC_CUPY"  # "1": processes started by `python -m kspec.cupy` (and their children) swap on import
# kspec/_startup/sitecustomize.py: first on PYTHONPATH, it runs at start-up in every Python process started so
STARTUP_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_startup")


def launch_environment(env: MutableMapping[str, str], *, swap: bool = True) -> None:
    """Set in ``env`` what the processes started with it need for the start-up hook to run (its directory first on
    ``PYTHONPATH``) and, with ``swap``, to put kspec under CuPy (``KSPEC_CUPY=1``): what ``python -m kspec.cupy``
    and ``kspec capture`` give the programs they run."""
    if swap:
        env[ENV] = "1"
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = STARTUP_DIR + (os.pathsep + path if path else "")


class _SwapOnImport(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _WATCHED:
            return None
        sys.meta_path.remove(self)  # find CuPy's own spec with the finders that come after this one
        try:
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        run = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            from ._swap import enable, swap_jit

            if fullname == "cupy":
                enable(import_cupy=False)
            else:
                swap_jit()
                uninstall()

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


_WATCHED = ("cupy", "cupyx.jit")
_finder = _SwapOnImport()


def install() -> None:
    """Swap now what of CuPy is imported already, the rest as soon as it is."""
    if "cupy" in sys.modules:
        from ._swap import enable

        enable(import_cupy=False)
    watch_jit()


def watch_jit() -> None:
    """Swap ``cupyx.jit``'s names as soon as it is imported (where the constructors are swapped already)."""
    if "cupyx.jit" not in sys.modules and _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def uninstall() -> None:
    if _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
