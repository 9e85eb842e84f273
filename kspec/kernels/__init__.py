"""The user-facing kernel callables."""

from __future__ import annotations

from ._raw import DeviceGlobal, RawKernel, RawModule

__all__ = ["DeviceGlobal", "RawKernel", "RawModule"]
