"""Eager calls of registered ops without the dispatcher (kspec/torch/_eager.py): on plain tensors the callable
``register`` returns runs the kernel directly and records the op's own backward through a plain
``torch.autograd.Function``, with the results and gradients of the operator ``torch.ops.kspec.<name>``; every other
call (meta or fake tensors, a dispatch mode, a tensor subclass, arguments the schema refuses) takes the
operator. A kernel without gradients records a backward that raises, naming it. On kspec's CPU device with CPU tensors; skipped without PyTorch."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import kspec  # noqa: E402
import kspec.torch as kt  # noqa: E402
from helpers.grad_cases import fused_normalized  # noqa: E402

ACT = kspec.ElementwiseKernel("T x, T b", "T y", "T v = x + b; y = v * tanh(v);", "eager_act", grad="auto")
PLAIN = kspec.ElementwiseKernel("T x, T b", "T y", "y = x * b", "eager_no_grad")
ROWS = kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "eager_sumsq", grad="auto")


def _inputs(seed: int = 0, cls: type = torch.Tensor) -> tuple:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((6, 5), generator=g, dtype=torch.float64)
    b = torch.randn((5,), generator=g, dtype=torch.float64)
    if cls is torch.nn.Parameter:
        return torch.nn.Parameter(x), torch.nn.Parameter(b)
    return x.requires_grad_(), b.requires_grad_()


def _node(result: object) -> str:
    return type(result.grad_fn).__name__


@pytest.mark.parametrize("cls", [torch.Tensor, torch.nn.Parameter], ids=["tensor", "parameter"])
@pytest.mark.parametrize("which", ["spec", "fused", "reduction"])
def test_eager_calls_record_the_ops_own_backward_without_the_dispatcher(on_cpu_device, which, cls):
    op = {"spec": lambda: kt.register(ACT), "fused": lambda: kt.register(fused_normalized),
          "reduction": lambda: kt.register(ROWS)}[which]()  # fmt: skip
    x, b = _inputs(3, cls)
    args = (x,) if which == "reduction" else (x, b)
    keywords = {"axis": 1} if which == "reduction" else {}
    by_name = {"axis": [1], "keepdims": False} if which == "reduction" else {}
    g = torch.randn((6,) if which == "reduction" else (6, 5), dtype=torch.float64)
    eager = op(*args, **keywords)
    through_op = op.overload(*args, **by_name)
    assert _node(eager).startswith("kspec_") and "_eager" in _node(eager)  # kspec/torch/_autograd.py's Function
    assert _node(through_op).startswith("GeneratedBackwardFor_kspec")  # torch.library's, behind the dispatcher
    torch.testing.assert_close(eager, through_op)
    for a, c in zip(torch.autograd.grad(eager, args, g), torch.autograd.grad(through_op, args, g)):
        torch.testing.assert_close(a, c)
    assert torch.autograd.gradcheck(lambda *a: op(*a, **keywords), args)


def test_without_autograd_the_kernel_runs_alone(on_cpu_device):
    op = kt.register(ACT)
    x, b = _inputs(4)
    with torch.no_grad():
        y = op(x, b)
    assert y.grad_fn is None and not y.requires_grad
    torch.testing.assert_close(y, op.overload(x.detach(), b.detach()))
    assert op(x.detach(), b.detach()).grad_fn is None


def test_traced_and_unusual_calls_take_the_operator(on_cpu_device):
    from torch._subclasses.fake_tensor import FakeTensorMode

    op = kt.register(ACT)
    meta = op(torch.empty((3, 4), device="meta"), torch.empty((4,), device="meta"))
    assert meta.device.type == "meta" and meta.shape == (3, 4)  # the op's fake (planned by kspec)
    with FakeTensorMode() as mode:
        fake = op(mode.from_tensor(torch.ones(3, 4)), mode.from_tensor(torch.ones(4)))
    assert type(fake).__name__ == "FakeTensor" and fake.shape == (3, 4)
    x, b = _inputs(5)
    for bad in ((x, 2.0), (x,), (x, b, b)):  # the schema's refusals, as the operator gives them
        with pytest.raises(Exception) as via_callable:
            op(*bad)
        with pytest.raises(Exception) as via_operator:
            op.overload(*bad)
        assert type(via_callable.value) is type(via_operator.value)
        assert str(via_callable.value) == str(via_operator.value)


class _Tagged(torch.Tensor):
    """A tensor subclass with PyTorch's default ``__torch_function__``: its calls go through the operator."""


def test_a_tensor_subclass_takes_the_operator(on_cpu_device):
    op = kt.register(ACT)
    x, b = _inputs(6)
    y = op(x.detach().as_subclass(_Tagged), b.detach())
    assert type(y) is _Tagged  # its __torch_function__ wrapped the operator's result; the eager path gives a Tensor
    torch.testing.assert_close(y.as_subclass(torch.Tensor), op(x, b).detach())


def test_a_kernel_without_gradients_records_a_backward_that_names_it(on_cpu_device):
    op = kt.register(PLAIN)
    x, b = _inputs(7)
    y = op(x, b)
    torch.testing.assert_close(y.detach(), (x * b).detach())  # the forward runs
    assert y.requires_grad  # never a silently detached output
    with pytest.raises(kspec.KspecError, match="kernel 'eager_no_grad' has no gradients") as caught:
        y.sum().backward()
    assert isinstance(caught.value, NotImplementedError)
    assert x.grad is None and b.grad is None
    with torch.no_grad():
        assert not op(x, b).requires_grad
