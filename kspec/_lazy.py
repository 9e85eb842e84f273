"""Lazy exports for a package ``__init__``: each name loads its private module on first access.

A package that serves a hot import path (a generated module imports ``kspec.kernels.load_specs`` only) keeps
its ``__init__`` free of imports and declares ``name -> private module``; ``importlib`` is loaded only when
a name is first asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, table: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``table`` maps a name to the private module (``"_files"``)
    that defines it; the value is stored in ``namespace`` (the package's globals) so later reads skip this."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        import importlib

        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    return __getattr__


# -- the debris of lazy imports --------------------------------------------------------------------------

imports_settled = [False]  # a list: read by the call paths without a global statement


def settle_imports() -> None:
    """Once per process, at kspec's first kernel call (its construction has imported the call machinery
    lazily): collect the collector's two young generations, so that the long-lived objects of those imports
    (modules, functions, classes: thousands) move to the oldest generation in the call that imported them.
    Left young, they make whichever later call triggers the next generation-1 collection pay a pass over them:
    1.0-1.5 ms landed in the second kernel's first call (benchmarks/host/second_kernel.py; an eagerly imported
    library pays it at import). Called as the first call starts, not as it ends: the call's own work then
    runs after it, and the next kernel's call does not start on the caches the collection went through.
    Nothing when the program turned the collector off."""
    imports_settled[0] = True
    import gc

    if gc.isenabled():
        gc.collect(1)
