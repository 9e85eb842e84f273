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


def test_a_plain_call_on_cpu_tensors_runs_on_their_memory(on_cpu_device):
    """Nothing to record (no tensor requires grad, or grad mode off): the kernel runs on NumPy views of the
    tensors and gives tensors back, a given output as the tensor given."""
    x, b = _inputs(8)
    xd, bd = x.detach(), b.detach()
    y = ACT(xd, bd)
    assert isinstance(y, torch.Tensor) and not y.requires_grad
    torch.testing.assert_close(y, act_reference(xd, bd))
    out = torch.empty_like(xd)
    assert ACT(xd, bd, out) is out
    torch.testing.assert_close(out, act_reference(xd, bd))
    torch.testing.assert_close(fused_act(xd, bd), act_reference(xd, bd))
    torch.testing.assert_close(SUMSQ(xd, axis=1), (xd * xd).sum(1))
    torch.testing.assert_close(SCALE(xd, 2.0), xd * 2.0)
    with torch.no_grad():  # tensors that require grad, grad mode off
        y = ACT(x, b)
    assert not y.requires_grad
    torch.testing.assert_close(y, act_reference(xd, bd))
    assert xd.grad is None and x.grad is None


def test_a_cpu_tensor_numpy_cannot_view_is_a_typed_error(on_cpu_device):
    x = torch.ones((3, 2), dtype=torch.bfloat16)
    try:
        x.numpy()
    except TypeError:
        with pytest.raises(kspec.KspecTypeError, match=r"recorded_act.*no NumPy view"):
            ACT(x, x)
    else:  # a NumPy with bfloat16 (ml_dtypes): the call runs
        pytest.skip("this NumPy views bfloat16 tensors")


def test_a_number_after_a_tensor_registers_a_second_op_quietly(on_cpu_device):
    """A bare call decides the op by its arguments' kinds: the same kernel with a number where a tensor was is
    another op, named by its content, and nothing warns (a bare call has no name= to pass)."""
    import warnings

    x, b = _inputs(9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y1 = ACT(x, b)
        y2 = ACT(x, 0.5)
    torch.testing.assert_close(y2, act_reference(x, torch.tensor(0.5, dtype=x.dtype)))
    g1, = grads(y1.sum(), (x,))
    g2, = grads(y2.sum(), (x,))
    v1, v2 = (x + b).detach(), (x + 0.5).detach()
    for got, v in ((g1, v1), (g2, v2)):  # d/dv v tanh(v) = tanh(v) + v (1 - tanh(v)^2)
        torch.testing.assert_close(got, torch.tanh(v) + v * (1 - torch.tanh(v) ** 2))


def test_a_raw_kernel_given_a_cpu_tensor_on_the_cpu_device_names_numpy(on_cpu_device):
    double = kspec.RawKernel(r'extern "C" __global__ void dbl(float* x, int n) {'
                             r" int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2; }", "dbl")
    x = torch.ones(8)
    with pytest.raises(kspec.KspecTypeError, match=r"kernel 'dbl': args\[0\] is a PyTorch tensor on cpu: .*t\.numpy\(\)"):
        double((1,), (8,), (x, 8))
    double((1,), (8,), (x.numpy(), 8))  # the view the message names: the kernel writes into the tensor
    torch.testing.assert_close(x, torch.full((8,), 2.0))
