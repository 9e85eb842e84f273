"""Graph capture without a GPU: ``kspec.capture`` on kspec's CPU device (its driver records what a capturing
stream is given and replays it, kspec/runtime/host/_graph.py), and the first-call rule through the fake
driver (tests/helpers/fake_driver.py), where a test marks a stream as capturing. The same calls on a GPU, under
kspec's, CuPy's and PyTorch's capture: tests/capturer_tests/test_capture_gpu.py."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.capture_cases import CASE_IDS, CASES, captures_of_new_pointers, check_case, check_many_small_calls, kspec_capture
from helpers.device_arrays import ArrayLibrary
from helpers import fake_device
from helpers.fake_driver import fake_array

import kspec
from kspec.kernels.binaries import _loaded
from kspec.runtime.host import _driver as _host_driver

fake = fake_device.fake  # the fixture: the fake driver, for kspec and cuda.core



@pytest.fixture(params=["kspec", "numpy"])
def lib(request, on_cpu_device):
    return ArrayLibrary(request.param)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_replay_gives_the_eager_results_and_reads_new_input_values(case, lib):
    check_case(case, lib, kspec_capture)


def test_a_hundred_small_calls_replay_as_they_ran(lib):
    check_many_small_calls(lib, kspec_capture)


def _add():
    return kspec.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = x + y", "capture_cpu_add")


def _sum():
    return kspec.ReductionKernel("float32 x", "float32 y", "x", "a + b", "y = a", "0", "capture_cpu_sum")


def test_memory_a_capture_allocates_and_frees_stays_the_graphs(on_cpu_device):
    add, total = _add(), _sum()
    x = kspec.asarray(np.arange(1000, dtype=np.float32))
    stream = kspec.Stream(non_blocking=True)
    with stream:
        total(add(x, x))
    with kspec.capture(stream) as graph:
        result = total(add(x, x))  # the intermediate is freed inside the capture: the graph keeps it
    for _ in range(2):
        graph.launch()
        assert float(result.get()) == 2 * 999 * 1000 / 2
    graph.close()
    assert graph.closed


def test_update_in_place_and_by_reinstantiation(on_cpu_device):
    add = _add()
    graph, same_calls, stream, a, b, out = captures_of_new_pointers(add, 8)
    assert graph.update(same_calls) is True and "in place" in graph.update_note
    graph.launch()
    stream.synchronize()
    assert (out.get() == 20).all()
    with kspec.capture(stream) as two_calls:
        add(a, b, out)
        add(out, out, out)
    assert graph.update(two_calls) is False and "re-instantiated" in graph.update_note
    graph.launch(kspec.Stream(non_blocking=True))  # on another stream
    kspec.get_device().synchronize()
    assert (out.get() == 22).all()
    two_calls.launch()  # the graph that gave its instantiation makes a new one
    assert (out.get() == 22).all()


def test_capture_without_a_stream_makes_one_and_calls_launch_there(on_cpu_device):
    add = _add()
    x = kspec.asarray(np.ones(4, np.float32))
    out = kspec.empty(4, np.float32)
    add(x, x, out)
    with kspec.capture() as graph:
        assert kspec.runtime.current_stream() is graph.stream
        add(x, x, out)
    x.set(np.full(4, 5, np.float32))
    graph.launch()
    assert (out.get() == 10).all()


def test_first_call_inside_a_capture_raises_before_compiling(on_cpu_device, monkeypatch):
    add = _add()
    x = kspec.asarray(np.ones(4, np.float32))
    compiled = []
    monkeypatch.setattr(_loaded, "_loaded", {})  # this process loaded the kernel's module for an earlier test
    monkeypatch.setattr(_loaded, "_by_cache_key", {})  # and the modules by binary-cache key
    monkeypatch.setattr(_loaded, "compile_program", lambda *a: compiled.append(a))
    stream = kspec.Stream(non_blocking=True)
    with pytest.raises(kspec.CaptureError, match=r"kernel 'capture_cpu_add'.*call it once before capturing"):
        with kspec.capture(stream):
            add(x, x)
    assert compiled == []
    assert not kspec.runtime.stream_is_capturing(stream.handle)  # the failed block ended the capture


def test_first_raw_kernel_call_inside_a_capture_raises_before_loading(on_cpu_device):
    raw = kspec.RawKernel('extern "C" __global__ void capture_cpu_raw(float* y) { y[threadIdx.x] = 1; }',
                          "capture_cpu_raw")  # fmt: skip
    y = kspec.empty(4, np.float32)
    with pytest.raises(kspec.CaptureError, match="kernel 'capture_cpu_raw'"):
        with kspec.capture():
            raw((1,), (4,), (y,))
    assert raw._launcher.loaded_functions() == []
    raw((1,), (4,), (y,))  # outside a capture it loads and runs
    assert (y.get() == 1).all()


def test_repeated_calls_never_ask_whether_the_stream_captures(on_cpu_device, monkeypatch):
    add = _add()
    x = kspec.asarray(np.ones(4, np.float32))
    out = kspec.empty(4, np.float32)
    stream = kspec.Stream(non_blocking=True)
    add(x, x, out, stream=stream)
    queries = []
    driver = _host_driver.host_driver()
    real = driver.cuStreamIsCapturing
    monkeypatch.setattr(driver, "cuStreamIsCapturing", lambda s: queries.append(s) or real(s))
    for _ in range(3):
        add(x, x, out, stream=stream)
    with kspec.capture(stream):
        add(x, x, out)
    assert queries == []


def test_a_synchronisation_inside_a_capture_fails_and_invalidates_it(on_cpu_device):
    add = _add()
    x = kspec.asarray(np.ones(4, np.float32))
    add(x, x)
    stream = kspec.Stream(non_blocking=True)
    with pytest.raises(kspec.LaunchError, match="cuStreamSynchronize"):
        with kspec.capture(stream):
            add(x, x)
            stream.synchronize()
    with pytest.raises(kspec.CaptureError, match="cannot record"):
        with kspec.capture(stream):
            try:
                stream.synchronize()
            except kspec.LaunchError:
                pass  # swallowed: the capture is still invalid
    with kspec.capture(stream) as graph:  # the stream captures again afterwards
        add(x, x)
    graph.launch()


def test_capture_errors(on_cpu_device):
    with pytest.raises(kspec.KspecValueError, match="legacy default stream"):
        with kspec.capture(0):
            pass
    with pytest.raises(kspec.KspecValueError, match="mode: expected one of"):
        kspec.capture(mode="local")
    block = kspec.capture()
    with block:
        pass
    with pytest.raises(kspec.CaptureError, match="entered twice"):
        block.__enter__()
    with kspec.capture() as graph:
        pass
    with pytest.raises(kspec.KspecTypeError, match="new: expected a kspec.Graph"):
        graph.update(object())  # type: ignore[arg-type]
    graph.close()
    with pytest.raises(kspec.CaptureError, match="closed"):
        graph.launch()


# -- the first-call rule on the GPU path, through the fake driver ----------------------------------------------

CAPTURING, OTHER = 0x55, 0x66


@pytest.fixture
def drv(fake, monkeypatch):
    fake.any_kernel = True
    monkeypatch.setattr(_loaded, "_loaded", {})  # modules loaded through an earlier test's fake are gone
    monkeypatch.setattr(_loaded, "_by_cache_key", {})  # and the modules by binary-cache key
    return fake


def test_fake_driver_first_call_on_a_capturing_stream_loads_nothing(drv):
    add = _add()
    drv.capturing.add(CAPTURING)
    with pytest.raises(kspec.CaptureError, match=r"kernel 'capture_cpu_add'.*stream 0x55 is capturing"):
        add(fake_array(0xA000), fake_array(0xB000), fake_array(0xC000), stream=CAPTURING)
    assert drv.loaded == [] and drv.launches == []
    add(fake_array(0xA000), fake_array(0xB000), fake_array(0xC000), stream=OTHER)  # warm, elsewhere
    queries = drv.capture_queries
    for _ in range(3):  # warm: recorded by the capture like any launch, without asking again
        add(fake_array(0xA000), fake_array(0xB000), fake_array(0xC000), stream=CAPTURING)
    assert drv.capture_queries == queries
    assert [launch["stream"] for launch in drv.launches] == [OTHER] + [CAPTURING] * 3
