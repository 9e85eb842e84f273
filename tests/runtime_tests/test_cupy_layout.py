"""The CuPy layout reads' gatekeeping without CuPy (kspec/_fastcall_c/05_cupy_layout.cc): types whose
sizes differ from CuPy's declarations and a C API of another signature are refused, registered types' plain
fields are read at the declared offsets, nothing follows a pointer before the probe confirms, and the stream
comes from the C API only for CuPy's own ``get_current_stream``. The layout on a real CuPy:
tests/runtime_tests/test_cupy_layout_gpu.py."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from typing import Any

import pytest

from kspec import compile_policy
from kspec.runtime import fastcall_module, prepare_cupy_layout, reset_call_path

STREAM_SIGNATURE = b"intptr_t (int)"


class ArrayShaped:  # tp_basicsize 16 + 14 * 8 = 128, _ndarray_base's: slot i at offset 16 + 8 i (in name order)
    __slots__ = tuple(f"s{i:02}" for i in range(14))


class PointerShaped:  # 16 + 4 * 8 = 48, MemoryPointer's
    __slots__ = ("s00", "s01", "s02", "s03")


STREAM_FN = ctypes.CFUNCTYPE(ctypes.c_ssize_t, ctypes.c_int)


def _capsule(fn: Any, name: bytes) -> Any:
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ctypes.cast(fn, ctypes.c_void_p), name, None)


@pytest.fixture
def fastcall() -> Iterator[Any]:
    # the call path is decided once a process: an earlier test of this worker whose first call ran under the
    # "never" compile policy decided on the Python path (which skipped these when xdist put them after one)
    reset_call_path()
    with compile_policy("allow"):
        module = fastcall_module(wait=True)
    if module is None:
        pytest.skip("no compiled call path here (no host compiler or Python headers)")
    yield module
    module.cupy_layout(None, None, None, None)


def test_without_cupy_nothing_is_decided() -> None:
    import sys

    if "cupy" in sys.modules:
        pytest.skip("CuPy is imported in this process")
    assert prepare_cupy_layout() is False


def test_types_of_other_sizes_or_another_signature_are_refused(fastcall: Any) -> None:
    handles = STREAM_FN(lambda device: 4096 + device)
    current = object()
    assert fastcall.cupy_layout(PointerShaped, PointerShaped, current, _capsule(handles, STREAM_SIGNATURE)) is False
    assert fastcall.cupy_layout(ArrayShaped, ArrayShaped, current, _capsule(handles, STREAM_SIGNATURE)) is False
    assert fastcall.cupy_layout(ArrayShaped, PointerShaped, current, _capsule(handles, b"intptr_t (void)")) is False
    with pytest.raises(TypeError, match="cupy_layout"):
        fastcall.cupy_layout(ArrayShaped, PointerShaped, current, handles)
    assert fastcall.cupy_fields(ArrayShaped()) is None and fastcall.cupy_stream_handle(0) is None


def test_fields_at_the_declared_offsets_and_nothing_followed_before_the_confirmation(fastcall: Any) -> None:
    handles = STREAM_FN(lambda device: 4096 + device)
    current = object()
    assert fastcall.cupy_layout(ArrayShaped, PointerShaped, current, _capsule(handles, STREAM_SIGNATURE)) is True
    a = ArrayShaped()
    size, dtype, data, base = object(), object(), object(), object()
    a.s02, a.s11, a.s12, a.s13 = size, dtype, data, base  # size, dtype, data, base: offsets 32, 104, 112, 120
    got = fastcall.cupy_fields(a)
    assert got[0] == id(size) and got[1:4] == (id(dtype), id(data), id(base))
    assert fastcall.cupy_fields(PointerShaped()) is None  # not the registered array type
    assert fastcall.cupy_reads(a) is None and fastcall.cupy_stream_handle(3) is None  # nothing confirmed
    fastcall.cupy_confirm(2)  # the probe's stage: its own reads follow pointers
    assert fastcall.cupy_stream_handle(3) == 4099  # the C API, called as get_current_stream(3).ptr
    with pytest.raises(RuntimeError, match="stage other than"):
        fastcall.cupy_confirm(1)
    fastcall.cupy_confirm(3)
    fastcall.cupy_layout(None, None, None, None)
    assert fastcall.cupy_stream_handle(3) is None and fastcall.cupy_fields(a) is None
    with pytest.raises(RuntimeError, match="no layout"):
        fastcall.cupy_confirm(3)
