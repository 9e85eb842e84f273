"""deploy_example: two array functions whose CUDA kernels come precompiled in the wheel.

``deploy_example.kernels`` is generated at build time by kspec's hatchling hook from ``specs/ops.toml``
(typed functions, one per kernel), with the CUBINs for sm_80 and sm_90 next to it in ``_binaries/``.
Calls load the CUBIN for the device: no NVRTC, no compile on first call.
"""

from __future__ import annotations

from typing import Any

from .kernels import ops

__all__ = ["l2norm", "ops", "scaled_diff"]


def scaled_diff(x: Any, y: Any, scale: float = 1.0) -> Any:
    """``scale * (x - y)`` for two float32 or float16 GPU arrays (CuPy, PyTorch, kspec, ...) of one dtype.

    The wheel has each instantiation twice: with ``scale`` a Python number (the usual call) and with
    ``scale`` a device array, so both calls load a shipped CUBIN.
    """
    return ops.scaled_diff(x, y, scale)


def l2norm(x: Any, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Any:
    """The Euclidean norm of a float32 GPU array, over all elements or along ``axis``."""
    return ops.l2norm(x, axis=axis, keepdims=keepdims)
