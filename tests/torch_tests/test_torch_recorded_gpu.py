"""Bare eager calls that autograd records, on CUDA tensors (issue [AD2]; tests/torch_tests/test_torch_recorded.py on the CPU
device): through the compiled dispatcher and the Python one, a signature served for plain tensors is recorded
once its tensors require grad and served again under ``torch.no_grad()``; a training loop through a bare kernel
matches PyTorch's; an op without gradients called by name takes PyTorch's fallback without recursing.
Skipped without PyTorch or a CUDA device."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import kspec  # noqa: E402
import kspec.torch as kt  # noqa: E402
from helpers.torch_cases import skip_without_cuda  # noqa: E402
from helpers.torch_recorded_cases import ACT, PLAIN, SUMSQ, act_reference, fused_act, grads  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _cuda():
    skip_without_cuda()


@pytest.fixture(params=["compiled", "python"])
def call_path(request, monkeypatch):
    """The compiled dispatcher (kspec/_fastcall_c) and the generated Python one read tensors the same way."""
    from kspec.runtime import reset_call_path

    if request.param == "python":
        monkeypatch.setenv("KSPEC_CALL_PATH", "python")
    reset_call_path()
    yield request.param
    monkeypatch.undo()
    reset_call_path()


def _inputs(seed: int, shape=(300, 257)) -> tuple:
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(shape, generator=g, device="cuda", requires_grad=True)
    b = torch.randn(shape[-1:], generator=g, device="cuda", requires_grad=True)
    return x, b


@pytest.mark.parametrize("kernel", [ACT, fused_act], ids=["spec", "fused"])
def test_a_served_signature_is_recorded_once_its_tensors_require_grad(call_path, kernel):
    x, b = _inputs(1)
    plain = kernel(x.detach(), b.detach())  # served plainly: the signature is kept
    kernel(x.detach(), b.detach())
    assert not plain.requires_grad
    y = kernel(x, b)  # the same signature, tensors that require grad: recorded
    assert y.requires_grad
    w = torch.randn_like(y)
    got = grads((y * w).sum(), (x, b))
    want = grads((act_reference(x, b) * w).sum(), (x, b))
    for g, r in zip(got, want):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-4)
    with torch.no_grad():  # grad mode off: served as a plain call
        again = kernel(x, b)
    assert not again.requires_grad
    torch.testing.assert_close(again, y.detach())


def test_a_training_loop_through_a_bare_kernel_matches_pytorchs(call_path):
    x, _ = _inputs(2, (64, 32))
    x = x.detach()
    bias = torch.nn.Parameter(torch.zeros(32, device="cuda"))
    reference = torch.nn.Parameter(torch.zeros(32, device="cuda"))
    opt = torch.optim.SGD([bias], lr=0.1)
    ref_opt = torch.optim.SGD([reference], lr=0.1)
    for _ in range(5):
        for param, optimizer, forward in ((bias, opt, ACT), (reference, ref_opt, act_reference)):
            optimizer.zero_grad()
            loss = SUMSQ(forward(x, param) - 1.0)
            loss.backward()
            optimizer.step()
    torch.testing.assert_close(bias, reference, rtol=1e-4, atol=1e-5)
    assert bias.abs().sum() > 0


def test_a_kernel_without_gradients_raises_on_backward_and_its_op_by_name_takes_the_fallback(call_path):
    x, b = _inputs(3)
    y = PLAIN(x, b)
    assert y.requires_grad
    with pytest.raises(kspec.KspecError, match="kernel 'recorded_plain' has no gradients"):
        y.sum().backward()
    op = kt.register(PLAIN)
    by_name = op.overload(x, b)  # the dispatcher's fallback runs the CUDA kernel with grad mode on: no recursion
    torch.testing.assert_close(by_name, (x * b).detach())
