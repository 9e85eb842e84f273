"""Graph capture on the CPU device: the stream-capture and graph calls of the driver, answered on the host.

The host driver (kspec/runtime/host/_driver.py) runs every launch at once; while a stream captures, what is
queued on it is recorded instead: a launch with a copy of its parameter values (the launcher's buffer is
reused by the next call), a copy, a memset. Launching the graph replays the record. Memory allocated or freed
on a capturing stream belongs to the graph, as a CUDA graph's allocations do: it stays allocated, at the same
address, until the user has freed it and no graph or instantiation that recorded it is left. A
synchronisation of a capturing stream fails and invalidates the capture, as on a GPU.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from ..._errors import HostUnsupportedError

CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_ILLEGAL_STATE = 401
CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900
CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901
CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE = 910
CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED = 2


class HostGraph:
    """What one capture recorded: ``ops`` run in order, ``memory`` the pointers the graph keeps."""

    def __init__(self) -> None:
        self.ops: list[tuple[str, tuple[Any, ...]]] = []
        self.memory: set[int] = set()
        self.invalidated = False

    def kinds(self) -> list[tuple[str, Any]]:
        """The topology: each op's kind and, for a launch, its function (what an in-place update keeps)."""
        return [(kind, args[0] if kind == "launch" else None) for kind, args in self.ops]


class HostGraphExec:
    """An instantiation: the ops it replays (replaced by an update) and the memory it keeps."""

    def __init__(self, graph: HostGraph) -> None:
        self.graph = graph


class HostCapture:
    """The capture state of one host driver: which streams capture, and the graph memory still held."""

    def __init__(self, free: Callable[[int], tuple[int]]) -> None:
        self._free = free  # the driver's immediate free
        self._lock = threading.Lock()
        self.capturing: dict[int, HostGraph] = {}
        self._holders: dict[int, int] = {}  # pointer -> graphs and instantiations that recorded it
        self._freed: set[int] = set()  # pointers the user freed while a graph still holds them

    # -- stream capture ---------------------------------------------------------------------------------

    def begin(self, stream: int, mode: Any) -> tuple[int]:
        with self._lock:
            if stream == 0:
                return (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,)
            if stream in self.capturing:
                return (CUDA_ERROR_ILLEGAL_STATE,)
            self.capturing[stream] = HostGraph()
        return (0,)

    def end(self, stream: int) -> tuple[int, HostGraph | None]:
        with self._lock:
            graph = self.capturing.pop(stream, None)
            if graph is None:
                return (CUDA_ERROR_ILLEGAL_STATE, None)
            if graph.invalidated:
                self._release(graph.memory)
                return (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, None)
            self._hold(graph.memory)
        return (0, graph)

    def status(self, stream: int) -> tuple[int, int]:
        graph = self.capturing.get(stream)
        return (0, 0 if graph is None else 2 if graph.invalidated else 1)  # NONE, ACTIVE, INVALIDATED

    def synchronize(self, stream: int) -> tuple[int]:
        """A synchronisation: refused on a capturing stream, which it invalidates (as CUDA does)."""
        graph = self.capturing.get(stream)
        if graph is None:
            return (0,)
        graph.invalidated = True
        return (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,)

    # -- recording ----------------------------------------------------------------------------------------

    def record_launch(self, graph: HostGraph, fn: Any, grid: tuple[int, int, int], block: tuple[int, int, int],
                      shared: int, params: int) -> tuple[int]:  # fmt: skip
        sizes = fn.param_sizes
        if sizes is None:
            raise HostUnsupportedError(
                f"the CPU device cannot capture a launch of {fn.name!r}: its module does not say its parameter sizes"
            )
        pointers = (ctypes.c_void_p * len(sizes)).from_address(params) if sizes else ()
        values = [ctypes.create_string_buffer(ctypes.string_at(pointers[i] or 0, size), max(size, 1))
                  for i, size in enumerate(sizes)]  # fmt: skip
        frame = (ctypes.c_void_p * max(len(sizes), 1))(*[ctypes.addressof(v) for v in values])
        graph.ops.append(("launch", (fn, grid, block, shared, frame, values)))
        return (0,)

    def record(self, graph: HostGraph, kind: str, *args: Any) -> tuple[int]:
        graph.ops.append((kind, args))
        return (0,)

    def allocated(self, stream: int, ptr: int) -> None:
        graph = self.capturing.get(stream)
        if graph is not None:
            graph.memory.add(ptr)

    def free(self, ptr: int, stream: int) -> tuple[int] | None:
        """The result of a free the graphs take over, or None when the driver frees now."""
        with self._lock:
            graph = self.capturing.get(stream)
            if graph is not None:  # freed inside a capture: the graph's free node; it keeps the memory
                graph.memory.add(ptr)
                self._freed.add(ptr)
                return (0,)
            if self._holders.get(ptr):
                self._freed.add(ptr)
                return (0,)
        return None

    # -- graphs and instantiations --------------------------------------------------------------------------

    def instantiate(self, graph: HostGraph) -> tuple[int, HostGraphExec]:
        with self._lock:
            self._hold(graph.memory)
        return (0, HostGraphExec(graph))

    def update(self, exec_: HostGraphExec, graph: HostGraph) -> tuple[int, SimpleNamespace]:
        if exec_.graph.kinds() != graph.kinds():
            info = SimpleNamespace(result=CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, errorNode=None, errorFromNode=None)
            return (CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, info)
        with self._lock:
            self._hold(graph.memory)
            self._release(exec_.graph.memory)
        exec_.graph = graph
        return (0, SimpleNamespace(result=0, errorNode=None, errorFromNode=None))

    def destroy(self, obj: HostGraph | HostGraphExec) -> tuple[int]:
        graph = obj.graph if isinstance(obj, HostGraphExec) else obj
        with self._lock:
            self._release(graph.memory)
        return (0,)

    def replay(self, exec_: HostGraphExec, launch: Callable[..., tuple[int]], copy: Callable[..., tuple[int]],
               memset: Callable[..., tuple[int]], graph: Callable[[HostGraphExec], tuple[int]]) -> tuple[int]:  # fmt: skip
        """Run the ops in order through the driver's own calls (on the stream 0, which never captures)."""
        for kind, args in exec_.graph.ops:
            if kind == "launch":
                fn, grid, block, shared, frame, _values = args
                result = launch(fn, *grid, *block, shared, 0, ctypes.addressof(frame), None)
            elif kind == "copy":
                result = copy(*args)
            elif kind == "memset":
                result = memset(*args)
            else:
                result = graph(*args)
            if result[0]:
                return result
        return (0,)

    def _hold(self, memory: set[int]) -> None:
        for ptr in memory:
            self._holders[ptr] = self._holders.get(ptr, 0) + 1

    def _release(self, memory: set[int]) -> None:
        for ptr in memory:
            left = self._holders.get(ptr, 0) - 1
            if left > 0:
                self._holders[ptr] = left
                continue
            self._holders.pop(ptr, None)
            if ptr in self._freed:
                self._freed.discard(ptr)
                self._free(ptr)
