"""Kernels with gradients in PyTorch (issue [AD]): the op of a kernel whose spec declares ``grad`` has autograd:
``gradcheck`` (float64) and ``opcheck`` pass, eager and inside ``torch.compile`` (registered and bare calls, one
graph), broadcast inputs get gradients of their shape, scalar inputs none. On kspec's CPU device with CPU tensors;
skipped where PyTorch is not installed."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import kspec  # noqa: E402
import kspec.torch as kt  # noqa: E402
from torch_cases import fresh_compiles  # noqa: E402

ACT = kspec.ElementwiseKernel("T x, T b", "T y", "T v = x + b; y = v * tanh(v) + sin(x);", "torch_grad_act", grad="auto")
SCALE = kspec.ElementwiseKernel("T x, float64 s", "T y", "y = x * s;", "torch_grad_scale", grad={"x": "grad_y * s"})


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    with fresh_compiles():
        yield


def _inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((5, 7), generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn((7,), generator=g, dtype=torch.float64, requires_grad=True)
    return x, b


def _reference(x, b):
    v = x + b
    return v * torch.tanh(v) + torch.sin(x)


def test_gradcheck_and_opcheck(on_cpu_device):
    op = kt.register(ACT)
    x, b = _inputs()
    assert torch.autograd.gradcheck(op, (x, b))
    assert all(v == "SUCCESS" for v in torch.library.opcheck(op, (x, b)).values())


def test_eager_backward_matches_torchs_own(on_cpu_device):
    op = kt.register(ACT)
    x, b = _inputs(1)
    op(x, b).square().sum().backward()
    got = x.grad.clone(), b.grad.clone()
    x.grad = b.grad = None
    _reference(x, b).square().sum().backward()
    torch.testing.assert_close(got[0], x.grad)
    torch.testing.assert_close(got[1], b.grad)
    assert got[1].shape == b.shape


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("bare", [False, True], ids=["registered", "bare"])
def test_training_step_inside_torch_compile(on_cpu_device, backend, bare):
    op = ACT if bare else kt.register(ACT)
    x, b = _inputs(2)

    def step(x, b):
        return op(x, b).square().mean()

    explanation = torch._dynamo.explain(step)(x, b)
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0
    torch._dynamo.reset()
    loss = torch.compile(step, fullgraph=True, backend=backend)(x, b)
    loss.backward()
    got = x.grad.clone(), b.grad.clone()
    x.grad = b.grad = None
    _reference(x, b).square().mean().backward()
    torch.testing.assert_close(got[0], x.grad)
    torch.testing.assert_close(got[1], b.grad)


def test_scalar_inputs_get_no_gradient_and_frozen_inputs_cost_nothing(on_cpu_device):
    op = kt.register(SCALE, scalars=["s"])
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    op(x, 2.5).sum().backward()
    torch.testing.assert_close(x.grad, torch.full((4,), 2.5, dtype=torch.float64))
    frozen = torch.randn(4, dtype=torch.float64)
    assert op(frozen, 2.0).grad_fn is None  # nothing saved, no backward node
