"""CuPy arrays and streams read through CuPy's layout on the compiled call path (kspec/runtime/_cupy_layout.py):
on for the installed CuPy, the same keys and results as the attribute reads for every view, the launch on
CuPy's current stream (a CUDA graph captured on it), and off where a type redefines an attribute or a probe
disagrees."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import kspec
from kspec.runtime import _cupy_layout, fastcall_module, forget_cupy_layout, prepare_cupy_layout

pytestmark = pytest.mark.gpu
LAYOUT, LAYOUT_SEVERAL, ATTRIBUTES = 8, 9, 1


@pytest.fixture
def cp() -> Iterator[Any]:
    import cupy

    fastcall_module(wait=True)
    forget_cupy_layout()
    yield cupy
    forget_cupy_layout()


def _sqd(name: str) -> Any:
    return kspec.ElementwiseKernel("T x, T y", "T z", "z = (x - y) * (x - y)", name)


def _views(cp: Any) -> list[tuple[Any, Any]]:
    rng = np.random.default_rng(5)
    a = cp.asarray(rng.standard_normal((6, 40, 33)).astype(np.float32))
    b = cp.asarray(rng.standard_normal((6, 40, 33)).astype(np.float32))
    return [(a, b), (a.T, b.T), (a[1:, ::3, 5:], b[1:, ::3, 5:]), (a[::-1, :, ::-2], b[:, ::-1, ::2]),
            (a, cp.broadcast_to(b[0, 0], a.shape)), (a[2, 3, 4], b[0, 0, 0]), (a[:, :0], b[:, :0]),
            (a.astype(np.float64)[:, 1], b.astype(np.float64)[:, 2])]  # fmt: skip


def test_layout_reads_equal_the_attributes(cp: Any) -> None:
    fastcall: Any = fastcall_module()
    assert prepare_cupy_layout() is True
    for x, _ in _views(cp):
        assert fastcall.cupy_reads(x) == (x.shape, x.strides, x.dtype, x.data.device_id, x.data.ptr)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        assert fastcall.cupy_stream_handle(cp.cuda.Device().id) == s.ptr
    assert fastcall.cupy_stream_handle(cp.cuda.Device().id) == cp.cuda.get_current_stream().ptr


def test_layout_calls_compute_and_key_as_the_attribute_reads(cp: Any) -> None:
    k = _sqd("layout_sqd")
    assert prepare_cupy_layout()
    for x, y in _views(cp):
        z = cp.empty(x.shape, x.dtype)
        assert k(x, y, z) is z
        np.testing.assert_allclose(z.get(), (x.get() - y.get()) ** 2, rtol=1e-6)
        np.testing.assert_allclose(k(x, y).get(), (x.get() - y.get()) ** 2, rtol=1e-6)
    assert set(k._calls.call.kinds) == {LAYOUT}
    planned = len(k._calls.prepared_calls())
    fastcall: Any = fastcall_module()
    fastcall.cupy_layout(None, None, None, None)  # the attribute reads: every key is found again, nothing planned
    for x, y in _views(cp):
        np.testing.assert_allclose(k(x, y).get(), (x.get() - y.get()) ** 2, rtol=1e-6)
    assert len(k._calls.prepared_calls()) == planned


def test_launches_go_to_cupys_current_stream(cp: Any) -> None:
    """A capture on a CuPy stream records kspec's launch there (a launch on another stream would break it)."""
    k = _sqd("layout_graph")
    kraw = kspec.RawKernel(r'extern "C" __global__ void twice(float* a) { a[threadIdx.x] *= 2; }', "twice")
    x, y = cp.arange(32, dtype=cp.float32), cp.ones(32, dtype=cp.float32)
    z = cp.empty_like(x)
    k(x, y, z)
    kraw((1,), (32,), (z,))
    assert prepare_cupy_layout()
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        k(x, y, z)
        kraw((1,), (32,), (z,))
        graph = s.end_capture()
        z.fill(-1)
        graph.launch()
    s.synchronize()
    np.testing.assert_array_equal(z.get(), 2 * (np.arange(32, dtype=np.float32) - 1) ** 2)


def test_a_subclass_that_redefines_shape_keeps_the_attribute_reads(cp: Any) -> None:
    class Plain(cp.ndarray):
        pass

    class Relabelled(cp.ndarray):
        @property
        def strides(self) -> Any:
            return super().strides

    for cls in (Plain, Relabelled):  # kspec reads CuPy's own subclasses as CuPy arrays (a user's, by its interface)
        cls.__module__ = "cupy._kspec_test"

    assert prepare_cupy_layout()
    for cls, kind in ((Plain, LAYOUT), (Relabelled, ATTRIBUTES)):
        k = _sqd(f"layout_{cls.__name__}")
        x, y, z = (cls(8, dtype=cp.float32) for _ in range(3))
        x[...] = cp.arange(8, dtype=cp.float32)
        y.fill(1)
        k(x, y, z)
        k(x, y, z)
        np.testing.assert_array_equal(z.get(), (np.arange(8) - 1.0) ** 2)
        assert k._calls.call.kinds == (kind, kind, kind)


def test_a_probe_that_disagrees_turns_the_layout_off(cp: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_cupy_layout, "_reads_agree", lambda fastcall, cupy: False)
    assert prepare_cupy_layout() is False
    fastcall: Any = fastcall_module()
    x = cp.ones(4, dtype=cp.float32)
    assert fastcall.cupy_reads(x) is None and fastcall.cupy_stream_handle(0) is None
    k = _sqd("layout_off")
    z = k(x, x)
    assert not z.any() and k._calls.call.kinds == (ATTRIBUTES, ATTRIBUTES)
