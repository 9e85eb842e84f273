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
