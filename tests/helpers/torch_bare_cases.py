"""A function calling bare kspec kernels (no kspec.torch.register) for tests/torch_tests/test_torch_bare.py (kspec's CPU
device) and tests/torch_tests/test_torch_bare_gpu.py (CUDA): a constructor elementwise kernel, a reduction with axis= and
keepdims=, a generated module's function and a fused function, between PyTorch's own operators."""

from __future__ import annotations

from typing import Any

import kspec
from generated import elementwise as gen_elementwise

bare_add = kspec.ElementwiseKernel("T x, T y", "T z", "z = x + y", "bare_add")
bare_sum = kspec.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "bare_sum")


@kspec.fuse
def bare_affine(x, a, b):
    return x * a + b


def bare_model(x: Any, y: Any) -> Any:
    """x (n, m) and y (m,) float32 tensors."""
    import torch

    z = bare_add(x, torch.sin(y))
    s = bare_sum(z, axis=1, keepdims=True)
    q = gen_elementwise.saxpy(2.0, z, y)
    return z, s, q, bare_affine(q, 0.5, y)


def bare_reference(x: Any, y: Any) -> tuple[Any, ...]:
    import torch

    z = x + torch.sin(y)
    q = 2.0 * z + y
    return z, z.sum(1, keepdim=True), q, q * 0.5 + y


def registered_model(kt: Any) -> Any:
    """:func:`bare_model` through ``kspec.torch.register`` (``kt``): the same ops."""
    import torch

    add, total = kt.register(bare_add), kt.register(bare_sum)
    saxpy = kt.register_module(gen_elementwise, scalars={"saxpy": ["a"]}).saxpy
    affine = kt.register(bare_affine, scalars=["a"])

    def f(x: Any, y: Any) -> Any:
        z = add(x, torch.sin(y))
        q = saxpy(2.0, z, y)
        return z, total(z, axis=1, keepdims=True), q, affine(q, 0.5, y)

    return f
