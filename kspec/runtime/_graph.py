"""CUDA graphs from stream capture: :func:`capture` and :class:`Graph` (``kspec.capture``, ``kspec.Graph``).

``with kspec.capture(stream) as graph:`` records every kspec call launched on ``stream`` (and any other work
queued there: CuPy's, PyTorch's) into a graph instead of running it; ``graph.launch()`` then runs it all with
one driver call. For programs without CuPy's or PyTorch's graph API; kspec calls capture under those too.

Why the driver's stream capture (``cuStreamBeginCapture`` ... ``cuGraphLaunch``, through cuda.bindings) and
not cuda.core's ``GraphBuilder``: kspec launches through cuda.bindings on any stream handle (its own
:class:`Stream`, CuPy's, PyTorch's, a raw int), and the driver captures exactly those; a GraphBuilder captures
on streams cuda.core makes or wraps, and importing cuda.core costs ~300 ms that a serving process must not
pay. The driver calls are few, and the CPU device's driver (kspec/runtime/host/_graph.py) answers the same
ones, so tests without a GPU run the same code.

Why thread-local capture mode by default: it refuses the calls a capture cannot record (a synchronisation, a
``cuMemAlloc``, a module load) made by *this* thread, so a mistake in the captured block fails at once
instead of giving a graph that misses work, while other threads of the process (a serving pool, a data
loader, the garbage collector freeing memory there) go on unaffected. ``"global"`` also refuses them in
other threads (PyTorch's default), which can break unrelated code; ``"relaxed"`` refuses nothing.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from .._errors import CaptureError, KspecTypeError, KspecValueError
from . import _driver
from ._device import Device, get_device
from ._launch import CUDA_ERROR_INVALID_CONTEXT
from ._stream import LEGACY_DEFAULT, Stream, cu_stream, stream_handle

MODES = ("thread_local", "global", "relaxed")
_MODE_NUMBERS = {"global": 0, "thread_local": 1, "relaxed": 2}  # CUstreamCaptureMode
_AUTO_FREE_ON_LAUNCH = 1  # CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH
_CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901


class Graph:
    """A captured CUDA graph, instantiated: :meth:`launch` runs what the capture recorded.

    Made by :func:`capture`. The recorded calls keep the pointers and scalar values they were captured with:
    a launch reads the *current contents* of those arrays, so writing new input values in place and launching
    again gives the new results. For new arrays (new pointers) or new scalars, capture again and
    :meth:`update` this graph from the new one. Outputs a captured call allocated belong to the graph: each
    launch writes them at the same addresses (the arrays the calls returned during the capture).
    ``close()`` (or ``with graph:``) frees it; a launched graph still running finishes first.
    """

    __slots__ = ("_graph", "_exec", "_stream", "_handle", "_device_id", "update_note", "__weakref__")

    def __init__(self, stream: object, handle: int, device_id: int) -> None:
        self._graph: Any = None  # CUgraph: what the capture recorded
        self._exec: Any = None  # CUgraphExec: its instantiation, what launches
        self._stream = stream  # the capturing stream's object: kept alive for launch() without a stream
        self._handle = handle
        self._device_id = device_id
        self.update_note = ""  # what the last update() did, and why when it re-instantiated

    @property
    def stream(self) -> object:
        """The stream the graph was captured on (``launch()`` without a stream launches there)."""
        return self._stream

    @property
    def device(self) -> Device:
        return Device(self._device_id)

    @property
    def closed(self) -> bool:
        return self._graph is None and self._exec is None

    def launch(self, stream: object = None) -> None:
        """Run the graph on ``stream`` (any stream kspec takes), by default the one it was captured on.
        Asynchronous, as a kernel launch: synchronise the stream to wait for it."""
        exec_ = self._exec if self._exec is not None else self._instantiate()
        handle = self._handle if stream is None else stream_handle(stream)
        cu = _driver.driver_for(self._device_id)
        (err,) = cu.cuGraphLaunch(exec_, cu_stream(handle))
        if err == CUDA_ERROR_INVALID_CONTEXT:  # a thread where no context is current yet
            Device(self._device_id).activate()
            (err,) = cu.cuGraphLaunch(exec_, cu_stream(handle))
        if err:
            raise CaptureError(f"launching the graph on stream 0x{handle:x} failed: {_driver.describe(err)}")

    def update(self, new: Graph) -> bool:
        """Make this graph run what ``new`` (a later capture of the same calls, e.g. with new arrays) recorded.

        In place (``cuGraphExecUpdate``: cheap, and launches already queued are unaffected) when the driver
        can: the same kernels in the same order, only their parameters changed. Otherwise (another topology,
        graphs holding their own allocations) this graph takes ``new``'s instantiation instead, and ``new``
        re-instantiates if it is launched itself. Either way this graph then runs ``new``'s calls (and cannot be
        re-instantiated from its own old capture). Returns True when updated in place; :attr:`update_note`
        says what happened and why.
        """
        if not isinstance(new, Graph):
            raise KspecTypeError(f"new: expected a kspec.Graph from kspec.capture(), got {type(new).__name__}")
        if new._graph is None or self.closed:
            raise CaptureError("update: both graphs must be captured and not closed")
        if new._device_id != self._device_id:
            raise KspecValueError(
                f"new: a graph captured on device {new._device_id} cannot update one of device {self._device_id}"
            )
        cu = _driver.driver_for(self._device_id)
        if self._exec is not None:
            err, info = cu.cuGraphExecUpdate(self._exec, new._graph)
            in_place = not err
            why = "" if in_place else _update_result(info, err)
        else:
            in_place, why = False, "this graph had no instantiation"
        if not in_place:
            taken = new._exec if new._exec is not None else new._instantiate()
            new._exec = None
            if self._exec is not None:
                cu.cuGraphExecDestroy(self._exec)
            self._exec = taken
        if self._graph is not None:  # the old capture no longer describes what runs
            cu.cuGraphDestroy(self._graph)
            self._graph = None
        self.update_note = (
            "updated in place (cuGraphExecUpdate)" if in_place else f"re-instantiated from the new capture: {why}"
        )
        return in_place

    def _instantiate(self) -> Any:
        if self._graph is None:
            raise CaptureError("the graph is closed" if self._exec is None else "the graph has no capture")
        cu = _driver.driver_for(self._device_id)
        Device(self._device_id).activate()
        err, exec_ = cu.cuGraphInstantiate(self._graph, _AUTO_FREE_ON_LAUNCH)
        if err:
            raise CaptureError(
                f"instantiating the captured graph failed: {_driver.describe(err)} (a graph that allocates memory "
                "can have one instantiation at a time: close or update() the graph that holds it)"
            )
        self._exec = exec_
        return exec_

    def close(self) -> None:
        """Free the graph and its instantiation (work already launched finishes first)."""
        cu = _driver._driver if self._device_id >= 0 else _driver.driver_for(self._device_id)
        exec_, graph = self._exec, self._graph
        self._exec = self._graph = None
        if cu is None:
            return
        if exec_ is not None:
            cu.cuGraphExecDestroy(exec_)
        if graph is not None:
            cu.cuGraphDestroy(graph)

    def __enter__(self) -> Graph:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the driver may already be gone
            pass

    def __repr__(self) -> str:
        state = "closed" if self.closed else "captured" if self._graph is not None else "capturing"
        return f"<kspec.Graph {state}, stream 0x{self._handle:x}, device {self._device_id}>"


def _update_result(info: Any, err: Any) -> str:
    result = getattr(info, "result", None)
    name = getattr(result, "name", None) or (str(result) if result is not None else "")
    return f"{_driver.describe(err)}{f' ({name})' if name else ''}"


class Capture:
    """The context manager :func:`capture` returns; ``with`` gives the :class:`Graph`, instantiated at exit."""

    __slots__ = ("_stream", "_mode", "_graph", "_current")

    def __init__(self, stream: object, mode: str) -> None:
        if mode not in MODES:
            raise KspecValueError(f"mode: expected one of {', '.join(map(repr, MODES))}, got {mode!r}")
        self._stream = stream
        self._mode = mode
        self._graph: Graph | None = None
        self._current: Stream | None = None

    def __enter__(self) -> Graph:
        if self._graph is not None:
            raise CaptureError("a kspec.capture() block cannot be entered twice; call kspec.capture() again")
        stream = Stream(non_blocking=True) if self._stream is None else self._stream
        handle = stream_handle(stream)
        if handle == LEGACY_DEFAULT:
            raise KspecValueError(
                "stream: the legacy default stream (0) cannot be captured; pass a stream such as "
                "kspec.Stream(non_blocking=True), or none and kspec.capture() makes one"
            )
        device_id = stream._device_id if isinstance(stream, Stream) and stream._device_id is not None else get_device().id
        cu = _driver.driver_for(device_id)
        Device(device_id).activate()
        (err,) = cu.cuStreamBeginCapture(cu_stream(handle), cu.CUstreamCaptureMode(_MODE_NUMBERS[self._mode]))
        if err:
            raise CaptureError(f"beginning a capture on stream 0x{handle:x} failed: {_driver.describe(err)}")
        graph = self._graph = Graph(stream, handle, device_id)
        # kspec calls in the block launch on the capturing stream without stream= (as in `with stream:`)
        self._current = stream if isinstance(stream, Stream) else Stream.from_handle(handle, device=device_id)
        self._current.__enter__()
        return graph

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:  # fmt: skip
        graph = self._graph
        assert graph is not None and self._current is not None
        self._current.__exit__(exc_type, exc, tb)
        cu = _driver.driver_for(graph._device_id)
        err, captured = cu.cuStreamEndCapture(cu_stream(graph._handle))
        if exc_type is not None:  # the block failed: what it captured is dropped, its error goes on
            if not err and captured is not None:
                cu.cuGraphDestroy(captured)
            return
        if err:
            why = (
                "something in the block did what a capture cannot record (a synchronisation, a copy to the host, "
                "a cuMemAlloc, a first call of a kernel) or used the stream from another thread"
                if int(err) == _CUDA_ERROR_STREAM_CAPTURE_INVALIDATED else "the capture failed"
            )  # fmt: skip
            raise CaptureError(f"ending the capture on stream 0x{graph._handle:x}: {_driver.describe(err)}: {why}")
        graph._graph = captured
        graph._instantiate()


def capture(stream: object = None, *, mode: str = "thread_local") -> Capture:
    """Record the work queued on ``stream`` into a :class:`Graph`: ``with kspec.capture(s) as graph: ...``.

    Inside the block, kspec calls (and CuPy's or PyTorch's work on the same stream) are recorded, not run;
    kspec calls without ``stream=`` launch on ``stream`` (as under ``with stream:``). At the end the graph is
    instantiated; ``graph.launch()`` runs it. Every kernel must have run once outside a capture with the same
    argument types on the device (its module compiled and loaded): a first call inside raises
    :class:`kspec.CaptureError` before anything compiles. Allocations inside are stream-ordered and become the
    graph's memory.

    Args:
        stream: any stream kspec takes (a :class:`Stream`, CuPy's, PyTorch's, a handle), not the legacy
            default stream; None makes a new non-blocking :class:`Stream` (``graph.stream``).
        mode: the driver's capture mode: ``"thread_local"`` (default: this thread's unsafe calls fail, other
            threads are unaffected), ``"global"``, or ``"relaxed"``.
    """
    return Capture(stream, mode)
