"""The user-facing kernel callables: elementwise, reduction and raw kernels, and ``load`` for spec files."""

from __future__ import annotations

from typing import Any

# Lazy exports: a generated module imports ``load_specs`` only; each name loads its module on first access.
_LAZY = {
    "BinaryStore": "_binaries", "ElementwiseKernel": "_elementwise", "KernelLibrary": "_library", "load": "_library",
    "load_specs": "_library", "DeviceGlobal": "_raw", "RawKernel": "_raw", "RawModule": "_raw",
    "ReductionKernel": "_reduction",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kspec.kernels' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = ["BinaryStore", "load_specs", "DeviceGlobal", "ElementwiseKernel", "KernelLibrary", "RawKernel", "RawModule", "ReductionKernel", "load"]
