"""A declared backward for code kspec cannot read (issue [AD]): ``kspec.custom_vjp`` over functions that launch raw
and ``kspec.jit`` kernels, differentiated by ``kspec.vjp`` and by PyTorch's autograd. On the CPU device (NumPy
arrays, CPU tensors); the GPU in tests/grad_tests/test_grad_gpu.py."""

from __future__ import annotations

import numpy as np
import pytest

import kspec
from kspec import jit

SCALE = r"""
extern "C" __global__ void scale_rows(const double* x, const double* w, double* y, int rows, int cols) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) y[i] = x[i] * w[i % cols];
}
"""


def _scale_forward(x, w):
    y = np.empty_like(x)
    n = x.size
    kspec.RawKernel(SCALE, "scale_rows")(((n + 63) // 64,), (64,), (x, w, y, np.int32(x.shape[0]), np.int32(x.shape[1])))
    return y


@jit.rawkernel()
def jit_square(x, y, n):
    i = jit.blockIdx.x * jit.blockDim.x + jit.threadIdx.x
    if i < n:
        y[i] = x[i] * x[i]


def test_a_raw_kernel_with_a_declared_backward(on_cpu_device):
    scale = kspec.custom_vjp(_scale_forward)

    @scale.defbackward
    def _(x, w, y, grad_y):
        return grad_y * w, grad_y * x  # w's gradient in x's shape: kspec sums it to w's

    rng = np.random.default_rng(0)
    x, w, g = rng.standard_normal((5, 7)), rng.standard_normal(7), rng.standard_normal((5, 7))
    y, back = kspec.vjp(scale, x, w)
    np.testing.assert_allclose(y, x * w)
    gx, gw = back(g)
    np.testing.assert_allclose(gx, g * w)
    np.testing.assert_allclose(gw, (g * x).sum(axis=0))
    assert scale.__name__ == "_scale_forward"
    np.testing.assert_allclose(scale(x, w), x * w)  # a plain call runs the forward


def test_a_jit_kernel_with_a_backward_that_is_a_kspec_kernel(on_cpu_device):
    double_times = kspec.ElementwiseKernel("T x, T y, T gy", "T gx", "gx = 2 * x * gy", "jit_square_backward")

    def square(x):
        y = np.empty_like(x)
        jit_square[(1,), (x.size,)](x, y, np.int32(x.size))
        return y

    f = kspec.custom_vjp(square, backward=double_times)
    x = np.linspace(-1.0, 1.0, 8)
    y, back = kspec.vjp(f, x)
    (gx,) = back(np.ones(8))
    np.testing.assert_allclose(y, x * x)
    np.testing.assert_allclose(gx, 2 * x)


def test_custom_vjp_errors():
    def f(x):
        return x

    with pytest.raises(kspec.KspecValueError, match="'f' has no backward yet"):
        kspec.vjp(kspec.custom_vjp(f), 1.0)
    g = kspec.custom_vjp(lambda x, y: x, backward=lambda x, y, z, gz: gz)
    with pytest.raises(kspec.KspecValueError, match="returned 1 gradient\\(s\\) for 2 input\\(s\\)"):
        kspec.vjp(g, np.ones(2), np.ones(2))[1](np.ones(2))
    with pytest.raises(kspec.KspecTypeError, match="backward of .*expected a kernel or a function"):
        kspec.custom_vjp(lambda x: x, backward=3)
    with pytest.raises(kspec.KspecTypeError, match="takes one gradient per array, got 2"):
        kspec.vjp(g, np.ones(2), np.ones(2))[1](np.ones(2), np.ones(2))


def test_pytorch_autograd_through_a_declared_backward():
    torch = pytest.importorskip("torch")

    @kspec.custom_vjp
    def cube(x, s):
        return torch.from_numpy(np.asarray(x.detach().numpy()) ** 3) * s  # code autograd cannot see through

    @cube.defbackward
    def _(x, s, y, gy):
        return 3 * x * x * s * gy, None

    x = torch.linspace(-1, 1, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: cube(x, 2.0), (x,))
    cube(x, 2.0).sum().backward()
    torch.testing.assert_close(x.grad, 6 * x.detach() ** 2)
    assert cube(x.detach(), 2.0).grad_fn is None  # nothing requires grad: the forward alone
