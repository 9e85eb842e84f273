"""Kernels with gradients in PyTorch (issue [AD]): the op of a kernel whose spec declares ``grad`` has autograd:
``gradcheck`` (float64) and ``opcheck`` pass, eager and inside ``torch.compile`` (registered and bare calls, one
graph), broadcast inputs get gradients of their shape, scalar inputs none. On kspec's CPU device with CPU tensors;
skipped where PyTorch is not installed."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import kspec  # noqa: E402
import kspec.torch as kt  # noqa: E402
from helpers.cycles import collector_off  # noqa: E402
from helpers.grad_cases import fused_normalized, fused_rowmax, fused_rowprod, fused_rowsum  # noqa: E402
from helpers.torch_cases import fresh_compiles  # noqa: E402

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


def _grads_match_torchs_own(x, b, loss):
    """The gradients the kspec step left in ``x.grad`` / ``b.grad`` equal those of ``loss(_reference(x, b))``;
    returns the kspec ones."""
    got = x.grad.clone(), b.grad.clone()
    x.grad = b.grad = None
    loss(_reference(x, b)).backward()
    torch.testing.assert_close(got[0], x.grad)
    torch.testing.assert_close(got[1], b.grad)
    return got


def _one_graph(step, *args):
    """``step`` traces to one graph with no break (Dynamo's own count), Dynamo reset after."""
    explanation = torch._dynamo.explain(step)(*args)
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0
    torch._dynamo.reset()


def test_gradcheck_and_opcheck(on_cpu_device):
    op = kt.register(ACT)
    x, b = _inputs()
    assert torch.autograd.gradcheck(op, (x, b))
    assert all(v == "SUCCESS" for v in torch.library.opcheck(op.overload, (x, b)).values())


def test_eager_backward_matches_torchs_own(on_cpu_device):
    op = kt.register(ACT)
    x, b = _inputs(1)
    op(x, b).square().sum().backward()
    got = _grads_match_torchs_own(x, b, lambda y: y.square().sum())
    assert got[1].shape == b.shape


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("bare", [False, True], ids=["registered", "bare"])
def test_training_step_inside_torch_compile(on_cpu_device, backend, bare):
    op = ACT if bare else kt.register(ACT)
    x, b = _inputs(2)

    def step(x, b):
        return op(x, b).square().mean()

    _one_graph(step, x, b)
    torch.compile(step, fullgraph=True, backend=backend)(x, b).backward()
    _grads_match_torchs_own(x, b, lambda y: y.square().mean())


def test_scalar_inputs_get_no_gradient_and_frozen_inputs_cost_nothing(on_cpu_device):
    op = kt.register(SCALE, scalars=["s"])
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    op(x, 2.5).sum().backward()
    torch.testing.assert_close(x.grad, torch.full((4,), 2.5, dtype=torch.float64))
    frozen = torch.randn(4, dtype=torch.float64)
    assert op(frozen, 2.0).grad_fn is None  # nothing saved, no backward node


@kspec.fuse
def fused_act(x, b):
    v = x + b
    return v * np.tanh(v) + np.sin(x)


SUMSQ = kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "torch_grad_sumsq", grad="auto")


def test_a_fused_function_has_autograd_with_no_declaration(on_cpu_device):
    op = kt.register(fused_act)
    x, b = _inputs(3)
    assert torch.autograd.gradcheck(op, (x, b))
    assert all(v == "SUCCESS" for v in torch.library.opcheck(op.overload, (x, b)).values())
    op(x, b).square().sum().backward()
    _grads_match_torchs_own(x, b, lambda y: y.square().sum())


@pytest.mark.parametrize("bare", [False, True], ids=["registered", "bare"])
def test_a_fused_function_trains_inside_torch_compile(on_cpu_device, bare):
    op = fused_act if bare else kt.register(fused_act)
    x, b = _inputs(4)

    def step(x, b):
        return op(x, b).square().mean()

    _one_graph(step, x, b)
    torch.compile(step, fullgraph=True, backend="aot_eager")(x, b).backward()
    _grads_match_torchs_own(x, b, lambda y: y.square().mean())


