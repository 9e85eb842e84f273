"""Bare kspec kernels inside ``torch.compile(fullgraph=True)`` (issue [Z]): called on tensors with no
``kspec.torch.register``, each traces as its registered op (one graph, no break, no recompile on new values).
Raw kernels are refused with a kspec error. On kspec's CPU device; tests/torch_tests/test_torch_bare_gpu.py does the same
with CUDA tensors. Skipped where PyTorch is not installed."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import kspec  # noqa: E402
import kspec.jit  # noqa: E402,F401  # before Dynamo loads: then Dynamo knows its kernels
import kspec.torch as kt  # noqa: E402
from helpers.torch_bare_cases import bare_add, bare_model, bare_reference, bare_sum, registered_model  # noqa: E402
from helpers.torch_cases import fresh_compiles, unique_graphs  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    with fresh_compiles():
        yield


@pytest.fixture
def tensors():
    g = torch.Generator().manual_seed(0)
    return torch.rand((37, 29), generator=g), torch.rand((29,), generator=g)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_bare_calls_trace_as_ops_with_no_break_and_no_recompile(on_cpu_device, tensors, backend):
    x, y = tensors
    explanation = torch._dynamo.explain(bare_model)(x, y)
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0
    torch._dynamo.reset()
    compiled = torch.compile(bare_model, fullgraph=True, backend=backend)
    for got, want in zip(compiled(x, y), bare_reference(x, y)):
        torch.testing.assert_close(got, want)
    graphs = unique_graphs()
    with torch._dynamo.config.patch(error_on_recompile=True):
        again = compiled(x * 3, y - 1)  # same shapes, new values: the same graph
    assert unique_graphs() == graphs
    for got, want in zip(again, bare_reference(x * 3, y - 1)):
        torch.testing.assert_close(got, want)


def test_bare_calls_use_the_registered_ops(on_cpu_device, tensors):
    x, y = tensors
    graphs = []

    def backend(gm, inputs):
        graphs.append(gm)
        return gm.forward

    torch.compile(bare_model, fullgraph=True, backend=backend)(x, y)
    targets = {str(n.target) for n in graphs[0].graph.nodes if n.op == "call_function"}
    assert {"kspec.bare_add.default", "kspec.bare_sum.default", "kspec.saxpy.default", "kspec.bare_affine.default"} <= targets
    assert kt.register(bare_add).overload is torch.ops.kspec.bare_add.default  # the op a bare call made: register's own
    assert kt.register(bare_sum).overload is torch.ops.kspec.bare_sum.default


def test_register_still_works_beside_bare_calls(on_cpu_device, tensors):
    x, y = tensors
    registered = torch.compile(registered_model(kt), fullgraph=True)
    bare = torch.compile(bare_model, fullgraph=True)
    for got, want, ref in zip(bare(x, y), registered(x, y), bare_reference(x, y)):
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(got, ref)


def test_reduction_axis_forms(on_cpu_device, tensors):
    x, _ = tensors
    f = torch.compile(lambda t: (bare_sum(t), bare_sum(t, axis=0), bare_sum(t, axis=(0, 1), keepdims=True)), fullgraph=True)
    whole, cols, kept = f(x)
    torch.testing.assert_close(whole, x.sum())
    torch.testing.assert_close(cols, x.sum(0))
    torch.testing.assert_close(kept, x.sum((0, 1), keepdim=True))


def test_jit_kernels_are_refused_with_a_kspec_error(on_cpu_device, tensors):
    x, _ = tensors

    @kspec.jit.rawkernel()
    def bare_jit(x):
        x[0] = 1.0

    for call in (lambda t: bare_jit[1, 1](t), lambda t: bare_jit((1,), (1,), (t,))):
        torch._dynamo.reset()
        with pytest.raises(kspec.KspecNotImplementedError, match="raw kernel 'bare_jit' cannot run inside torch.compile"):
            torch.compile(call, fullgraph=True)(x)


RAW_TWICE = r'''extern "C" __global__ void raw_twice(float* x, int n) {
    int i = threadIdx.x; if (i < n) x[i] *= 2.0f; }'''


def test_raw_kernels_and_modules_are_refused_with_a_kspec_error(on_cpu_device, tensors):
    x, _ = tensors
    made_before = kspec.RawKernel(RAW_TWICE, "raw_twice")  # its launch class exists before the call below
    from_module = kspec.RawModule(code=RAW_TWICE).get_function("raw_twice")
    module = kspec.RawModule(code=RAW_TWICE)
    n = np.int32(4)
    for kernel in (made_before, from_module):
        torch._dynamo.reset()
        with pytest.raises(kspec.KspecNotImplementedError, match="raw kernel 'raw_twice' cannot run inside torch.compile"):
            torch.compile(lambda t, k=kernel: k((1,), (32,), (t, n)), fullgraph=True)(x)
    torch._dynamo.reset()
    with pytest.raises(kspec.KspecNotImplementedError, match="RawModule.get_function cannot run inside torch.compile"):
        torch.compile(lambda t: module.get_function("raw_twice")((1,), (32,), (t, n)), fullgraph=True)(x)
    torch._dynamo.reset()
    fresh = kspec.RawKernel(RAW_TWICE.replace("2.0f", "3.0f"), "raw_twice")  # a launch class made after install
    with pytest.raises(kspec.KspecNotImplementedError, match="raw kernel 'raw_twice'"):
        torch.compile(lambda t: fresh((1,), (32,), (t, n)), fullgraph=True)(x)


def test_a_bad_call_names_the_kernel(on_cpu_device, tensors):
    x, y = tensors
    with pytest.raises(kspec.KspecError, match="kernel 'bare_add'.*stream="):
        torch.compile(lambda a, b: bare_add(a, b, stream=1), fullgraph=True)(x, y)


def test_kernels_built_before_torch_is_imported():
    code = (
        "import sys, kspec\n"
        "k = kspec.ElementwiseKernel('T x', 'T y', 'y = x * 2', 'bare_twice')\n"
        "assert 'torch' not in sys.modules\n"
        "import torch\n"
        "kspec.use_device('cpu').__enter__()\n"
        "f = torch.compile(lambda x: k(x) + 1, fullgraph=True, backend='eager')\n"
        "print(f(torch.ones(3)).tolist())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    if "HostCompilerNotFound" in done.stderr:
        pytest.skip("no host C++ compiler")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[3.0, 3.0, 3.0]"


@pytest.mark.parametrize("kspec_first", [True, False])
def test_jit_loaded_after_dynamo_is_refused_with_a_kspec_error(kspec_first):
    """kspec.jit imported after torch._dynamo (with kspec itself imported before or after Dynamo): Dynamo still
    learns its kernel type, so a bare call gets kspec's error, not Dynamo's."""
    first, second = ("import kspec", "import torch._dynamo") if kspec_first else ("import torch._dynamo", "import kspec")
    code = (
        f"import sys, torch\n{first}\n{second}\n"
        "assert 'kspec.jit' not in sys.modules\n"
        "import kspec.jit\n"
        "kspec.use_device('cpu').__enter__()\n"
        "@kspec.jit.rawkernel()\n"
        "def late_jit(x):\n"
        "    x[0] = 1.0\n"
        "try:\n"
        "    torch.compile(lambda t: late_jit((1,), (1,), (t,)), fullgraph=True, backend='eager')(torch.ones(2))\n"
        "except kspec.KspecNotImplementedError as exc:\n"
        "    print(str(exc).splitlines()[0])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "raw kernel 'late_jit' cannot run inside torch.compile" in done.stdout
