"""Static types shared by kspec's typed APIs (the modules ``kspec generate`` writes).

Only typing here: importing this module loads nothing of the runtime.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["CudaArray"]


class CudaArray(Protocol):
    """Any CUDA array: CuPy arrays, PyTorch tensors, ``kspec.DeviceArray`` all match it structurally."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def dtype(self) -> Any: ...