@pytest.mark.parametrize("bare", [False, True], ids=["registered", "bare"])
def test_an_eager_fused_backward_leaves_no_reference_cycles(on_cpu_device, bare):
    """An eager fused step's gradients are freed when the caller drops them (a cycle would keep full-size
    gradients alive until the garbage collector next runs)."""

    op = fused_act if bare else kt.register(fused_act)
    x, b = _inputs(5)
    torch.autograd.grad(op(x, b).square().sum(), (x, b))  # warm: programs, ops and kernels made and kept
    ACT(x.detach(), b.detach())
    with collector_off() as held:
        for _ in range(3):
            grads = torch.autograd.grad(op(x, b).square().sum(), (x, b))
            del grads
            with torch.no_grad():  # a bare call with nothing to record: run on the tensors' memory
                ACT(x.detach(), b.detach())
        assert not held()


def test_a_fused_function_with_a_scalar_and_an_argument_read_twice(on_cpu_device):
    @kspec.fuse
    def poly(x, s):
        return x * x * s + x

    op = kt.register(poly, scalars=["s"])
    x = torch.randn(6, dtype=torch.float64, requires_grad=True)
    op(x, 3.0).sum().backward()
    torch.testing.assert_close(x.grad, 6.0 * x.detach() + 1.0)


@pytest.mark.parametrize("fn", [fused_rowsum, fused_normalized], ids=lambda f: f.__name__)
def test_a_fused_function_of_reductions_has_autograd(on_cpu_device, fn):
    op = kt.register(fn)
    x, b = _inputs(5)
    args = (x, b) if fn is fused_normalized else (x,)
    assert torch.autograd.gradcheck(op, args)
    compiled = torch.compile(lambda *a: op(*a).square().sum(), fullgraph=True, backend="aot_eager")
    (got,) = torch.autograd.grad(compiled(*args), (x,))
    reference = (lambda x, b: torch.softmax(x * b, dim=1)) if fn is fused_normalized else (lambda x: (x * x).sum(axis=1))
    (want,) = torch.autograd.grad(reference(*args).square().sum(), (x,))
    torch.testing.assert_close(got, want)


