"""kspec.vjp on the GPU (issue [AD]): tests/test_grad.py's checks with kspec, CuPy and PyTorch arrays."""

from __future__ import annotations

import numpy as np
import pytest

import kspec
from kspec.spec import ElementwiseSpec

pytestmark = pytest.mark.gpu

SPEC = ElementwiseSpec(
    name="gpu_sinmul", in_params="T x, T y", out_params="T z", operation="z = x * y + sin(x);",
    grad={"x": "grad_z * (y + cos(x))", "y": "grad_z * x"},
)


def _libraries():
    yield "kspec", kspec.asarray, lambda a: a.get()
    try:
        import cupy
    except ImportError:
        pass
    else:
        yield "cupy", cupy.asarray, cupy.asnumpy
    try:
        import torch
    except ImportError:
        return
    if torch.cuda.is_available():
        yield "torch", lambda a: torch.as_tensor(a, device="cuda"), lambda t: t.cpu().numpy()


@pytest.mark.parametrize("library", list(_libraries()), ids=lambda lib: lib[0])
def test_vjp_with_broadcasting_on_the_gpu(library):
    _, to_device, to_host = library
    kernel = kspec.ElementwiseKernel.from_spec(SPEC)
    rng = np.random.default_rng(1)
    x, y, g = rng.standard_normal((64, 33)), rng.standard_normal((33,)), rng.standard_normal((64, 33))
    z, back = kspec.vjp(kernel, to_device(x), to_device(y))
    gx, gy = back(to_device(g))
    np.testing.assert_allclose(to_host(z), x * y + np.sin(x), rtol=1e-12)
    np.testing.assert_allclose(to_host(gx), g * (y + np.cos(x)), rtol=1e-12)
    np.testing.assert_allclose(to_host(gy), (g * x).sum(axis=0), rtol=1e-10)
