"""CuPy's by-value kernel parameters: an object of a ``cupy.cuda.function.CPointer`` subclass (CuPy's random
generators pass their Feistel parameters so, ``cupy._core._carray.mdspan`` its layouts) is passed to a RawKernel
as the struct its ``ptr`` points to, as CuPy's launch does. Run on kspec's CPU device with a stand-in for CuPy's
class (kspec reads the class from ``sys.modules`` only, never importing CuPy), so the struct really reaches a
kernel and comes back through its output.

CPU device only; skipped without a host C++ compiler."""

from __future__ import annotations

import ctypes
import sys
import types

import numpy as np
import pytest

import kspec
from helpers.device_arrays import host_compiler_missing


class _Params(ctypes.Structure):
    _fields_ = [("scale", ctypes.c_double), ("shift", ctypes.c_int), ("keys", ctypes.c_uint * 3)]


@pytest.fixture
def cpointer(monkeypatch: pytest.MonkeyPatch) -> type:
    """CuPy's CPointer as kspec finds it: a class in the module ``cupy.cuda.function``; ``ptr`` is an int."""
    reason = host_compiler_missing()
    if reason is not None:
        pytest.skip(reason)

    class CPointer:
        ptr = 0

    class FeistelLike(CPointer):
        def __init__(self, scale: float, shift: int, keys: tuple[int, int, int]) -> None:
            self.value = _Params(scale, shift, (ctypes.c_uint * 3)(*keys))
            self.ptr = ctypes.addressof(self.value)

    module = types.ModuleType("cupy.cuda.function")
    module.CPointer = CPointer  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy.cuda.function", module)
    with kspec.use_device("cpu"):
        yield FeistelLike


CODE = r"""
struct Params { double scale; int shift; unsigned int keys[3]; };
extern "C" __global__ void apply(const double* x, Params p, double* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * p.scale + p.shift + p.keys[i % 3];
}
"""


def test_struct_argument_reaches_the_kernel(cpointer: type) -> None:
    kernel = kspec.RawKernel(CODE, "apply")
    x = np.arange(10, dtype=np.float64)
    for scale, shift, keys in ((2.0, 3, (1, 20, 300)), (-0.5, -7, (4, 5, 6))):  # a second object, same packer
        y = np.full(10, np.nan)
        kernel((1,), (32,), (x, cpointer(scale, shift, keys), y, np.int32(10)))
        np.testing.assert_array_equal(y, x * scale + shift + np.array(keys * 4)[:10])


def test_other_objects_are_still_refused_by_position(cpointer: type) -> None:
    kernel = kspec.RawKernel(CODE, "apply")
    with pytest.raises(TypeError, match=r"args\[1\] is of unsupported type .*CPointer"):
        kernel((1,), (32,), (np.zeros(2), object(), np.zeros(2), np.int32(2)))
