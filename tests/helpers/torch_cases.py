"""The kernels and the model the PyTorch tests compile (tests/torch_tests/test_torch.py on kspec's CPU device,
tests/torch_tests/test_torch_gpu.py on CUDA): a generated-module kernel, constructor kernels (elementwise, reduction) and
fused functions, with scalars, between PyTorch's own operators."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

import kspec

add_kernel = kspec.ElementwiseKernel("T x, T y", "T z", "z = x + y", "torch_add")
axpy_kernel = kspec.ElementwiseKernel("float32 a, T x, T y", "T z", "z = a * x + y", "torch_axpy")
sumdiff_kernel = kspec.ElementwiseKernel("T x, T y", "T s, T d", "s = x + y; d = x - y", "torch_sumdiff")
sum_kernel = kspec.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "torch_sum")


@kspec.fuse
def fused_affine(x, a, b):
    return x * a + b


@kspec.fuse
def fused_stats(x, y):
    p = x * y
    return p.sum(axis=1), (p * p).max(axis=1)


def model(ops: Any, kt: Any) -> Any:
    """A function of two float32 tensors, x (n, m) and y (m,), calling every kind of kspec op: ``ops`` is
    ``kt.register_module(generated.elementwise, scalars={"saxpy": ["a"]})``, ``kt`` is kspec.torch."""
    import torch

    add, total = kt.register(add_kernel), kt.register(sum_kernel)
    affine = kt.register(fused_affine, scalars=["a"])
    stats = kt.register(fused_stats, returns=2)

    def f(x: Any, y: Any) -> Any:
        d = ops.squared_diff(x, y)  # a generated module's kernel
        s = ops.saxpy(2.0, d, y)  # ... with a scalar
        z = add(s, torch.sin(x))  # a constructor's ElementwiseKernel, next to PyTorch's operators
        r = total(z, axis=1)  # a ReductionKernel
        a = affine(z, 0.5, y)  # a fused function with a scalar
        m, v = stats(a, y)  # a fused function of two reductions
        return z, r, a, m, v

    return f


def reference(x: Any, y: Any) -> tuple[Any, ...]:
    """What :func:`model` computes, in PyTorch."""
    import torch

    z = 2.0 * (x - y) ** 2 + y + torch.sin(x)
    a = z * 0.5 + y
    p = a * y
    return z, z.sum(1), a, p.sum(1), (p * p).amax(1)


@contextlib.contextmanager
def fresh_compiles() -> Iterator[None]:
    """Dynamo reset before and after, and Inductor's on-disk caches off (where this PyTorch has them): each
    test compiles its graphs itself, so graph counts and guards are its own."""
    import torch

    torch._dynamo.reset()
    with contextlib.ExitStack() as stack:
        if hasattr(torch._inductor.config, "fx_graph_cache"):
            stack.enter_context(torch._inductor.config.patch(fx_graph_cache=False))
        if hasattr(torch._functorch.config, "enable_autograd_cache"):
            stack.enter_context(torch._functorch.config.patch(enable_autograd_cache=False))
        yield
    torch._dynamo.reset()


def unique_graphs() -> int:
    """Graphs Dynamo compiled so far (its counter)."""
    import torch

    return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])


def opcheck_cases(device: str) -> list[tuple[str, Any, tuple[Any, ...], dict[str, Any]]]:
    """(what, op, args, kwargs) for ``torch.library.opcheck``: each kind of op on ``device``'s tensors."""
    import torch

    import kspec.torch as kt

    x, y = torch.rand(5, 7, device=device), torch.rand(7, device=device)
    return [
        ("elementwise", kt.register(add_kernel).overload, (x, y), {}),
        ("strided", kt.register(add_kernel).overload, (x.t(), torch.rand(5, device=device)), {}),
        ("scalar", kt.register(axpy_kernel, scalars=["a"]).overload, (2.0, x, y), {}),
        ("reduction", kt.register(sum_kernel).overload, (x,), {"axis": [1], "keepdims": True}),
        ("fused", kt.register(fused_stats, returns=2).overload, (x, y), {}),
    ]


def skip_without_cuda() -> None:
    """Skip the calling test or fixture where PyTorch sees no CUDA device."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
