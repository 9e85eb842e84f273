"""The array library of the device a kernel test runs on: CuPy on a GPU, NumPy on kspec's CPU device.

Kernel tests take the ``xp`` fixture (tests/conftest.py), parametrised by device: ``xp.asarray(host)`` puts
test data on the device, ``xp.asnumpy(result)`` brings a result back, and the rest (``xp.empty``,
``xp.float32``...) is the library's own. The GPU parameter carries ``@pytest.mark.gpu``; the CPU parameter
runs everywhere a host C++ compiler is found, inside ``kspec.use_device("cpu")``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import kspec


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


def random_values(rng: np.random.Generator, shape: tuple[int, ...], dtype: str, span: int = 5) -> np.ndarray:
    """Test data of ``dtype``: integers in [-span, span], else standard normal values (complex: both parts)."""
    if np.dtype(dtype).kind == "i":
        return rng.integers(-span, span + 1, shape).astype(dtype)
    data = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        data = data + 1j * rng.standard_normal(shape)
    return data.astype(dtype)


def host_compiler_missing() -> str | None:
    """Why CPU-device tests cannot run here, or None."""
    try:
        from kspec.compiler import host_compiler

        host_compiler()
    except Exception as exc:
        return f"no host C++ compiler for kspec's CPU device: {exc}"
    return None


class ArrayLibrary:
    """One array library, seen through the few operations the tests need. ``kspec`` arrays live on the
    current device: a GPU, or kspec's CPU device inside ``kspec.use_device("cpu")``; ``numpy`` arrays are the
    CPU device's own."""

    def __init__(self, name: str) -> None:
        self.name = name
        if name == "numpy":
            self.mod = np
            self.array_type = np.ndarray
        elif name == "cupy":
            self.mod = pytest.importorskip("cupy")
            self.array_type = self.mod.ndarray
        elif name == "torch":
            self.mod = pytest.importorskip("torch")
            if not self.mod.cuda.is_available():
                pytest.skip("PyTorch has no CUDA here")
            self.array_type = self.mod.Tensor
        else:
            self.mod = kspec
            self.array_type = kspec.DeviceArray

    def asarray(self, host: np.ndarray):
        if self.name == "numpy":
            return np.array(host, copy=True)
        if self.name == "cupy":
            return self.mod.asarray(host)
        if self.name == "torch":
            return self.mod.as_tensor(np.ascontiguousarray(host), device="cuda")
        return kspec.asarray(host)

    def empty(self, shape, dtype):
        return self.asarray(np.full(shape, 7, dtype=dtype))  # not zeros: a missed write shows

    def get(self, a) -> np.ndarray:
        assert isinstance(a, self.array_type), f"expected a {self.array_type}, got {type(a)}"
        if self.name == "numpy":
            return a
        if self.name == "cupy":
            return self.mod.asnumpy(a)
        if self.name == "torch":
            return a.cpu().numpy()
        kspec.get_device().synchronize()
        return a.get()
