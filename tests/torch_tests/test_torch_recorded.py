"""Bare eager calls that autograd records (issue [AD2]): a kernel with gradients (a spec's ``grad``, a fused
function) called directly on tensors that require grad gives outputs with PyTorch's gradients, as the registered
op does; a kernel without gradients gives outputs whose backward raises an error naming it; outputs given to
write into and ``stream=`` are refused there. On kspec's CPU device with CPU tensors (tests/torch_tests/test_torch_recorded_gpu.py:
CUDA); skipped where PyTorch is not installed."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import kspec  # noqa: E402
import kspec.torch as kt  # noqa: E402
from helpers.torch_recorded_cases import ACT, PLAIN, SCALE, SUMSQ, act_reference, fused_act, grads  # noqa: E402


def _inputs(seed: int = 0) -> tuple:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((6, 5), generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn((5,), generator=g, dtype=torch.float64, requires_grad=True)
    return x, b


@pytest.mark.parametrize("kernel", [ACT, fused_act], ids=["spec", "fused"])
def test_a_bare_call_records_pytorchs_gradients(on_cpu_device, kernel):
    x, b = _inputs(1)
    y = kernel(x, b)
    assert y.requires_grad and y.grad_fn is not None
    w = torch.randn_like(y)
    got = grads((y * w).sum(), (x, b))
    want = grads((act_reference(x, b) * w).sum(), (x, b))
    for g, r in zip(got, want):
        torch.testing.assert_close(g, r)
    assert got[1].shape == b.shape  # the broadcast input's gradient, summed to its shape


@pytest.mark.parametrize("kernel", [ACT, fused_act], ids=["spec", "fused"])
def test_gradcheck_of_a_bare_call(on_cpu_device, kernel):
    x, b = _inputs(2)
    assert torch.autograd.gradcheck(lambda x, b: kernel(x, b), (x, b))


def test_a_bare_call_is_the_registered_ops_and_only_one_input_may_require_grad(on_cpu_device):
    x, b = _inputs(3)
    y = ACT(x.detach(), b)  # only the bias requires grad
    (gb,) = grads(y.sum(), (b,))
    (want,) = grads(act_reference(x.detach(), b).sum(), (b,))
    torch.testing.assert_close(gb, want)
    op = kt.register(ACT)
    torch.testing.assert_close(op(x, b), ACT(x, b))


def test_a_bare_reduction_and_a_scalar_input(on_cpu_device):
    x, _ = _inputs(4)
    y = SUMSQ(x, axis=1)
    assert y.shape == (6,)
    (gx,) = grads(y.sum(), (x,))
    torch.testing.assert_close(gx, 2 * x.detach())
    z = SCALE(x, 3.0)  # a number is the op's scalar: no gradient for it
    (gx,) = grads(z.sum(), (x,))
    torch.testing.assert_close(gx, torch.full_like(x, 3.0))


def test_a_kernel_without_gradients_raises_naming_it_on_backward(on_cpu_device):
    x, b = _inputs(5)
    y = PLAIN(x, b)
    torch.testing.assert_close(y.detach(), (x * b).detach())
    assert y.requires_grad  # never silently detached
    with pytest.raises(kspec.KspecError, match="kernel 'recorded_plain' has no gradients"):
        y.sum().backward()
    assert x.grad is None


def test_outputs_given_and_a_stream_are_refused_with_tensors_that_require_grad(on_cpu_device):
    x, b = _inputs(6)
    with pytest.raises(kspec.KspecTypeError, match="outputs given \\(y\\) with tensors that require grad"):
        ACT(x, b, torch.empty_like(x.detach()))
    with pytest.raises(kspec.KspecTypeError, match="outputs given"):
        SUMSQ(x, axis=1, out=torch.empty(6, dtype=torch.float64))
    with pytest.raises(kspec.KspecValueError, match="stream= with tensors that require grad"):
        ACT(x, b, stream=object())
    with pytest.raises(kspec.KspecTypeError, match="b: with tensors that require grad an input is a tensor or a Python number"):
        ACT(x, "not a tensor")


def test_under_no_grad_a_call_is_not_recorded(on_cpu_device):
    x, b = _inputs(7)
    with torch.no_grad():
        y = kt.call(ACT, x, b)  # the op's plain call: grad mode off
    assert not y.requires_grad
    torch.testing.assert_close(y, act_reference(x, b).detach())


def test_a_plain_call_on_cpu_tensors_points_to_numpy_and_register(on_cpu_device):
    x, b = _inputs(8)
    with pytest.raises(kspec.KspecTypeError, match=r"t\.numpy\(\) shares the tensor's memory.*kspec\.torch\.register"):
        ACT(x.detach(), b.detach())  # no grad: not recorded, so the kernel's own launch path reads the tensors
    torch.testing.assert_close(kt.register(ACT)(x.detach(), b.detach()), act_reference(x, b).detach())
