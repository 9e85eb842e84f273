"""The generated fast path of repeated elementwise calls (kspec/kernels/_fastcall.py), without a GPU: the
code it generates packs the same bytes the general path packs, and misses on anything it was not made for."""

from __future__ import annotations

import ctypes
import struct

import numpy as np
import pytest

from kspec.kernels._fastcall import MISS, Stubs, make_direct_call, pointer_runs


def test_pointer_runs_group_adjacent_slots() -> None:
    assert pointer_runs([(0, 0), (8, 1), (16, 2)]) == [(0, [0, 1, 2])]
    assert pointer_runs([(16, 2), (0, 0), (40, 3), (8, 1)]) == [(0, [0, 1, 2]), (40, [3])]


class _Recorder:
    """Stands in for the driver and the runtime: records launches, hands out one thread buffer."""

    def __init__(self, size: int = 64) -> None:
        self.buf = ctypes.create_string_buffer(size)
        self.launches: list[tuple] = []
        self.relaunched: list[tuple] = []
        self.allocated: list[tuple] = []

    def constants(self, **extra: object) -> dict:
        base = dict(
            DEVICE=0, FN="fn", GRID=3, BLOCK=128, WHAT="kernel 'k' (contig)", LIBRARY=None, SHAPE=(4,), SEVERAL=False,
            default_stream=lambda device: 7, choose_stream=lambda stream: 1000 + stream, buffer=lambda: (self.buf, 4242),
            launch=self._launch, relaunch=lambda *a: self.relaunched.append(a), cu_stream=lambda h: ("stream", h),
            allocate=self._allocate, activate=lambda d: None, pointer_of=lambda o: o.ptr, LOCAL=object(),
            EMPTY_LIKE=self._empty_like,
        )
        base.update(extra)
        return base

    def _launch(self, *args: object) -> tuple[int]:
        self.launches.append(args)
        return (0,)

    def _allocate(self, library, shape, dtype, stream, device):  # noqa: ANN001, ANN202
        self.allocated.append((library, shape, dtype, stream, device))
        return _Out(0xABC0)


    def _empty_like(self, arg: object) -> _Out:
        self.allocated.append(("like", arg))
        return _Out(0xDEF0)


class _Out:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr

    def data_ptr(self) -> int:  # a tensor's spelling (LIBRARY="torch")
        return self.ptr


def _slow_float(value: object) -> bytes:
    if isinstance(value, float) and abs(value) > 3.4e38:
        raise OverflowError("value out of range for float32 parameter 'a'")
    return struct.pack("<f", value)


def test_direct_call_packs_pointers_scalars_and_allocations() -> None:
    rec = _Recorder()
    direct = make_direct_call(
        pointer_slots=[(0, 0), (8, 2)],
        scalar_slots=[(24, 1, "<f", _slow_float)],
        allocations=[(16, "float32", None, None)],
        result="o0",
        nargs=3,
        constants=rec.constants(),
    )
    out = direct((None, 2.5, None), None, 0x1000, 0, 0x2000)
    assert isinstance(out, _Out)
    raw = rec.buf.raw
    assert struct.unpack_from("<QQQf", raw, 0) == (0x1000, 0x2000, 0xABC0, 2.5)
    assert rec.launches == [("fn", 3, 1, 1, 128, 1, 1, 0, ("stream", 7), 4242, 0)]
    assert rec.allocated == [(None, (4,), "float32", 7, 0)]  # default stream handle when no stream= given
    direct((None, 1.0, None), 5, 1, 0, 2)  # an explicit stream goes through choose_stream and to allocate
    assert rec.launches[-1][8] == ("stream", 1005)
    assert rec.allocated[-1][3] == 5


def test_direct_call_allocates_like_an_input_on_the_current_stream_only() -> None:
    rec = _Recorder()
    quick = lambda: _Out(0x1111)  # noqa: E731  # what the like-allocation replaces
    direct = make_direct_call(pointer_slots=[(0, 0)], scalar_slots=[], allocations=[(8, "float32", quick, 0)],
                              result="o0", nargs=1, constants=rec.constants(LIBRARY="torch"))  # fmt: skip
    out = direct(("tensor",), None, 0x1000)
    assert out.ptr == 0xDEF0 and rec.allocated == [("like", "tensor")]
    assert struct.unpack_from("<QQ", rec.buf.raw, 0) == (0x1000, 0xDEF0)
    direct(("tensor",), 5, 0x1000)  # a stream given: the general allocator, on that stream
    assert rec.allocated[-1] == ("torch", (4,), "float32", 5, 0)


def test_direct_call_falls_back_to_the_packer_that_raises() -> None:
    rec = _Recorder()
    direct = make_direct_call(pointer_slots=[], scalar_slots=[(0, 0, "<f", _slow_float)], allocations=[],
                              result="None", nargs=1, constants=rec.constants())  # fmt: skip
    with pytest.raises(OverflowError, match="parameter 'a'"):
        direct((1e300,), None, 0)
    assert rec.launches == []


def test_direct_call_relaunches_through_the_general_launcher_on_error() -> None:
    rec = _Recorder()
    direct = make_direct_call(pointer_slots=[(0, 0)], scalar_slots=[], allocations=[], result="args[0]",
                              nargs=1, constants=rec.constants(launch=lambda *a: (201,)))  # fmt: skip
    assert direct(("x",), None, 9) == "x"
    assert rec.relaunched == [("fn", 3, 128, 4242, 7, 0, "kernel 'k' (contig)")]


def test_stubs_serve_scalar_signatures_and_miss_other_types() -> None:
    calls: list[tuple] = []
    stubs = Stubs([False], lambda: "current", lambda: 1)
    assert stubs.call((1.0,), None) is MISS
    stubs.register((1.0, np.float32(2)), lambda args, stream, *p: calls.append((args, p, stream)) or "done")
    assert stubs.call((3.0, np.float32(4)), None) == "done"
    assert calls == [((3.0, np.float32(4)), (0, 0), None)]
    assert stubs.call((3, np.float32(4)), None) is MISS  # an int where a float was
    assert stubs.call((3.0,), None) is MISS  # another count
    assert stubs.call((3.0, np.float64(4)), None) is MISS


def test_stubs_take_the_entered_stream() -> None:
    entered = [True]
    seen: list[object] = []
    stubs = Stubs(entered, lambda: "entered-stream", lambda: 1)
    stubs.register((1,), lambda args, stream, p0: seen.append(stream))
    stubs.call((1,), None)
    stubs.call((1,), "given")
    assert seen == ["entered-stream", "given"]


def test_stubs_refuse_types_they_cannot_read() -> None:
    stubs = Stubs([False], lambda: None, lambda: 1)
    stubs.register((object(),), lambda *a: "never")
    assert stubs.call((object(),), None) is MISS


def test_direct_call_uses_the_thread_buffer_once_made() -> None:
    rec = _Recorder()

    class Local:
        buf = ctypes.create_string_buffer(16)
        address = 777

    direct = make_direct_call(pointer_slots=[(8, 0)], scalar_slots=[], allocations=[], result="None", nargs=1,
                              constants=rec.constants(LOCAL=Local))  # fmt: skip
    direct((None,), None, 0x55)
    assert struct.unpack_from("<Q", Local.buf.raw, 8) == (0x55,)
    assert rec.launches[-1][9] == 777
    assert rec.buf.raw == b"\0" * 64  # the fallback buffer() was not needed
