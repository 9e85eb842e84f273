"""kspec.torch on CUDA tensors (issue [X] targets): ``torch.compile(fullgraph=True)`` of a function calling a
generated-module kernel, a constructor ElementwiseKernel, a ReductionKernel and fused functions gives the
eager results with no graph break and no recompile on a second call; the ops launch on PyTorch's current
stream. tests/torch_tests/test_torch.py runs the same model on kspec's CPU device without a GPU."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import kspec.torch as kt  # noqa: E402
from generated import elementwise as gen_elementwise, reduction as gen_reduction  # noqa: E402

from helpers.torch_cases import (  # noqa: E402
    add_kernel,
    fresh_compiles,
    fused_affine,
    fused_stats,
    model,
    opcheck_cases,
    reference,
    sum_kernel,
    sumdiff_kernel,
    unique_graphs,
)

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    with fresh_compiles():
        yield


@pytest.fixture
def tensors():
    g = torch.Generator(device="cuda").manual_seed(0)
    return torch.rand((1000, 257), generator=g, device="cuda"), torch.rand((257,), generator=g, device="cuda")


def check(got, want, rtol=1e-5, atol=1e-5):
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        assert g.is_cuda and g.shape == w.shape and g.dtype == w.dtype
        torch.testing.assert_close(g, w, rtol=rtol, atol=atol)


def test_opcheck_passes_on_cuda():
    for what, op, args, kwargs in opcheck_cases("cuda"):
        result = torch.library.opcheck(op, args, kwargs)
        assert set(result.values()) == {"SUCCESS"}, (what, result)


def test_model_compiled_fullgraph_matches_eager_without_recompiles(tensors):
    x, y = tensors
    f = model(kt.register_module(gen_elementwise, scalars={"saxpy": ["a"]}), kt)
    eager = f(x, y)
    check(eager, reference(x, y), rtol=1e-4, atol=1e-3)
    explanation = torch._dynamo.explain(f)(x, y)
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1
    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True)
    check(compiled(x, y), eager)
    graphs = unique_graphs()
    with torch._dynamo.config.patch(error_on_recompile=True):
        check(compiled(x * 2, y + 1), f(x * 2, y + 1))
    assert unique_graphs() == graphs


@pytest.mark.parametrize("which", ["generated", "elementwise", "reduction", "fused", "fused2", "generated_reduction"])
def test_each_kind_of_kernel_in_a_compiled_graph(tensors, which):
    x, y = tensors
    if which == "generated":
        op = kt.register_module(gen_elementwise).squared_diff
        fn = lambda x, y: op(torch.relu(x), y) * 3  # noqa: E731
    elif which == "elementwise":
        op = kt.register(add_kernel)
        fn = lambda x, y: op(x.t().contiguous().t(), y).cos()  # noqa: E731
    elif which == "reduction":
        op = kt.register(sum_kernel)
        fn = lambda x, y: (op(x, axis=0), op(x + 1, axis=(0, 1), keepdims=True))  # noqa: E731
    elif which == "fused":
        op = kt.register(fused_affine, scalars=["a"])
        fn = lambda x, y: op(x, 1.5, y)  # noqa: E731
    elif which == "fused2":
        op = kt.register(fused_stats, returns=2)
        fn = lambda x, y: op(x, y)  # noqa: E731
    else:
        op = kt.register_module(gen_reduction).argmax
        fn = lambda x, y: op(x, axis=1)  # noqa: E731
    eager = fn(x, y)
    compiled = torch.compile(fn, fullgraph=True)
    check(compiled(x, y), eager)
    with torch._dynamo.config.patch(error_on_recompile=True):
        check(compiled(x, y), eager)


def test_ops_launch_on_the_current_stream(tensors):
    x, y = tensors
    add = kt.register(add_kernel)
    compiled = torch.compile(lambda a, b: add(a, b) * 2, fullgraph=True)
    compiled(x, y)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        big = torch.rand((4096, 4096), device="cuda")  # work queued on the side stream first
        got = compiled(big, big[0])
        eager = add(big, big[0])
    side.synchronize()  # only the side stream: the kspec launches must have been queued there
    torch.testing.assert_close(got, (big + big[0]) * 2)
    torch.testing.assert_close(eager, big + big[0])


def test_reduce_overhead_mode_captures_the_ops(tensors):
    """torch.compile's CUDA-graph mode records the kspec launches into its graph (warmed up eagerly first)."""
    x, y = tensors
    f = model(kt.register_module(gen_elementwise, scalars={"saxpy": ["a"]}), kt)
    compiled = torch.compile(f, mode="reduce-overhead", fullgraph=True)
    for _ in range(3):  # warm-up, capture, replay
        got = compiled(x, y)
    check(got, f(x, y))


def test_compiled_graph_calls_the_kernels_directly(tensors):
    """Inductor allocates the kspec ops' outputs (empty_strided_cuda, its dead buffers reused) and calls the
    kernels of one output directly (``kspec_call``, no dispatcher), a kernel of two outputs through its out
    variant; they launch into those buffers on PyTorch's stream; the results are the eager ones, also when
    the graph runs on a side stream."""
    from torch._inductor.utils import run_and_get_code

    x, y = tensors
    add, total, sumdiff = kt.register(add_kernel), kt.register(sum_kernel), kt.register(sumdiff_kernel)

    def f(x, y):
        return total(sumdiff(add(add(add(x, y), y), y), y)[0], axis=0)

    got, codes = run_and_get_code(torch.compile(f, fullgraph=True), x, y)
    code = "\n".join(codes)
    assert code.count("torch.ops.kspec.torch_add.kspec_call(") == 3 and "torch.ops.kspec.torch_sum.kspec_call(" in code
    assert "torch.ops.kspec.torch_sumdiff.out(" in code
    assert "empty_strided_cuda(" in code and "assert_tensor_metadata(buf" not in code
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        on_side = torch.compile(f, fullgraph=True)(x, y)
    torch.cuda.current_stream().wait_stream(side)
    check(on_side, f(x, y))
    check(got, f(x, y))


def test_compiled_graph_calls_a_one_kernel_fused_function_directly(tensors):
    """A fused function of one kernel is a direct call on CUDA tensors too: its kernel writes the graph's buffer,
    in the forward and in a forward that records gradients (``__single``), on PyTorch's stream; the values and
    the gradients are the eager ones."""
    from torch._inductor.utils import run_and_get_code

    x, y = tensors
    affine = kt.register(fused_affine, scalars=["a"])
    got, codes = run_and_get_code(torch.compile(lambda x, y: affine(x, 2.0, y) * 3, fullgraph=True), x, y)
    assert "torch.ops.kspec.fused_affine.kspec_call(" in "\n".join(codes)
    check(got, (x * 2.0 + y) * 3)
    xg, yg = x.clone().requires_grad_(), y.clone().requires_grad_()
    step = torch.compile(lambda x, y: affine(x, 2.0, y), fullgraph=True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out, codes = run_and_get_code(step, xg, yg)
        grads = torch.autograd.grad(out, (xg, yg), torch.ones_like(out))
    torch.cuda.current_stream().wait_stream(side)
    assert "torch.ops.kspec.fused_affine__single.kspec_call(" in "\n".join(codes)
    check(out, x * 2.0 + y)
    check(grads, (torch.full_like(x, 2.0), torch.full_like(y, float(x.shape[0]))), rtol=1e-4, atol=1e-3)
