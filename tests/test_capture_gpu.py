"""kspec calls captured into CUDA graphs on a GPU, three ways: CuPy's stream capture, PyTorch's
``torch.cuda.graph``, and ``kspec.capture``. Every case of tests/capture_cases.py (elementwise with and without
an output given, reductions full / axis=1 / split / 4-d axes (1, 3), fused functions with and without a
reduction, a jit kernel, a RawKernel) replays to the eager result and, after its inputs change in place, to
the new one; 100 small dependent calls replay as they ran. Then the first-call rule (a CaptureError before
anything compiles) under each capture, and graph updates with new pointers."""

from __future__ import annotations

import numpy as np
import pytest
from capture_cases import CASE_IDS, CASES, captures_of_new_pointers, check_case, check_many_small_calls, kspec_capture
from device_arrays import ArrayLibrary

import kspec
from kspec.kernels import _loaded

pytestmark = pytest.mark.gpu


def cupy_capture(call):
    """CuPy's style: warm on a non-blocking stream, record between begin_capture and end_capture."""
    cupy = pytest.importorskip("cupy")
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        call()
        stream.synchronize()
        stream.begin_capture()
        try:
            result = call()
        finally:
            graph = stream.end_capture()

    def replay() -> None:
        graph.launch(stream)
        stream.synchronize()

    return replay, result


def torch_capture(call):
    """PyTorch's style: warm on a side stream, record under ``torch.cuda.graph``, ``replay()``."""
    torch = pytest.importorskip("torch")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        result = call()

    def replay() -> None:
        graph.replay()
        torch.cuda.synchronize()

    return replay, result


STYLES = {"cupy": (cupy_capture, "cupy"), "torch": (torch_capture, "torch"), "kspec": (kspec_capture, "kspec")}


@pytest.fixture(params=sorted(STYLES))
def style(request):
    capture, library = STYLES[request.param]
    return capture, ArrayLibrary(library)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_replay_gives_the_eager_results_and_reads_new_input_values(case, style):
    capture, lib = style
    check_case(case, lib, capture)


def test_a_hundred_small_calls_replay_as_they_ran(style):
    capture, lib = style
    check_many_small_calls(lib, capture)


# -- the first-call rule: a CaptureError before anything compiles or loads, under each capture ----------------


def _fresh_kernel(monkeypatch) -> kspec.ElementwiseKernel:
    monkeypatch.setattr(_loaded, "_loaded", {})  # nothing of this spec loaded in this process yet
    monkeypatch.setattr(_loaded, "_by_cache_key", {})  # and the modules by binary-cache key
    return kspec.ElementwiseKernel("float32 x", "float32 y", "y = x + 1", "capture_gpu_first")


def test_first_call_inside_kspec_capture(monkeypatch):
    k = _fresh_kernel(monkeypatch)
    x = kspec.asarray(np.ones(16, np.float32))
    stream = kspec.Stream(non_blocking=True)
    with pytest.raises(kspec.CaptureError, match=r"kernel 'capture_gpu_first'.*call it once before capturing"):
        with kspec.capture(stream):
            k(x)
    assert not kspec.runtime.stream_is_capturing(stream.handle)
    with stream:
        k(x)  # warm
    with kspec.capture(stream) as graph:
        y = k(x)
    graph.launch()
    stream.synchronize()
    assert (y.get() == 2).all()


def test_first_call_inside_cupy_capture(monkeypatch):
    cupy = pytest.importorskip("cupy")
    k = _fresh_kernel(monkeypatch)
    x = cupy.ones(16, cupy.float32)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        try:
            with pytest.raises(kspec.CaptureError, match="kernel 'capture_gpu_first'"):
                k(x)
        finally:
            stream.end_capture()  # nothing was recorded or broken: the capture ends normally
        assert (k(x) == 2).all()


def test_first_call_inside_torch_graph(monkeypatch):
    torch = pytest.importorskip("torch")
    k = _fresh_kernel(monkeypatch)
    x = torch.ones(16, device="cuda")
    with pytest.raises(kspec.CaptureError, match="kernel 'capture_gpu_first'"):
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            k(x)
    assert bool((k(x) == 2).all())


# -- new pointers: update -----------------------------------------------------------------------------------


def test_update_with_new_pointers_in_place_and_by_reinstantiation():
    add = kspec.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = x + y", "capture_gpu_add")
    graph, new_pointers, stream, a, b, out = captures_of_new_pointers(add, 64)
    assert graph.update(new_pointers) is True, graph.update_note
    graph.launch()
    stream.synchronize()
    assert (out.get() == 20).all()
    with kspec.capture(stream) as allocating:  # an output allocated inside: a graph allocation
        result = add(b, a)
    assert graph.update(allocating) is False, graph.update_note  # another topology: an allocation node
    for _ in range(2):  # relaunch: the graph's allocation is freed and made again at the same address
        graph.launch()
        stream.synchronize()
        assert (result.get() == 11).all()
