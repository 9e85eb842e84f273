"""``kernel.plan_launch`` for CUDA ArraySpecs (issue [X]) on a GPU: each plan launched by hand with the driver
(tests/helpers/launch_plans.py), as XLA launches it from a custom call, gives what a call of the kernel gives."""

from __future__ import annotations

import numpy as np
import pytest

import kspec
from kspec import ArraySpec

from helpers.launch_plans import launch_plan

pytestmark = pytest.mark.gpu

add = kspec.ElementwiseKernel("T x, T y", "T z", "z = x + y", "gpu_plan_add")
axpy = kspec.ElementwiseKernel("float32 a, T x, T y", "T z", "z = a * x + y", "gpu_plan_axpy")
total = kspec.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "gpu_plan_sum")


@kspec.fuse
def gpu_fused_norm(x, y):
    s = (x * y).sum(axis=1)
    return s, s / x.max()


def cuda_spec(a) -> ArraySpec:
    return ArraySpec(a.shape, a.dtype.name, "cuda", a.device.id, strides=a.strides)


def run_on_gpu(plan: kspec.LaunchPlan, inputs):
    cp = pytest.importorskip("cupy")
    from cuda.bindings import driver

    outputs = tuple(cp.empty(o.shape, o.dtype) for o in plan.outputs)
    workspace = cp.empty(max(plan.workspace, 1), cp.uint8)
    cp.cuda.runtime.deviceSynchronize()
    launch_plan(plan, [a.data.ptr for a in inputs], [o.data.ptr for o in outputs], workspace.data.ptr,
                driver.CUfunction, driver.cuLaunchKernel)  # fmt: skip
    cp.cuda.runtime.deviceSynchronize()
    return outputs


@pytest.mark.parametrize(
    ("kernel", "make", "kwargs"),
    [
        (add, lambda cp, x: (x, x[0]), {}),
        (add, lambda cp, x: (x.T, x[::-1, ::-1].T), {}),
        (axpy, lambda cp, x: (1.5, x, x), {}),
        (total, lambda cp, x: (x,), dict(axis=1)),
        (total, lambda cp, x: (x,), dict(axis=0, keepdims=True)),
        (total, lambda cp, x: (x.ravel(),), {}),  # one long row: two passes and a workspace
    ],
)
def test_plan_launch_matches_a_call_on_the_gpu(kernel, make, kwargs):
    cp = pytest.importorskip("cupy")
    x = cp.asarray(np.random.default_rng(3).random((513, 1031), np.float32))
    args = make(cp, x)
    arrays = [a for a in args if isinstance(a, cp.ndarray)]
    plan = kernel.plan_launch(*[cuda_spec(a) if isinstance(a, cp.ndarray) else a for a in args], **kwargs)
    assert plan.device_id == x.device.id and plan.workspace % 256 == 0
    got = run_on_gpu(plan, arrays)
    called = kernel(*args, **kwargs)
    called = called if isinstance(called, tuple) else (called,)
    for g, c in zip(got, called):
        assert g.shape == c.shape and g.dtype == c.dtype
        cp.testing.assert_allclose(g, c, rtol=1e-5)


def test_plan_launch_of_a_fused_function_on_the_gpu():
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(5)
    x = cp.asarray(rng.random((300, 70), np.float32) + 0.5)
    y = cp.asarray(rng.random((70,), np.float32))
    plan = gpu_fused_norm.plan_launch(cuda_spec(x), cuda_spec(y))
    assert len(plan.steps) >= 2 and plan.workspace > 0
    for g, c in zip(run_on_gpu(plan, [x, y]), gpu_fused_norm(x, y)):
        cp.testing.assert_allclose(g, c, rtol=1e-5)
