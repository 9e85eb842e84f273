"""Streams: kspec's own, and the handles of everybody else's.

``stream=`` anywhere in kspec accepts a :class:`Stream`, a raw handle (``int``; 0 is the legacy default
stream), or any object that exposes a stream the usual ways: ``__cuda_stream__()`` (cuda.core's protocol),
``.ptr`` (CuPy) or ``.cuda_stream`` (PyTorch).

When no stream is given, kspec launches on the *current stream of the inputs' array library*: CuPy's
current stream for CuPy arrays, PyTorch's for tensors, so kernels order with the surrounding library code
exactly as that library's own kernels would. Without such inputs (kspec arrays, scalars only) the legacy
default stream is used. ``with stream:`` (a :class:`Stream`) makes that stream current for kspec calls
in this thread (nested blocks stack); a current kspec stream wins over the array library's.
"""

from __future__ import annotations

import operator
import sys
import threading
from collections.abc import Callable
from typing import Any

from .._errors import CaptureError, KspecTypeError
from . import _device_kind, _driver
from ._device_kind import HOST_DEVICE_ID
from ._device import Device, get_device

LEGACY_DEFAULT = 0

# `with stream:` blocks. _entered counts the open blocks of all threads, so a call without stream= pays one
# list read while none is open; the stack of the blocks themselves is per thread.
_entered = [0]
open_stream_blocks = _entered  # the same list, for the layers above: `if open_stream_blocks[0]:` costs one read
_local = threading.local()