def test_a_fused_max_routes_the_gradient_and_a_product_raises_only_when_asked(on_cpu_device):
    x = torch.randn((3, 4), dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(kt.register(fused_rowmax), (x,))
    op = kt.register(fused_rowprod)
    y = op(x)  # the forward runs
    torch.testing.assert_close(y, x.detach().prod(axis=1))
    with pytest.raises(kspec.KspecNotImplementedError, match="op kspec::fused_rowprod: fused function 'fused_rowprod': its kernel 1"):
        y.sum().backward()


@pytest.mark.parametrize("axis, keepdims", [(None, False), (1, False), ((0, 2), True)])
def test_a_reduction_with_grad_has_autograd(on_cpu_device, axis, keepdims):
    op = kt.register(SUMSQ)
    x = torch.randn((3, 4, 5), dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: op(x, axis=axis, keepdims=keepdims), (x,))
    g = torch.randn(op(x, axis=axis, keepdims=keepdims).shape, dtype=torch.float64)
    (gx,) = torch.autograd.grad(op(x, axis=axis, keepdims=keepdims), (x,), g)
    want = 2 * x.detach() * (g if keepdims or axis is None else g.unsqueeze(axis))
    torch.testing.assert_close(gx, want)


def test_a_reduction_with_grad_trains_inside_torch_compile(on_cpu_device):
    op = kt.register(SUMSQ)
    x = torch.randn((4, 6), dtype=torch.float64, requires_grad=True)

    def step(x):
        return op(x, axis=1).sqrt().sum()

    torch.compile(step, fullgraph=True, backend="aot_eager")(x).backward()
    want = x.detach() / (x.detach() ** 2).sum(axis=1, keepdim=True).sqrt()
    torch.testing.assert_close(x.grad, want)
    assert kt.register(fused_act)(x.detach(), x.detach()).grad_fn is None  # nothing requires grad: no node


SHIFTED = kspec.ElementwiseKernel("T x, T b", "T y", "T v = x + b; y = v * tanh(v);", "torch_grad_shifted", grad="auto")


@pytest.mark.parametrize("b_shape", [(7,), (5, 7)], ids=["broadcast", "full"])
def test_a_bias_shares_the_inputs_gradient(on_cpu_device, b_shape):
    assert SHIFTED.spec.shared_gradients() == {"b": "x"}
    op = kt.register(SHIFTED)
    x = torch.randn((5, 7), dtype=torch.float64, requires_grad=True)
    b = torch.randn(b_shape, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(op, (x, b))
    gx, gb = torch.autograd.grad(op(x, b).sum(), (x, b))
    assert gb.shape == b.shape and gb.data_ptr() != gx.data_ptr()


def test_a_broadcast_bias_is_summed_in_the_backward_only_when_its_gradient_is_asked(on_cpu_device):
    op = kt.register(SHIFTED)
    summed = kspec.grad.summed_backward(SHIFTED)
    x = torch.randn((40, 7), dtype=torch.float64, requires_grad=True)
    b = torch.randn(7, dtype=torch.float64, requires_grad=True)
    summed.last_route = ""
    gx, gb = torch.autograd.grad(op(x, b).sum(), (x, b))
    assert summed.last_route == "row sums"  # b's gradient summed in the pass that writes x's
    v = (x + b).detach()
    want = torch.tanh(v) + v * (1 - torch.tanh(v) ** 2)
    torch.testing.assert_close(gx, want)
    torch.testing.assert_close(gb, want.sum(0))
    summed.last_route = ""
    (gx_only,) = torch.autograd.grad(op(x, b.detach()).sum(), (x,))  # a frozen bias: nothing summed
    assert summed.last_route == "" and gx_only.shape == x.shape
    torch.testing.assert_close(gx_only, want)


def test_complex_gradients_follow_pytorchs_convention(on_cpu_device):
    """kspec's backward kernels give grad * f'(z) (JAX's convention); PyTorch wants grad * conj(f'(z))."""
    op = kt.register(kspec.ElementwiseKernel("T x, T c", "T y", "y = x * x * c + x;", "torch_grad_cpoly", grad="auto"))
    x = torch.randn(5, dtype=torch.complex128, requires_grad=True)
    c = torch.randn(5, dtype=torch.complex128, requires_grad=True)
    assert torch.autograd.gradcheck(op, (x, c))


_COMPILED_STEP = """
import numpy as np, torch, kspec, kspec.torch as kt
kspec.use_device("cpu")
scaled = kspec.ElementwiseKernel("T x, T b", "T y", "T v = x + b; y = v * tanh(v);", "warm_cache_act", grad="auto")
op = kt.register(scaled)

@kspec.fuse
def fused(x, b):
    e = np.exp(x * b)
    return e / e.sum(axis=1, keepdims=True)

g = torch.Generator().manual_seed(0)
x = torch.randn(4, 5, dtype=torch.float64, generator=g, requires_grad=True)
b = torch.randn(5, dtype=torch.float64, generator=g, requires_grad=True)
torch.compile(lambda x, b: (op(x, b) + fused(x, b)).square().sum(), fullgraph=True)(x, b).backward()
print(repr([float(x.grad.sum()), float(b.grad.sum())]))
"""


def test_a_compiled_backward_from_inductors_caches_finds_its_ops(on_cpu_device, tmp_path):
    """A later process whose compiled backward comes from Inductor's on-disk caches traces no backward, so the
    ops that backward calls must exist by then: they are registered with the forward op (a spec kernel's) or when
    the forward is traced (a fused function's), under the same names in every process."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), "PYTHONPATH": os.pathsep.join(sys.path)}
    runs = [subprocess.run([sys.executable, "-c", _COMPILED_STEP], env=env, capture_output=True, text=True, timeout=600)
            for _ in range(2)]  # fmt: skip
    for run in runs:
        assert run.returncode == 0, run.stderr[-2000:]
    assert runs[0].stdout.splitlines()[-1] == runs[1].stdout.splitlines()[-1]


def test_a_fused_function_keeps_the_values_between_its_kernels_for_its_backward(on_cpu_device, monkeypatch):
    from kspec.torch import _backward_of

    ran = []
    forward = _backward_of._Ops.forward
    monkeypatch.setattr(_backward_of._Ops, "forward", lambda self, step, inputs: ran.append(step) or forward(self, step, inputs))
    op = kt.register(fused_softmax_rows, scalars=["t"])
    x = torch.randn((6, 5), dtype=torch.float64, requires_grad=True)
    g = torch.randn((6, 5), dtype=torch.float64)
    want = torch.autograd.grad(torch.softmax(x / 2.0, dim=1), (x,), g)[0]
    for call in (op, torch.compile(lambda x, t: op(x, t), fullgraph=True, backend="aot_eager")):
        y = call(x, 2.0)
        (gx,) = torch.autograd.grad(y, (x,), g)
        torch.testing.assert_close(gx, want)
    assert ran == []  # the exponential and its row sums came from the forward: no forward kernel ran again
    with torch.no_grad():
        assert op(x, 2.0).grad_fn is None  # outside autograd: the plain fused call


@kspec.fuse
def fused_softmax_rows(x, t):
    e = np.exp(x / t)
    return e / e.sum(axis=1, keepdims=True)


@kspec.fuse
def fused_shifted(x, b):
    v = x + b
    return v * np.tanh(v)


def test_a_fused_function_sums_a_broadcast_input_only_when_its_gradient_is_asked(on_cpu_device, monkeypatch):
    summing = []
    original = kspec.grad.SummedBackward.gradients
    monkeypatch.setattr(kspec.grad.SummedBackward, "gradients",
                        lambda self, *args, **kwargs: summing.append(self.name) or original(self, *args, **kwargs))  # fmt: skip
    op = kt.register(fused_shifted)
    x = torch.randn((40, 7), dtype=torch.float64, requires_grad=True)
    b = torch.randn(7, dtype=torch.float64, requires_grad=True)
    v = (x + b).detach()
    want = torch.tanh(v) + v * (1 - torch.tanh(v) ** 2)
    gx, gb = torch.autograd.grad(op(x, b).sum(), (x, b))
    assert summing  # b's gradient summed in the backward's pass
    torch.testing.assert_close(gx, want)
    torch.testing.assert_close(gb, want.sum(0))
    summing.clear()
    (gx_only,) = torch.autograd.grad(op(x, b.detach()).sum(), (x,))  # a frozen bias
    assert summing == []  # the shared backward: x's gradient alone, nothing summed
    torch.testing.assert_close(gx_only, want)


def test_an_eager_fused_backward_reuses_its_forwards_program_and_choices(on_cpu_device, monkeypatch):
    from kspec.torch import _backward_of

    @kspec.fuse
    def shifted_again(x, b):
        v = x + b
        return v * np.tanh(v)

    looked, chose = [], []
    program, choose = _backward_of.FusedRule.program, _backward_of._Ops._choose
    monkeypatch.setattr(_backward_of.FusedRule, "program", lambda self, args: looked.append(1) or program(self, args))
    monkeypatch.setattr(_backward_of._Ops, "_choose",
                        lambda self, step, inputs: chose.append(1) or choose(self, step, inputs))  # fmt: skip
    op = kt.register(shifted_again)
    x = torch.randn((40, 7), dtype=torch.float64, requires_grad=True)
    b = torch.randn(7, dtype=torch.float64, requires_grad=True)
    v = (x + b).detach()
    want = torch.tanh(v) + v * (1 - torch.tanh(v) ** 2)
    for _ in range(3):
        gx, gb = torch.autograd.grad(op(x, b).sum(), (x, b))
        torch.testing.assert_close(gx, want)
        torch.testing.assert_close(gb, want.sum(0))
    assert len(looked) == 3  # once a step, in the forward: its backward takes the program from it
    assert len(chose) == 1  # the backward's op chosen once for the program and the gradients asked
