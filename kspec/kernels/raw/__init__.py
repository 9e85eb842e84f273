"""RawModule and RawKernel (CuPy's raw CUDA kernels): their constructor arguments, the build identical
constructions share, raw spec tables, tuned raw kernels and a second cache another library owns.

A room of :mod:`kspec.kernels`: the rest of the layer uses it through the names below, each loading its module on
first access, so a process loads only what its calls use (one serving elementwise kernels never loads the reduction
planner); a room imports only the rooms below it (docs/architecture.md, "Rooms").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_getattr

if TYPE_CHECKING:  # what mypy reads (explicit re-exports); at run time each name loads its module on first access
    from ._module import (
        DeviceGlobal as DeviceGlobal, RawKernel as RawKernel, RawModule as RawModule,
        watch_raw_kernel_classes as watch_raw_kernel_classes,
    )
    from ._module_cache import (
        ModuleCache as ModuleCache, module_cache as module_cache, set_module_cache as set_module_cache,
    )
    from ._spec_table import raw_callable as raw_callable, raw_kernel_of_table as raw_kernel_of_table
    from ._tuned import TunedKernel as TunedKernel

_LAZY = {
    "DeviceGlobal": "_module",
    "ModuleCache": "_module_cache",
    "RawKernel": "_module",
    "RawModule": "_module",
    "TunedKernel": "_tuned",
    "module_cache": "_module_cache",
    "raw_callable": "_spec_table",
    "raw_kernel_of_table": "_spec_table",
    "set_module_cache": "_module_cache",
    "watch_raw_kernel_classes": "_module",
}

__getattr__ = lazy_getattr(__name__, _LAZY, globals())

__all__ = sorted(_LAZY)
