"""The surface code written for CuPy uses, on a GPU with CuPy and PyTorch (issue 52): outputs of the caller's
library when no argument decides it by itself, and function attributes that stay on their kernel at the
driver. The CPU side of the same rules is tests/kernels_tests/test_cupy_surface.py (whose ``xp`` tests run here with CuPy
arrays too)."""

from __future__ import annotations

import numpy as np
import pytest

import kspec

pytestmark = pytest.mark.gpu

EW = kspec.ElementwiseKernel

WINDOW = EW("float64 scale", "float64 w", "w = scale * i", "surface_window")  # scalars and size= only, as a window
GATHER = EW("raw T a, int32 n", "T w", "T t = 0; for (int k = 0; k < n; k++) t += a[k]; w = t;", "surface_gather")


def test_cupy_arrays_that_are_all_raw_give_a_cupy_output():
    cupy = pytest.importorskip("cupy")
    a = cupy.arange(5, dtype=cupy.float32)
    w = GATHER(a, 3, size=4)
    assert isinstance(w, cupy.ndarray) and w.shape == (4,)
    np.testing.assert_array_equal(cupy.asnumpy(w), [3, 3, 3, 3])
    np.testing.assert_array_equal(cupy.asnumpy(GATHER(a, 5.0, size=2)), [10, 10])  # a float n, converted


def test_a_call_without_arrays_gives_cupy_arrays_when_cupy_is_imported():
    cupy = pytest.importorskip("cupy")
    w = WINDOW(0.5, size=6)
    assert isinstance(w, cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(w), 0.5 * np.arange(6))
    w[1:3] = 0  # what "'DeviceArray' object is not subscriptable" refused
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        w = WINDOW(2, size=3)
    stream.synchronize()
    np.testing.assert_array_equal(cupy.asnumpy(w), [0, 2, 4])
    w = WINDOW(1.0, size=3, stream=cupy.cuda.Stream(non_blocking=True))
    assert isinstance(w, cupy.ndarray)


def test_a_call_without_arrays_on_a_torch_stream_gives_a_tensor():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA here")
    stream = torch.cuda.Stream()
    w = WINDOW(3.0, size=4, stream=stream)
    stream.synchronize()
    assert isinstance(w, torch.Tensor) and w.is_cuda
    np.testing.assert_array_equal(w.cpu().numpy(), [0, 3, 6, 9])


def test_torch_tensors_that_are_all_raw_give_a_tensor():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA here")
    w = GATHER(torch.arange(4, dtype=torch.float64, device="cuda"), 2, size=3)
    assert isinstance(w, torch.Tensor)
    np.testing.assert_array_equal(w.cpu().numpy(), [1, 1, 1])


def test_kernels_constructed_on_every_call_share_their_prepared_calls(monkeypatch):
    cupy = pytest.importorskip("cupy")
    args = ("float32 x, float32 y", "float32 z", "z = x - y", "surface_every_call")
    x = cupy.arange(1000, dtype=cupy.float32)
    first = EW(*args)(x, x)

    def planned(*_args, **_kwargs):
        raise AssertionError("an identical kernel's signature was planned again")

    monkeypatch.setattr("kspec.kernels._elementwise.prepare_elementwise", planned)
    for _ in range(3):
        again = EW(*args)(x, x)
        assert isinstance(again, cupy.ndarray) and again is not first
    assert float(again.sum()) == 0.0


SHARED_SOURCE = r"""
extern "C" __global__ void surface_smem(const float* x, float* y, int n) {
    extern __shared__ float buffer[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    buffer[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) y[i] = 3 * buffer[threadIdx.x];
}
"""


def test_function_attributes_do_not_leak_to_kernels_sharing_a_construction():
    cupy = pytest.importorskip("cupy")
    big = 64 * 1024  # over the 48 KiB a launch may ask without the attribute
    k1 = kspec.RawModule(code=SHARED_SOURCE).get_function("surface_smem")
    k2 = kspec.RawModule(code=SHARED_SOURCE).get_function("surface_smem")
    default = k2.max_dynamic_shared_size_bytes
    assert default < big
    x = cupy.arange(256, dtype=cupy.float32)
    y = cupy.zeros(256, dtype=cupy.float32)
    k2((1,), (256,), (x, y, np.int32(256)), shared_mem=256 * 4)  # loads the shared module first
    k1.max_dynamic_shared_size_bytes = big
    k1((1,), (256,), (x, y, np.int32(256)), shared_mem=big)
    cupy.cuda.Device().synchronize()
    np.testing.assert_array_equal(cupy.asnumpy(y), 3 * np.arange(256))
    assert k2.max_dynamic_shared_size_bytes == default  # the driver's value of k2's function, untouched
    with pytest.raises(kspec.KspecError):
        k2((1,), (256,), (x, y, np.int32(256)), shared_mem=big)
    fresh = kspec.RawKernel(SHARED_SOURCE, "surface_smem")
    assert fresh.max_dynamic_shared_size_bytes == default


FIND_FIRST = kspec.RawKernel(
    r'''extern "C" __global__ void find_first(const float* x, int n, int* out) {
        if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = n == 0 ? -1 : (int)x[0];
    }''',
    "find_first",
)


@pytest.mark.parametrize("grid, block", [((0,), (128,)), (0, 128), ((0, 1, 1), (128, 1, 1)), ((1,), (0,))], ids=str)
def test_an_extent_of_zero_is_launched_as_one_as_cupy_does(grid, block):
    # cupyx.scipy.interpolate launches find_interval with grid=(0,) on an empty input; CuPy launches max(1, x)
    cp = pytest.importorskip("cupy")
    x, out = cp.zeros(0, cp.float32), cp.zeros(1, cp.int32)
    FIND_FIRST(grid, block, (x, np.int32(0), out))
    assert int(out[0]) == -1
    with pytest.raises(ValueError, match="grid"):
        FIND_FIRST((-1,), (1,), (x, np.int32(0), out))
