"""The array library of the device a kernel test runs on: CuPy on a GPU, NumPy on kspec's CPU device.

Kernel tests take the ``xp`` fixture (tests/conftest.py), parametrised by device: ``xp.asarray(host)`` puts
test data on the device, ``xp.asnumpy(result)`` brings a result back, and the rest (``xp.empty``,
``xp.float32``...) is the library's own. The GPU parameter carries ``@pytest.mark.gpu``; the CPU parameter
runs everywhere a host C++ compiler is found, inside ``kspec.use_device("cpu")``.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class HostArrays:
    """NumPy in CuPy's place: ``asarray`` copies (as a host-to-device copy would), ``asnumpy`` returns."""

    name = "cpu"

    def asarray(self, obj: Any, dtype: Any = None) -> np.ndarray:
        return np.array(obj, dtype=dtype, copy=True)

    def asnumpy(self, obj: Any) -> np.ndarray:
        return np.asarray(obj)

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)

    def __repr__(self) -> str:
        return "<NumPy on kspec's CPU device>"


def host_compiler_missing() -> str | None:
    """Why CPU-device tests cannot run here, or None."""
    try:
        from kspec.compiler import host_compiler

        host_compiler()
    except Exception as exc:
        return f"no host C++ compiler for kspec's CPU device: {exc}"
    return None