def current_stream() -> Stream | None:
    """The stream of the innermost ``with stream:`` block open in this thread, or None."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


class Stream:
    """A CUDA stream on one device.

    ``Stream()`` creates a new stream on the current device (``non_blocking=True`` makes it not synchronise
    with the legacy default stream); ``Stream.from_handle(h)`` wraps one made elsewhere without owning it.
    Exposes ``__cuda_stream__`` (cuda.core's protocol), ``.ptr`` (as CuPy) and ``.cuda_stream`` (as PyTorch),
    so other libraries accept it too. ``with stream:`` makes it current for kspec calls in this thread.
    """

    __slots__ = ("_handle", "_device_id", "_owned", "_cu", "_closed", "__weakref__")

    _handle: int
    _device_id: int | None
    _owned: bool
    _cu: Any
    _closed: bool

    def __init__(self, *, device: int | Device | None = None, non_blocking: bool = False, priority: int = 0) -> None:
        dev = get_device(device)
        cu = _driver.driver_for(dev.id)
        dev.activate()
        flags = cu.CUstream_flags.CU_STREAM_NON_BLOCKING if non_blocking else cu.CUstream_flags.CU_STREAM_DEFAULT
        handle = _driver.check(cu.cuStreamCreateWithPriority(int(flags), int(priority)), "cuStreamCreateWithPriority")
        self._cu = handle
        self._handle = int(handle)
        self._device_id = dev.id
        self._owned = True
        self._closed = False

    @classmethod
    def from_handle(cls, handle: int, *, device: int | Device | None = None) -> Stream:
        """Wrap an existing stream handle (not owned: closing the wrapper leaves the stream alone)."""
        stream = object.__new__(cls)
        stream._handle = stream_handle(handle)
        stream._device_id = None if device is None else Device(device).id
        stream._owned = False
        stream._cu = None
        stream._closed = False
        return stream

    @classmethod
    def legacy_default(cls) -> Stream:
        """The legacy default stream (handle 0), which synchronises with every blocking stream."""
        return cls.from_handle(LEGACY_DEFAULT)

    @property
    def handle(self) -> int:
        return self._handle

    @property
    def ptr(self) -> int:  # CuPy's spelling
        return self._handle

    @property
    def cuda_stream(self) -> int:  # PyTorch's spelling
        return self._handle

    @property
    def device(self) -> Device | None:
        return None if self._device_id is None else Device(self._device_id)

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self._handle)

    def __int__(self) -> int:
        return self._handle

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream) and other._handle == self._handle

    def __hash__(self) -> int:
        return hash(self._handle)

    def __repr__(self) -> str:
        return f"<kspec.Stream 0x{self._handle:x}{'' if self._owned else ' (external)'}>"

    def __enter__(self) -> Stream:
        """Make this stream current for kspec calls in this thread until the block ends (blocks nest)."""
        stack = getattr(_local, "stack", None)
        if stack is None:
            stack = _local.stack = []
        stack.append(self)
        _entered[0] += 1
        return self

    def __exit__(self, *exc_info: object) -> None:
        stack = _local.stack
        for position in range(len(stack) - 1, -1, -1):  # the innermost entry of this stream
            if stack[position] is self:
                del stack[position]
                _entered[0] -= 1
                break

    def synchronize(self) -> None:
        """Block until all work queued on this stream has finished."""
        cu = _driver.driver() if self._device_id is None else _driver.driver_for(self._device_id)
        _driver.check(cu.cuStreamSynchronize(cu.CUstream(self._handle)), "cuStreamSynchronize")

    def wait_for(self, other: object) -> None:
        """Make work queued on this stream after this call wait for work queued on ``other`` so far."""
        order_after(stream_handle(other), self._handle)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Wait for the stream's work, then destroy it (only a stream this object created).

        Arrays allocated on it stay valid: they are freed on the legacy default stream instead, which is
        safe because nothing can be queued on the closed stream any more.
        """
        if self._owned and self._cu is not None:
            cu = _driver.driver() if self._device_id is None else _driver.driver_for(self._device_id)
            _driver.check(cu.cuStreamSynchronize(self._cu), "cuStreamSynchronize")
            cu.cuStreamDestroy(self._cu)
            self._cu = None
            self._owned = False
            self._closed = True

    def __del__(self) -> None:
        try:
            # the driver that made it (a CPU-device stream is a plain int the CUDA driver must never see);
            # never initialises CUDA
            cu = _driver._driver if self._device_id != HOST_DEVICE_ID else _driver.driver_for(HOST_DEVICE_ID)
            if self._owned and self._cu is not None and cu is not None:
                cu.cuStreamDestroy(self._cu)
        except Exception:  # interpreter shutdown: the driver may already be gone
            pass


def live_handle(handle: int, owner: object) -> int:
    """``handle``, or the legacy default stream when ``owner`` (what ``handle`` came from) is a closed Stream."""
    if isinstance(owner, Stream) and owner._closed:
        return LEGACY_DEFAULT
    return handle


def stream_handle(stream: object) -> int:
    """The raw handle of anything ``stream=`` accepts (see the module docstring).

    How to read a handle is worked out once per stream *type*; later calls cost one dict lookup and an
    attribute read (this runs on every launch that passes ``stream=``).
    """
    if type(stream) is int:
        return stream
    getter = _handle_getters.get(type(stream))
    if getter is None:
        getter = _handle_getter(stream)
    return getter(stream)


def _protocol_handle(stream: Any) -> int:
    value = stream.__cuda_stream__()
    # cuda.core's protocol: (version, handle)
    return int(value[1]) if isinstance(value, tuple) else int(value)


_handle_getters: dict[type, Callable[[Any], int]] = {}


def _handle_getter(stream: object) -> Callable[[Any], int]:
    tp = type(stream)
    getter: Callable[[Any], int] | None = None
    if issubclass(tp, Stream):
        getter = operator.attrgetter("_handle")
    elif issubclass(tp, bool):
        raise KspecTypeError("stream: expected a stream or a stream handle, got a bool")
    elif issubclass(tp, int):
        getter = int
    else:
        # A plain int attribute reads faster than calling the protocol method: PyTorch, then CuPy.
        for attr in ("cuda_stream", "ptr"):
            if isinstance(getattr(stream, attr, None), int):
                getter = operator.attrgetter(attr)
                break
        else:
            if callable(getattr(stream, "__cuda_stream__", None)):
                getter = _protocol_handle
            elif getattr(stream, "handle", None) is not None:  # cuda.core's Stream.handle (a CUstream)
                getter = _int_attr("handle")
    if getter is None:
        raise KspecTypeError(
            f"stream: expected a kspec.Stream, an int handle or an object exposing __cuda_stream__, .ptr (CuPy) "
            f"or .cuda_stream (PyTorch), got {tp.__name__}"
        )
    _handle_getters[tp] = getter
    return getter


def _int_attr(attr: str) -> Callable[[Any], int]:
    def get(stream: Any) -> int:
        return int(getattr(stream, attr))

    return get


# -- default streams of array libraries ------------------------------------------------------------------


def _make_torch_current_stream() -> Callable[[int], int]:
    torch = sys.modules["torch"]
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # what Triton uses: no Stream object made
    if raw is not None:
        return raw

    def current(device_id: int) -> int:
        return torch.cuda.current_stream(device_id).cuda_stream

    return current


def _legacy(device_id: int) -> int:
    return LEGACY_DEFAULT


def default_stream_source(library: str | None) -> tuple[Callable[[int], Any], str]:
    """``(f, attribute)``: the handle of the stream to launch on when no ``stream=`` is given is
    ``f(device_id).<attribute>``, or ``f(device_id)`` itself when ``attribute`` is empty. Split so that code
    generated per call (kspec.kernels) reads it with no Python frame of its own: CuPy's
    ``get_current_stream`` and PyTorch's raw-stream query are C-level calls."""
    if library == "cupy":
        get_current_stream = sys.modules["cupy"].cuda.get_current_stream
        try:
            get_current_stream(0)  # CuPy keeps one current stream per device; the arrays' device's is the one
        except TypeError:  # an older CuPy without the device argument
            return (lambda device_id: get_current_stream()), "ptr"
        return get_current_stream, "ptr"
    if library == "torch":
        return _make_torch_current_stream(), ""
    return _legacy, ""


def default_stream_getter(library: str | None) -> Callable[[int], int]:
    """``f(device_id) -> handle`` of the stream to launch on when no ``stream=`` is given."""
    source, attribute = default_stream_source(library)
    if not attribute:
        return source
    handle_of = operator.attrgetter(attribute)
    return lambda device_id: handle_of(source(device_id))


# -- graph capture: what a first call checks before it compiles or loads ---------------------------------

CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906  # the legacy stream queried while a blocking stream captures


def stream_is_capturing(handle: int) -> bool:
    """Whether stream ``handle`` is capturing a CUDA graph now (``cuStreamIsCapturing``; an invalidated capture
    counts). Asked only where a call would compile or load a module (a first call), never per launch."""
    cu = _driver.driver()
    err, status = cu.cuStreamIsCapturing(cu_stream(handle))
    if err:  # the legacy stream while another stream captures: launching there would break that capture
        return int(err) == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
    return int(status) != 0  # CU_STREAM_CAPTURE_STATUS_NONE


FIRST_CALL = "compile or load its module on a first call (new argument types, or a new device)"
WARM_FIRST = (
    "call it once before capturing (same argument types, same device) so that it compiles and loads outside "
    "the capture"
)


def refuse_while_capturing(handle: int, label: str, doing: str = FIRST_CALL, advice: str = WARM_FIRST) -> None:
    """Raise :class:`kspec.CaptureError` about ``label`` (a kernel's label) when stream ``handle`` is
    capturing: ``doing`` (a compile, a module load, a copy to the host) cannot be recorded into a graph, and
    the driver would invalidate the capture. Costs a driver query: call it on first-call paths only."""
    if stream_is_capturing(handle):
        raise CaptureError(
            f"{label}: cannot {doing} while stream 0x{handle:x} is capturing a CUDA graph (a capture cannot "
            f"record it); {advice}"
        )


# -- ordering between streams ----------------------------------------------------------------------------

_cu_streams: dict[int, Any] = {}


def cu_stream(handle: int) -> Any:
    """A cached ``CUstream`` for a handle (the bindings convert a CUstream faster than an int)."""
    obj = _cu_streams.get(handle)
    if obj is None:
        if _device_kind.host_active:  # the host driver takes plain ints; never cache them for CUDA's calls
            return handle
        if len(_cu_streams) > 4096:  # handles of destroyed streams would otherwise pile up
            _cu_streams.clear()
        obj = _cu_streams[handle] = _driver.driver().CUstream(handle)
    return obj


def order_after(producer: int, consumer: int) -> None:
    """Make later work on stream ``consumer`` wait for work already queued on stream ``producer``."""
    if producer == consumer:
        return
    cu = _driver.driver()
    event = _driver.check(cu.cuEventCreate(int(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING)), "cuEventCreate")
    try:
        _driver.check(cu.cuEventRecord(event, cu_stream(producer)), "cuEventRecord")
        _driver.check(cu.cuStreamWaitEvent(cu_stream(consumer), event, 0), "cuStreamWaitEvent")
    finally:
        cu.cuEventDestroy(event)
