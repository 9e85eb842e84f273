"""Bare kspec kernels inside ``torch.compile(fullgraph=True)`` on CUDA tensors (issue [Z]): tests/torch_tests/test_torch_bare.py
with the GPU. Skipped without PyTorch or a CUDA device."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import kspec  # noqa: E402
import kspec.jit  # noqa: E402,F401  # before Dynamo loads: then Dynamo knows its kernels
from helpers.torch_bare_cases import bare_model, bare_reference  # noqa: E402
from helpers.torch_cases import fresh_compiles, skip_without_cuda, unique_graphs  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    skip_without_cuda()
    with fresh_compiles():
        yield


def test_bare_calls_trace_as_ops_with_no_break_and_no_recompile():
    g = torch.Generator(device="cuda").manual_seed(0)
    x, y = torch.rand((1000, 257), generator=g, device="cuda"), torch.rand((257,), generator=g, device="cuda")
    explanation = torch._dynamo.explain(bare_model)(x, y)
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0
    torch._dynamo.reset()
    compiled = torch.compile(bare_model, fullgraph=True)
    for got, want in zip(compiled(x, y), bare_reference(x, y)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)
    graphs = unique_graphs()
    with torch._dynamo.config.patch(error_on_recompile=True):
        again = compiled(x * 3, y - 1)
    assert unique_graphs() == graphs
    for got, want in zip(again, bare_reference(x * 3, y - 1)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)


def test_jit_kernels_are_refused_with_a_kspec_error():
    @kspec.jit.rawkernel()
    def bare_jit_gpu(x):
        x[0] = 1.0

    with pytest.raises(kspec.KspecNotImplementedError, match="raw kernel 'bare_jit_gpu' cannot run inside torch.compile"):
        torch.compile(lambda t: bare_jit_gpu[1, 1](t), fullgraph=True)(torch.zeros(4, device="cuda"))
