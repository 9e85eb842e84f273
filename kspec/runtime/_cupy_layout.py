"""CuPy arrays and streams read from C the way CuPy's own Cython code reads them.

A call's key reads of a CuPy array (``shape``, ``strides``, ``dtype``, ``data.ptr``) are about a quarter of
kspec's host cost above the C floor: ``shape`` and ``strides`` build a list and a tuple from a C++ vector on
every read. Cython modules that ``cimport cupy`` read those fields from the object, at the offsets
``cupy/_core/core.pxd`` and ``cupy/cuda/memory.pxd`` declare, and take the current stream from
``cupy_backends``' C API. The compiled call path (kspec/_fastcall_c/05_cupy_layout.cc) does the same
once this module has checked, per process, that the installed CuPy is laid out as it declares: both types'
``tp_basicsize`` (what Cython checks at import) and the C API's signature; on probe arrays (views, offsets, a
0-d array) first every field that leads nowhere (size, flags, the dtype's, data's and base's addresses), and
only then, following pointers, every read, and the stream in and out of a ``with`` block; calls read through
the layout only once all of it matched. Anything that differs leaves the attribute reads, which serve every
CuPy. The probes allocate nothing and make no CUDA call, so deciding is safe inside a stream capture.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

_lock = threading.Lock()
_decided: list[bool] = []
_FAKE_ADDRESS = 0x7F0000000000  # the probes' memory: never dereferenced, nothing is launched on it
_FAKE_STREAM = 0x7F0000001000
PROBING, ON = 2, 3  # kspec/_fastcall_c/05_cupy_layout.cc's stages


def prepare_cupy_layout() -> bool:
    """Turn the compiled call path's CuPy layout reads on for this process, once; True where they serve.
    False (and nothing read from CuPy's objects) without the compiled call path, before CuPy is imported, or
    where the installed CuPy is not laid out as kspec reads it."""
    if _decided:
        return _decided[0]
    from ._fastcall import fastcall_module

    fastcall = fastcall_module()
    if fastcall is None or "cupy" not in sys.modules:
        return False  # asked again later: the extension may load, CuPy be imported
    with _lock:
        if not _decided:
            _decided.append(_decide(fastcall, sys.modules["cupy"]))
    return _decided[0]


def forget_cupy_layout() -> None:
    """Turn the layout reads off and decide again on the next call (tests)."""
    from ._fastcall import fastcall_module

    with _lock:
        fastcall = fastcall_module()
        if fastcall is not None:
            fastcall.cupy_layout(None, None, None, None)
        _decided.clear()


def _decide(fastcall: Any, cupy: Any) -> bool:
    try:
        from cupy._core.core import _ndarray_base
        from cupy_backends.cuda import stream as backends_stream  # type: ignore[import-not-found]

        capsule = backends_stream.__pyx_capi__["get_stream_ptr"]
        pointer_type = cupy.cuda.MemoryPointer
        current_stream = cupy.cuda.get_current_stream
    except (ImportError, AttributeError, KeyError, TypeError):
        return False
    if not fastcall.cupy_layout(_ndarray_base, pointer_type, current_stream, capsule):
        return False
    try:
        same = _reads_agree(fastcall, cupy)
    except Exception:  # a CuPy whose probes fail for any reason keeps the attribute reads
        same = False
    if not same:
        fastcall.cupy_layout(None, None, None, None)
    return same


def _reads_agree(fastcall: Any, cupy: Any) -> bool:
    """Every layout read equal to the attribute it stands in for, on arrays over memory nobody touches."""
    device = cupy.cuda.runtime.getDevice()
    memory = cupy.cuda.UnownedMemory(_FAKE_ADDRESS, 4096, None, device)
    base = cupy.ndarray((2, 3, 5), dtype="float32", memptr=cupy.cuda.MemoryPointer(memory, 64))
    probes = [base, base.T, base[1:, ::2, 3:], base.view("int32")[:, 1], base.reshape(30)[7:8].reshape(()),
              cupy.ndarray((4, 0), dtype="complex128", memptr=cupy.cuda.MemoryPointer(memory, 0))]  # fmt: skip
    for a in probes:  # first the fields no pointer leads to: where they differ, nothing is dereferenced
        flags = a.flags
        if fastcall.cupy_fields(a) != (a.size, id(a.dtype), id(a.data), id(a.base), flags.c_contiguous,
                                       flags.f_contiguous):  # fmt: skip
            return False
    fastcall.cupy_confirm(PROBING)  # the probe's reads below may follow pointers; calls do not yet
    for a in probes:
        got = fastcall.cupy_reads(a)
        want = (a.shape, a.strides, a.dtype, a.data.device_id, a.data.ptr)
        if got is None or got != want or got[2] is not a.dtype:
            return False
    if fastcall.cupy_stream_handle(device) != cupy.cuda.get_current_stream(device).ptr:
        return False
    with _external_stream(cupy, device):  # made current for the block; nothing runs on it
        inside = fastcall.cupy_stream_handle(device)
    if inside != _FAKE_STREAM or fastcall.cupy_stream_handle(device) != cupy.cuda.get_current_stream(device).ptr:
        return False
    fastcall.cupy_confirm(ON)  # calls read through the layout from here on
    return True


class _StreamHandle:
    def __cuda_stream__(self) -> tuple[int, int]:  # the CUDA stream protocol, version 0
        return 0, _FAKE_STREAM


def _external_stream(cupy: Any, device: int) -> Any:
    """A CuPy stream object over the probe's handle (``Stream.from_external`` where CuPy has it: 14 deprecates
    ``ExternalStream``)."""
    from_external = getattr(cupy.cuda.Stream, "from_external", None)
    if from_external is not None:
        return from_external(_StreamHandle())
    return cupy.cuda.ExternalStream(_FAKE_STREAM, device)
