"""Several devices in one process (CuPy's rules), on a machine with two GPUs; skipped with a reason on one.

A kernel runs on the device of its array arguments and allocates its outputs there; its module is loaded
once per device; arguments on different devices are an error naming them; kspec.Device(n), CuPy's
cupy.cuda.Device(n) and PyTorch's torch.cuda.device(n) make n current for allocations and for launches
without array arguments.
"""

from __future__ import annotations

import numpy as np
import pytest

import kspec

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module", autouse=True)
def two_devices():
    from kspec.runtime import device_count

    if device_count() < 2:
        pytest.skip(f"needs two GPUs; this machine has {device_count()}")


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


SQD = ("T x, T y", "T z", "z = (x - y) * (x - y)", "sqd_multi")


def test_elementwise_runs_on_the_device_of_its_arrays(cp):
    k = kspec.ElementwiseKernel(*SQD)
    for dev in (0, 1, 0):
        with cp.cuda.Device(dev):
            x = cp.arange(8, dtype=cp.float32)
            y = cp.ones(8, dtype=cp.float32)
        z = k(x, y)  # called outside any device context: the arrays decide
        assert z.device.id == dev
        np.testing.assert_array_equal(z.get(), (np.arange(8) - 1.0) ** 2)


def test_reduction_and_fuse_follow_their_arrays(cp):
    r = kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "ssq_multi")
    f = kspec.fuse(lambda x: (x * 2).sum(axis=0))
    with cp.cuda.Device(1):
        x = cp.arange(12, dtype=cp.float32).reshape(3, 4)
    assert r(x, axis=1).device.id == 1 and f(x).device.id == 1
    np.testing.assert_allclose(r(x, axis=1).get(), (np.arange(12.0).reshape(3, 4) ** 2).sum(axis=1))
    np.testing.assert_allclose(f(x).get(), (np.arange(12.0).reshape(3, 4) * 2).sum(axis=0))


def test_arrays_on_different_devices_are_an_error_naming_them(cp):
    k = kspec.ElementwiseKernel(*SQD)
    with cp.cuda.Device(0):
        x = cp.ones(4, cp.float32)
    with cp.cuda.Device(1):
        y = cp.ones(4, cp.float32)
    with pytest.raises(ValueError, match=r"x on device 0, y on device 1"):
        k(x, y)


def test_kspec_device_context_for_allocation_and_raw_launches():
    with kspec.Device(1):
        a = kspec.zeros(4, dtype=np.float32)
    assert a.device.id == 1
    raw = kspec.RawKernel('extern "C" __global__ void fill(float* y, float v) { y[threadIdx.x] = v; }', "fill")
    raw((1,), (4,), (a, np.float32(3)))
    np.testing.assert_array_equal(a.get(), [3, 3, 3, 3])


def test_torch_device_context_and_tensors(cp):
    torch = pytest.importorskip("torch")
    k = kspec.ElementwiseKernel(*SQD)
    with torch.cuda.device(1):
        x = torch.arange(6, dtype=torch.float32, device="cuda")
    z = k(x, x.flip(0))
    assert z.device == x.device and z.device.index == 1
    assert z.cpu().tolist() == [25.0, 9.0, 1.0, 1.0, 9.0, 25.0]
