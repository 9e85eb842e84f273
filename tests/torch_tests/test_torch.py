"""kspec.torch (issue [X]): kspec kernels as PyTorch operators inside ``torch.compile(fullgraph=True)``.

Without a GPU, CPU tensors run the kernels on kspec's CPU device, so the whole path is checked here: the
schema, the fake implementation (outputs from ``kernel.output_specs``), Dynamo tracing with no graph break,
Inductor calling the ops, results equal to eager ones and to PyTorch's own, and no recompile on a second
call. tests/torch_tests/test_torch_gpu.py does the same with CUDA tensors. Skipped where PyTorch is not installed.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import kspec  # noqa: E402
import kspec.torch as kt  # noqa: E402
from generated import elementwise as gen_elementwise, reduction as gen_reduction  # noqa: E402

from helpers.child_env import child_path  # noqa: E402
from helpers.torch_cases import (  # noqa: E402
    add_kernel,
    axpy_kernel,
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


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    with fresh_compiles():
        yield


@pytest.fixture
def tensors():
    g = torch.Generator().manual_seed(0)
    return torch.rand((37, 29), generator=g), torch.rand((29,), generator=g)


# -- registration and schemas ------------------------------------------------------------------------------


def test_register_defines_an_op_with_the_kernels_schema():
    op = kt.register(add_kernel)
    assert op.overload is torch.ops.kspec.torch_add.default
    assert str(op.overload._schema) == "kspec::torch_add(Tensor x, Tensor y) -> Tensor"
    assert kt.register(add_kernel) is op  # the same kernel again: the same op
    axpy = kt.register(axpy_kernel, scalars=["a"])
    assert str(axpy.overload._schema) == "kspec::torch_axpy(float a, Tensor x, Tensor y) -> Tensor"
    reduce = kt.register(sum_kernel)
    assert str(reduce.overload._schema) == "kspec::torch_sum(Tensor x, *, int[]? axis=None, bool keepdims=False) -> Tensor"
    fused = kt.register(fused_stats, returns=2)
    assert str(fused.overload._schema) == "kspec::fused_stats(Tensor x, Tensor y) -> (Tensor, Tensor)"
    # spec kernels' out variants: the outputs after the inputs, written in place; fused functions have none
    assert str(torch.ops.kspec.torch_add.out._schema) == "kspec::torch_add.out(Tensor x, Tensor y, Tensor(a0!) out0) -> ()"
    assert str(torch.ops.kspec.torch_sum.out._schema) == (
        "kspec::torch_sum.out(Tensor x, Tensor(a0!) out0, *, int[]? axis=None, bool keepdims=False) -> ()"
    )
    assert not hasattr(torch.ops.kspec.fused_stats, "out")
    clash = kspec.ElementwiseKernel("T out0, T out1", "T a, T b", "a = out0; b = out1", "torch_clash")
    kt.register(clash)
    assert str(torch.ops.kspec.torch_clash.out._schema) == (
        "kspec::torch_clash.out(Tensor out0, Tensor out1, Tensor(a0!) out0_, Tensor(a1!) out1_) -> ()"
    )


def test_names_scalars_and_refusals():
    other = kspec.ElementwiseKernel("T x, T y", "T z", "z = x - y", "torch_add")  # same name, another kernel
    with pytest.warns(UserWarning, match=r"kspec::torch_add is another kernel's .* this one is kspec::torch_add__[0-9a-f]{12}"):
        op = kt.register(other)
    assert re.fullmatch(r"torch_add__[0-9a-f]{12}", op.overload.name().split("::")[1].split(".")[0])
    twin = kspec.ElementwiseKernel("T x, T y", "T z", "z = x - y", "torch_add")  # the same content: the same op
    assert kt.register(twin) is op
    with pytest.raises(kspec.KspecValueError, match="op kspec::torch_add is registered for another kernel"):
        kt.register(other, "torch_add")
    with pytest.raises(kspec.KspecValueError, match="scalars: kernel 'torch_axpy' has no input 'b'"):
        kt.register(axpy_kernel, "axpy_b", scalars=["b"])
    with pytest.raises(kspec.KspecTypeError, match="expected an ElementwiseKernel, a ReductionKernel or a kspec.fuse"):
        kt.register(lambda x: x)
    silent = kspec.ElementwiseKernel("T x", "T y", "y = x", "torch_silent", no_return=True)
    with pytest.raises(kspec.KspecNotImplementedError, match="no_return=True"):
        kt.register(silent)
    with pytest.raises(kspec.KspecNotImplementedError, match="named positional parameters only"):
        kt.register(kspec.fuse(lambda *xs: xs[0] * 2))
    with pytest.raises(kspec.KspecTypeError, match="returns: expected the number of arrays"):
        kt.register(fused_affine, "affine_zero", returns=0)


def test_register_module_registers_elementwise_and_reduction_kernels():
    ops = kt.register_module(gen_elementwise, scalars={"saxpy": ["a"]})
    assert ops.squared_diff.overload is torch.ops.kspec.squared_diff.default
    # (named saxpy, or saxpy__<digest> where a test registered it before with other scalars)
    assert re.fullmatch(r"kspec::saxpy(__[0-9a-f]{12})?\(Scalar a, Tensor x, Tensor y\) -> Tensor", str(ops.saxpy.overload._schema))
    assert str(ops.clamp.overload._schema) == "kspec::clamp(Tensor x, Tensor lo, Tensor hi) -> Tensor"
    reductions = kt.register_module(gen_reduction, prefix="red_")
    assert str(reductions.argmax.overload._schema).endswith("-> (Tensor, Tensor)")
    assert not hasattr(reductions, "vector_add")
    with pytest.raises(kspec.KspecTypeError, match="expected a module written by `kspec generate`"):
        kt.register_module(np)


# -- the fake implementation: kernel.output_specs on FakeTensors ----------------------------------------------


def test_fake_tensors_get_the_kernels_output_specs():
    from torch._subclasses.fake_tensor import FakeTensorMode

    add, total = kt.register(add_kernel), kt.register(sum_kernel)
    with FakeTensorMode():
        x = torch.empty((5, 1), dtype=torch.float64)
        y = torch.empty((7,), dtype=torch.float64)
        z = add(x, y)
        s = total(torch.empty((4, 6, 8)), axis=(0, 2), keepdims=True)
    assert z.shape == (5, 7) and z.dtype == torch.float64
    assert s.shape == (1, 6, 1) and s.dtype == torch.float32
    with FakeTensorMode(), pytest.raises(kspec.KspecTypeError, match="y is an array of float64, but type placeholder 'T'"):
        add(torch.empty(3), torch.empty(3, dtype=torch.float64))
    # a second device's index is kept (where a GPU is present, PyTorch checks the index against the devices)
    second = 1 if not torch.cuda.is_available() or torch.cuda.device_count() > 1 else 0
    with FakeTensorMode():  # CUDA FakeTensors need no GPU, and neither does their planning
        z = add(torch.empty((5, 1), device="cuda"), torch.empty(7, device="cuda"))
        s = total(torch.empty((4, 6, 8), dtype=torch.float16, device=f"cuda:{second}"), axis=1)
    assert z.shape == (5, 7) and z.device == torch.device("cuda", 0)
    assert s.shape == (4, 8) and s.dtype == torch.float16 and s.device == torch.device("cuda", second)


# -- eager and compiled, on kspec's CPU device ---------------------------------------------------------------


def test_opcheck_passes(on_cpu_device):
    """PyTorch's own check of a custom op: schema, autograd registration, fake tensors against real results,
    AOT dispatch with dynamic shapes."""
    for what, op, args, kwargs in opcheck_cases("cpu"):
        result = torch.library.opcheck(op, args, kwargs)
        assert set(result.values()) == {"SUCCESS"}, (what, result)


def test_eager_ops_match_pytorch(on_cpu_device, tensors):
    x, y = tensors
    add, total = kt.register(add_kernel), kt.register(sum_kernel)
    torch.testing.assert_close(add(x, y), x + y)
    torch.testing.assert_close(total(x, axis=1), x.sum(1))
    torch.testing.assert_close(total(x, axis=(0, 1), keepdims=True), x.sum().reshape(1, 1))
    torch.testing.assert_close(total(x), x.sum())
    axpy = kt.register(axpy_kernel, scalars=["a"])
    torch.testing.assert_close(axpy(2.5, x, y), 2.5 * x + y)
    total_xy, peak = kt.register(fused_stats, returns=2)(x, y)
    torch.testing.assert_close(total_xy, (x * y).sum(1))
    torch.testing.assert_close(peak, ((x * y) ** 2).amax(1))


def test_cpu_tensors_need_the_cpu_device(tensors):
    add = kt.register(add_kernel)
    with kspec.use_device("cuda"), pytest.raises(kspec.KspecValueError, match="kspec runs on its CPU device; turn it on"):
        add(*tensors)


def test_compiled_graph_has_no_break_matches_eager_and_does_not_recompile(on_cpu_device, tensors):
    x, y = tensors
    ops = kt.register_module(gen_elementwise, scalars={"saxpy": ["a"]})
    f = model(ops, kt)
    eager = f(x, y)
    explanation = torch._dynamo.explain(f)(x, y)
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1
    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True)
    first = compiled(x, y)
    for got, want, torch_own in zip(first, eager, reference(x, y)):
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(got, torch_own)
    graphs = unique_graphs()
    with torch._dynamo.config.patch(error_on_recompile=True):
        again = compiled(x + 1, y * 2)  # same shapes, new values: the same graph
    assert unique_graphs() == graphs
    for got, want in zip(again, f(x + 1, y * 2)):
        torch.testing.assert_close(got, want)


def test_out_variants_write_the_given_outputs(on_cpu_device, tensors):
    x, y = tensors
    kt.register(add_kernel), kt.register(sum_kernel)
    z, s = torch.empty_like(x), torch.empty(x.shape[0])
    assert torch.ops.kspec.torch_add.out(x, y, z) is None
    torch.testing.assert_close(z, x + y)
    torch.ops.kspec.torch_sum.out(x, s, axis=[1])
    torch.testing.assert_close(s, x.sum(1))
    with pytest.raises(Exception, match="torch_add"):  # a wrong output: kspec's error, nothing written
        torch.ops.kspec.torch_add.out(x, y, torch.empty(3))


def test_compiled_graph_calls_one_output_kernels_directly(on_cpu_device, tensors):
    """Inductor's code calls a kernel of one output directly (``torch.ops.kspec.<name>.kspec_call``, no
    dispatcher), scalars and keywords by name, on buffers it allocates (and reuses), with no check of the
    outputs after each call; a kernel of two outputs takes the out variant; a fused function of two outputs
    stays one functional op."""
    from torch._inductor.utils import run_and_get_code

    x, y = tensors
    add, total, stats = kt.register(add_kernel), kt.register(sum_kernel), kt.register(fused_stats, returns=2)
    axpy, sumdiff = kt.register(axpy_kernel, scalars=["a"]), kt.register(sumdiff_kernel)

    def f(x, y):
        z = add(add(add(x, y), y), y)
        w = sumdiff(axpy(2.0, z, y), y)[1]
        return total(z, axis=1), stats(z, y)[0], w

    (s, t, w), codes = run_and_get_code(torch.compile(f, fullgraph=True), x, y)
    code = "\n".join(codes)
    assert code.count("torch.ops.kspec.torch_add.kspec_call(") == 3
    assert re.search(r"torch\.ops\.kspec\.torch_sum\.kspec_call\(buf\d+, axis=\[1\], out=buf\d+\)", code)
    assert re.search(r"torch\.ops\.kspec\.torch_axpy\.kspec_call\(buf\d+, arg1_1, a=2\.0, out=buf\d+\)", code)
    assert "torch.ops.kspec.torch_sumdiff.out(" in code and "torch.ops.kspec.fused_stats.default(" in code
    assert not re.search(r"torch_(add|sum|axpy)\.(out|default)", code)
    assert "empty_strided_cpu(" in code and "reuse" in code
    assert "assert_tensor_metadata(buf" not in code.split("fused_stats")[0]
    torch.testing.assert_close(s, (x + 3 * y).sum(1))
    torch.testing.assert_close(t, ((x + 3 * y) * y).sum(1))
    torch.testing.assert_close(w, 2 * (x + 3 * y))


def test_compiled_graph_calls_a_one_kernel_fused_function_directly(on_cpu_device, tensors):
    """A fused function that runs one elementwise kernel on its arguments is called directly too (its kernel
    given the buffer to write), in a forward that records gradients as in one that does not; one that runs
    two kernels stays its functional op."""
    from torch._inductor.utils import run_and_get_code

    x, y = tensors
    affine = kt.register(fused_affine, scalars=["a"])

    @kspec.fuse
    def centred(x):  # a reduction, then an elementwise kernel on its result
        return x - x.sum(axis=1, keepdims=True)

    centre = kt.register(centred)

    def f(x, y):
        return centre(affine(x, 2.0, y))

    got, codes = run_and_get_code(torch.compile(f, fullgraph=True), x, y)
    code = "\n".join(codes)
    assert re.search(r"torch\.ops\.kspec\.fused_affine\.kspec_call\(arg\d+_1, arg\d+_1, a=2\.0, out=buf\d+\)", code)
    assert "torch.ops.kspec.centred.default(" in code and "centred.kspec_call" not in code
    want = x * 2.0 + y
    torch.testing.assert_close(got, want - want.sum(1, keepdim=True))
    xg, yg = x.clone().requires_grad_(), y.clone().requires_grad_()
    with_grad, codes = run_and_get_code(torch.compile(lambda x, y: affine(x, 3.0, y), fullgraph=True), xg, yg)
    assert "fused_affine__single.kspec_call(" in "\n".join(codes)
    gx, gy = torch.autograd.grad(with_grad, (xg, yg), torch.ones_like(with_grad))
    torch.testing.assert_close(with_grad, x * 3.0 + y)
    torch.testing.assert_close(gx, torch.full_like(x, 3.0))
    torch.testing.assert_close(gy, torch.full_like(y, float(x.shape[0])))
    buf = torch.empty_like(x)  # a graph from Inductor's cache may hold a direct call the function no longer fits
    torch.ops.kspec.centred.kspec_call(x, out=buf)
    torch.testing.assert_close(buf, x - x.sum(1, keepdim=True))


def test_dynamic_graphs_allocate_through_the_out_variant(on_cpu_device, tensors):
    """Symbolic sizes take the out variant (a direct call takes fixed sizes), with the same results."""
    from torch._inductor.utils import run_and_get_code

    x, y = tensors
    add = kt.register(add_kernel)
    got, codes = run_and_get_code(torch.compile(lambda a, b: add(add(a, b), b), fullgraph=True, dynamic=True), x, y)
    code = "\n".join(codes)
    assert code.count("torch.ops.kspec.torch_add.out(") == 2 and "kspec_call" not in code
    torch.testing.assert_close(got, x + 2 * y)


def test_cpp_wrapper_calls_the_functional_op(on_cpu_device, tensors):
    """Inductor's C++ wrapper cannot call a Python extern kernel: the lowering hands the op to Inductor's own
    fallback (the functional op through the dispatcher), with the same results."""
    import torch._inductor.config as inductor_config
    from torch._inductor.utils import run_and_get_code

    x, y = tensors
    add = kt.register(add_kernel)
    with inductor_config.patch(cpp_wrapper=True):
        got, codes = run_and_get_code(torch.compile(lambda a, b: add(add(a, b), b), fullgraph=True), x, y)
    code = "\n".join(codes)
    assert "kspec_call" not in code and "kspec::torch_add" in code
    torch.testing.assert_close(got, x + 2 * y)


def test_direct_calls_survive_inductors_cache_in_a_new_process(on_cpu_device, tmp_path):
    """A graph Inductor loads from its cache in a new process calls the op's ``kspec_call``, which the op's
    registration there puts back."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import torch, kspec, kspec.torch as kt
        from torch._dynamo.utils import counters
        add = kt.register(kspec.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = x + y", "cached_add"))
        x, y = torch.rand(64), torch.rand(64)
        with kspec.use_device("cpu"):
            got = torch.compile(lambda a, b: add(add(a, b), b), fullgraph=True)(x, y)
        torch.testing.assert_close(got, x + 2 * y)
        print("hits", counters["inductor"]["fxgraph_cache_hit"])
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHINDUCTOR_")}
    env.update(TORCHINDUCTOR_CACHE_DIR=str(tmp_path), PYTHONPATH=child_path())
    hits = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        hits.append(done.stdout.split()[-1])
    assert hits == ["0", "1"]


def test_compiled_reduction_axis_and_keepdims_are_constants(on_cpu_device, tensors):
    x, _ = tensors
    total = kt.register(sum_kernel)

    @torch.compile(fullgraph=True)
    def both(x):
        return total(x, axis=0), total(x, axis=(0, 1), keepdims=True), total(x * 2, axis=-1)

    a, b, c = both(x)
    torch.testing.assert_close(a, x.sum(0))
    torch.testing.assert_close(b, x.sum().reshape(1, 1))
    torch.testing.assert_close(c, (x * 2).sum(-1))
    with torch._dynamo.config.patch(error_on_recompile=True):
        both(x.flip(0))


def test_compiled_errors_are_kspecs(on_cpu_device):
    add = kt.register(add_kernel)
    f = torch.compile(lambda a, b: add(a, b), fullgraph=True)
    with pytest.raises(Exception, match="operands could not be broadcast together: kernel 'torch_add'"):
        f(torch.rand(3, 2), torch.rand(4))


def test_generated_reduction_in_a_graph(on_cpu_device, tensors):
    x, _ = tensors
    ops = kt.register_module(gen_reduction)
    compiled = torch.compile(lambda x: ops.argmax(x, axis=1), fullgraph=True)
    value, index = compiled(x)
    torch.testing.assert_close(value, x.max(1).values)
    assert torch.equal(index, x.argmax(1))


def test_strided_inputs_inside_a_graph(on_cpu_device, tensors):
    x, y = tensors
    add = kt.register(add_kernel)
    b = torch.rand(74)
    compiled = torch.compile(lambda a, b: add(a.t(), b[::2]), fullgraph=True)
    torch.testing.assert_close(compiled(x, b), x.t() + b[::2])


def test_dynamic_shapes_compile_one_graph(on_cpu_device):
    """Symbolic sizes go through kspec's planning (output_specs gives symbolic outputs): one graph serves every
    shape with dynamic=True and with mark_dynamic; automatic dynamic shapes compile twice (static, dynamic)."""
    ops = kt.register_module(gen_elementwise, scalars={"saxpy": ["a"]})
    f = model(ops, kt)
    dynamic = torch.compile(f, fullgraph=True, dynamic=True)
    before = unique_graphs()
    for n, m in ((5, 29), (17, 29), (40, 3), (300, 100)):
        x, y = torch.rand(n, m), torch.rand(m)
        for got, want in zip(dynamic(x, y), reference(x, y)):
            torch.testing.assert_close(got, want)
    assert unique_graphs() == before + 1
    torch._dynamo.reset()
    add, total = kt.register(add_kernel), kt.register(sum_kernel)
    g = torch.compile(lambda a, b: total(add(a, b), axis=0, keepdims=True), fullgraph=True)
    before = unique_graphs()
    for n in (5, 6, 9, 33, 100):
        x, y = torch.rand(n, 4), torch.rand(4)
        torch.testing.assert_close(g(x, y), (x + y).sum(0, keepdim=True))
    assert unique_graphs() == before + 2
    torch._dynamo.reset()
    h = torch.compile(lambda a, b: add(a, b), fullgraph=True)
    x = torch.rand(5, 4)
    torch._dynamo.mark_dynamic(x, 0)
    before = unique_graphs()
    h(x, torch.rand(4))
    with torch._dynamo.config.patch(error_on_recompile=True):
        x7 = torch.rand(7, 4)
        torch.testing.assert_close(h(x7, torch.ones(4)), x7 + 1)
    assert unique_graphs() == before + 1


def test_scalars_from_outside_the_graph(on_cpu_device):
    """A traced number reaches the fake implementation as a SymInt / SymFloat: planning takes its type only
    (no guard on its value). Ints then go dynamic as PyTorch's do (one more graph, then none); floats are
    specialised by PyTorch for any operator taking a float (a graph per value), with correct results."""
    scale = kspec.ElementwiseKernel("int64 x, int64 k", "int64 z", "z = x * k", "torch_scale")
    op = kt.register(scale, scalars=["k"])
    assert str(op.overload._schema) == "kspec::torch_scale(Tensor x, SymInt k) -> Tensor"
    x = torch.arange(10)
    f = torch.compile(lambda x, k: op(x, k), fullgraph=True)
    before = unique_graphs()
    for k in (2, 3, 4, 5):
        assert torch.equal(f(x, k), x * k)
    assert unique_graphs() == before + 2
    axpy = kt.register(axpy_kernel, scalars=["a"])
    g = torch.compile(lambda a, x, y: axpy(a, x, y), fullgraph=True)
    x, y = torch.rand(5, 7), torch.rand(7)
    for a in (2.0, 3.5):
        torch.testing.assert_close(g(a, x, y), a * x + y)
    fused = kt.register(fused_affine, scalars=["a"])
    h = torch.compile(lambda x, a, y: fused(x, a, y), fullgraph=True)
    for a in (2, 3, 4.5):
        torch.testing.assert_close(h(x, a, y), a * x + y)
