"""Elementwise and reduction calls order the producers of ``__cuda_array_interface__`` and DLPack inputs
before their launch (issue 27), without a GPU: the fake driver (tests/helpers/fake_driver.py) records each event
record, stream wait and launch in order, and the DLPack producer records the ``stream`` it was asked for.
The race itself, with real producers, is tests/kernels_tests/test_stream_order_gpu.py."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest
from helpers import fake_device
from helpers.fake_device import DL, Cai
from helpers.fake_driver import fake_array

import kspec
from kspec.kernels.binaries import _loaded
from kspec.kernels.planning import _planner
from kspec.kernels.callpath import _prepared
from test_kernel_plan import signature
from kspec.runtime import _driver
from kspec.spec import ElementwiseSpec

fake = fake_device.fake  # the fixture: the fake driver, for kspec and cuda.core


PRODUCER = 0x66  # the producer library's side stream
CONSUMER = 0x55  # kspec's launch stream


@pytest.fixture
def drv(fake, monkeypatch):
    fake.any_kernel = True  # elementwise kernels are compiled here; their launches are checked elsewhere
    monkeypatch.setattr(_loaded, "_loaded", {})  # modules loaded through an earlier test's fake are gone
    monkeypatch.setattr(_loaded, "_by_cache_key", {})  # and the modules by binary-cache key
    return fake


def _add() -> kspec.ElementwiseKernel:
    return kspec.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = x + y", "stream_order_add")


def _sum() -> kspec.ReductionKernel:
    return kspec.ReductionKernel("float32 x", "float32 y", "x", "a + b", "y = a", "0", "stream_order_sum")


def test_cai_producer_stream_is_waited_on_before_each_launch(drv):
    k = _add()
    x, out = Cai(ptr=0xC000, shape=(4,), stream=PRODUCER), fake_array(0xB000)
    for _ in range(2):  # the second call too: a CAI input is read (and ordered) on every call
        drv.calls.clear()
        k(x, fake_array(0xA000), out, stream=CONSUMER)
        assert drv.calls == [("record", PRODUCER), ("wait", CONSUMER), ("launch", CONSUMER)]


def test_cai_producer_is_ordered_before_the_default_and_entered_streams(drv):
    k = _add()
    x = Cai(ptr=0xC000, shape=(4,), stream=PRODUCER)
    k(x, fake_array(0xA000), fake_array(0xB000))  # kspec / CAI arrays: the legacy default stream
    assert drv.calls == [("record", PRODUCER), ("wait", 0), ("launch", 0)]
    drv.calls.clear()
    with kspec.Stream.from_handle(CONSUMER):
        k(x, fake_array(0xA000), fake_array(0xB000))
    assert drv.calls == [("record", PRODUCER), ("wait", CONSUMER), ("launch", CONSUMER)]


def test_cai_without_a_producer_stream_or_on_the_launch_stream_needs_no_wait(drv):
    k = _add()
    for producer, consumer in ((None, CONSUMER), (CONSUMER, CONSUMER), (1, 0), (0, 0)):  # 1: legacy, as the protocol spells it
        drv.calls.clear()
        k(Cai(ptr=0xC000, shape=(4,), stream=producer), fake_array(0xA000), fake_array(0xB000), stream=consumer)
        assert drv.calls == [("launch", consumer)]


def test_dlpack_input_is_exported_for_the_launch_stream(drv):
    k = _add()
    x = DL(ptr=0xD000, shape=(4,))
    k(x, fake_array(0xA000), fake_array(0xB000), stream=CONSUMER)
    k(x, fake_array(0xA000), fake_array(0xB000))  # the legacy default stream: 1 in the protocol
    with kspec.Stream.from_handle(0x77):
        k(x, fake_array(0xA000), fake_array(0xB000))
    assert x.streams == [CONSUMER, 1, 0x77]
    assert [s for what, s in drv.calls if what == "launch"] == [CONSUMER, 0, 0x77]


def test_protocol_outputs_are_ordered_too(drv):
    k = _add()
    out = Cai(ptr=0xC000, shape=(4,), stream=PRODUCER)
    k(fake_array(0xA000), fake_array(0xB000), out, stream=CONSUMER)
    assert drv.calls == [("record", PRODUCER), ("wait", CONSUMER), ("launch", CONSUMER)]


CUPY_STREAM = 0x88  # the fake CuPy's current stream


def _fake_cupy(monkeypatch) -> list[tuple[str, tuple[int, ...]]]:
    """A process that imported CuPy: its current stream, and the arrays allocated in its name."""
    allocated: list[tuple[str | None, tuple[int, ...]]] = []

    def allocate(library, shape, dtype, stream=None, device=None):
        allocated.append((library, tuple(shape)))
        return fake_array(0xE000, shape, dtype)

    current = types.SimpleNamespace(ptr=CUPY_STREAM)
    cuda = types.SimpleNamespace(get_current_stream=lambda device_id=-1: current)

    def ndarray(shape, dtype):  # what the launch reads of a cupy.ndarray output: its memory's pointer
        allocate("cupy", shape, dtype)
        return types.SimpleNamespace(shape=tuple(shape), dtype=np.dtype(dtype), data=types.SimpleNamespace(ptr=0xE000))

    cupy = types.SimpleNamespace(__name__="cupy", cuda=cuda, ndarray=ndarray)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setattr(_prepared, "allocate", allocate)
    return allocated


def test_a_cai_only_first_array_answers_as_cupy_where_cupy_is_imported(drv, monkeypatch):
    # CuPy turns an object known only by __cuda_array_interface__ into a cupy.ndarray: a CuPy-style kernel's
    # outputs are CuPy's, launched on CuPy's current stream, its producer ordered before that
    allocated = _fake_cupy(monkeypatch)
    k = _add()
    for _ in range(2):  # the prepared call serves the second call the same way
        drv.calls.clear()
        k(Cai(ptr=0xC000, shape=(4,), stream=PRODUCER), fake_array(0xA000))
        assert drv.calls == [("record", PRODUCER), ("wait", CUPY_STREAM), ("launch", CUPY_STREAM)]
    assert allocated == [("cupy", (4,))] * 2
    # a kspec array first, a DLPack-only object (CuPy takes none) or a spec kernel: kspec's arrays, as before
    allocated.clear()
    k(fake_array(0xA000), Cai(ptr=0xC000, shape=(4,)))
    k(DL(ptr=0xD000, shape=(4,)), fake_array(0xA000))
    spec_kernel = kspec.ElementwiseKernel.from_spec(ElementwiseSpec(
        name="stream_order_typed_add", in_params="float32 x, float32 y", out_params="float32 z", operation="z = x + y"))
    spec_kernel(Cai(ptr=0xC000, shape=(4,)), fake_array(0xA000))
    monkeypatch.delitem(sys.modules, "cupy")  # and a process without CuPy (another signature: no prepared call yet)
    _add()(Cai(ptr=0xC000, shape=(2,)), fake_array(0xA000, shape=(2,)))
    assert allocated == [(None, (4,))] * 3 + [(None, (2,))]


def test_reduction_orders_cai_and_dlpack_inputs(drv):
    k = _sum()
    for _ in range(2):  # the second call from the prepared call
        drv.calls.clear()
        k(Cai(ptr=0xC000, shape=(4,), stream=PRODUCER), fake_array(0xB000, shape=()), stream=CONSUMER)
        assert drv.calls[:2] == [("record", PRODUCER), ("wait", CONSUMER)]
        assert [s for what, s in drv.calls if what == "launch"] == [CONSUMER]
    assert len(k._calls) == 1
    x = DL(ptr=0xD000, shape=(4,))
    k(x, fake_array(0xB000, shape=()), stream=CONSUMER)
    assert x.streams == [CONSUMER]


class NumbaLike(Cai):
    """A CAI producer with the ``dtype`` / ``ndim`` attributes kspec.fuse reads for its signature (Numba's)."""

    dtype = np.dtype(np.float32)
    ndim = 1


def test_fused_function_orders_its_cai_input(drv, monkeypatch):
    # the output goes to the fake's address space (the fake driver has no memory pool)
    monkeypatch.setattr(_prepared, "allocate", lambda library, shape, dtype, stream, device: fake_array(0xE000, shape, dtype))

    @kspec.fuse()
    def scaled(a, b):
        return a * 2 + b

    x = NumbaLike(ptr=0xC000, shape=(4,), stream=PRODUCER)
    with kspec.Stream.from_handle(CONSUMER):
        scaled(x, fake_array(0xA000))
    assert drv.calls[:2] == [("record", PRODUCER), ("wait", CONSUMER)]
    assert [s for what, s in drv.calls if what == "launch"] == [CONSUMER]


def test_inspecting_a_call_orders_nothing(drv):
    k = _add()
    k.specialization(Cai(ptr=0xC000, shape=(4,), stream=PRODUCER), np.zeros(4, np.float32))
    assert drv.calls == []


def test_cai_inputs_are_keyed_and_their_producers_still_ordered_per_call(drv, monkeypatch):
    k = _add()
    out = fake_array(0xB000)
    k(Cai(ptr=0xC000, shape=(4,), stream=PRODUCER), fake_array(0xA000), out, stream=CONSUMER)
    assert len(k._calls) == 1
    pointers = []
    prepared = k._calls.prepared_calls()[0]
    launch = prepared.launch
    prepared.launch = lambda args, stream, *ptrs: pointers.append(list(ptrs)) or launch(args, stream, *ptrs)
    with monkeypatch.context() as patch:
        patch.setattr(_planner, "bind", lambda *a, **kw: pytest.fail("a repeated signature was bound again"))
        for ptr, producer in ((0xC100, 0x77), (0xC200, 0x78)):
            drv.calls.clear()
            k(Cai(ptr=ptr, shape=(4,), stream=producer), fake_array(0xA000), out, stream=CONSUMER)
            assert drv.calls == [("record", producer), ("wait", CONSUMER), ("launch", CONSUMER)]
    assert pointers == [[0xC100, 0xA000, 0xB000], [0xC200, 0xA000, 0xB000]]
    # what binding and planning read is the key: another shape, dtype or strides prepares another call
    k(Cai(ptr=0xC000, shape=(2,), strides=(8,)), fake_array(0xA000, shape=(2,)), fake_array(0xB000, shape=(2,)))
    assert len(k._calls) == 2


def test_cai_signature_needs_one_device_and_a_plain_producer(drv, monkeypatch):
    x = Cai(ptr=0xC000, shape=(4,), stream=PRODUCER)
    key, pointers, producers = signature((x, 1.5))
    assert pointers == (0xC000, 0) and producers == [PRODUCER]
    assert key[1] == (Cai, (4,), "<f4", None, False)
    assert not signature((Cai(ptr=0xC000, shape=(4,)),))[2]  # no producer stream: nothing to order
    assert signature((Cai(mask=object()),)) is None  # the full path explains the error
    assert signature((Cai(version=1),)) is None
    assert signature((DL(),)) is None  # DLPack: exported per call on the full path

    numba_like = type("DeviceNDArray", (), {"__module__": "numba.cuda.cudadrv.devicearray"})
    y = numba_like()
    y.__cuda_array_interface__ = x.__cuda_array_interface__
    assert signature((y,)) is None  # Numba / JAX outputs go back as theirs: the full path does that
    monkeypatch.setattr(_driver, "_device_count", 2)
    assert signature((x,)) is None  # several devices: the pointer's device is a driver query
