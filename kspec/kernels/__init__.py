"""The user-facing kernel callables: elementwise, reduction and raw kernels, and ``load`` for spec files."""

from __future__ import annotations

from ._binaries import BinaryStore
from ._elementwise import ElementwiseKernel
from ._library import KernelLibrary, load, load_specs
from ._raw import DeviceGlobal, RawKernel, RawModule
from ._reduction import ReductionKernel

__all__ = ["BinaryStore", "load_specs", "DeviceGlobal", "ElementwiseKernel", "KernelLibrary", "RawKernel", "RawModule", "ReductionKernel", "load"]
