"""Kernels and references shared by tests/torch_tests/test_torch_recorded.py (CPU device) and tests/torch_tests/test_torch_recorded_gpu.py
(CUDA): bare eager calls on tensors that require grad, which autograd records (issue [AD2])."""

from __future__ import annotations

from typing import Any

import numpy as np

import kspec

ACT = kspec.ElementwiseKernel("T x, T b", "T y", "T v = x + b; y = v * tanh(v);", "recorded_act", grad="auto")
SCALE = kspec.ElementwiseKernel("T x, float64 s", "T y", "y = x * s;", "recorded_scale", grad={"x": "grad_y * s"})
PLAIN = kspec.ElementwiseKernel("T x, T b", "T y", "y = x * b", "recorded_plain")
SUMSQ = kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "recorded_sumsq", grad="auto")


@kspec.fuse
def fused_act(x: Any, b: Any) -> Any:  # the same function as ACT, differentiated with no declaration
    v = x + b
    return v * np.tanh(v)


def act_reference(x: Any, b: Any) -> Any:
    import torch

    v = x + b
    return v * torch.tanh(v)


def grads(loss: Any, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    import torch

    return torch.autograd.grad(loss, inputs)
