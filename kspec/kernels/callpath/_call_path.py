"""The call path of a spec kernel (elementwise, reduction, and through them fused functions).

One way through, data going one way::

    kernel(*args)  ->  dispatch: read the signature, look it up  --hit-->  prepared.launch(...)
                          | miss                                              ^
                          v                                                   |
                       miss(): plan (the kernel's planner)  ->  keep it under the signature

A call reads its arguments once into a signature (:mod:`._signature`: a dispatcher generated per tuple of
argument types), finds the prepared call kept for it and launches it. A miss goes to the planner
(:mod:`..planning._planner`), which builds the prepared call and returns it here; this module keeps it and launches
it through the same :attr:`PreparedCall.launch` a repeated call runs. A call that cannot be planned because
another framework traces its arguments (JAX's tracers under ``jax.jit``) goes to that framework's adapter
instead (:mod:`._frameworks`): found only after the planner failed, so no call that plans pays for it. So does
an eager call on that framework's concrete arrays alone (JAX arrays: one cached XLA dispatch, where a launch on
their memory costs a DLPack round trip), found on a miss, which such calls always take, and a call whose
gradients a framework records (PyTorch tensors that require grad, under grad mode: the dispatchers send those
to the miss too).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..._lazy import imports_settled, settle_imports
from ...runtime import current_stream, initialized_device_count, open_stream_blocks
from ._signature import MAX_ENTRIES, MISS, Dispatcher, make_dispatcher
from ._frameworks import Framework, concrete_by, run_by_torch, traced_by
from ._prepared import PreparedCall

Planner = Callable[[tuple[Any, ...], object, Any], tuple[PreparedCall, tuple[int, ...]]]
# (argument types, table key, stream) -> the prepared call a call record holds, or None (kspec/kernels/records/_call_store.py)
Recall = Callable[[tuple[type, ...], tuple[Any, ...], object], "PreparedCall | None"]
# (argument types, table key, prepared call): a planned call, for the next process's records
Remember = Callable[[tuple[type, ...], tuple[Any, ...], PreparedCall], None]
# (framework, args, stream, extra, concrete) -> result; for concrete arrays (not tracers) it may return MISS: the
# call then launches as any other (outputs given, say)
HandOff = Callable[[Framework, tuple[Any, ...], object, Any, bool], Any]


def _nothing_prepared(args: tuple[Any, ...], stream: object = None, extra: object = None) -> Any:
    return MISS


class CallPath:
    """One kernel's prepared calls, by argument types and signature.

    ``call(args, stream=None, extra=None)`` is the dispatcher of the latest argument types: a prepared call's
    result, or :data:`MISS`; then :meth:`miss` plans. ``extra`` holds the call's keyword values (hashable);
    :meth:`once` plans and launches a call that cannot be keyed (keyword values that are not plain).
    ``hand_off`` runs a call on another framework's tracers through that framework's adapter."""

    def __init__(self, planner: Planner, hand_off: HandOff | None = None,
                 records: tuple[Recall, Remember] | None = None) -> None:  # fmt: skip
        self._plan = planner
        self._hand_off = hand_off
        self._records = records  # a signature's prepared call from an earlier process, before planning it
        self._by_types: dict[tuple[type, ...], Dispatcher | None] = {}
        self._handed: dict[tuple[type, ...], Framework | None] = {}  # argument types -> their framework, if any
        self.call: Callable[..., Any] = _nothing_prepared

    def miss(self, args: tuple[Any, ...], stream: object, extra: Any) -> Any:
        """A call the dispatcher did not serve: find or plan its prepared call, keep it, launch it."""
        if not imports_settled[0]:  # the process's first call: its lazy imports are done (kspec/_lazy.py)
            settle_imports()
        recorded = self._recorded(args, stream, extra)
        if recorded is not MISS:
            return recorded
        given = stream  # as the call gave it: what a signature holds (a call without arrays keys its type)
        types = tuple(map(type, args))
        if self._hand_off is not None and stream is None and not open_stream_blocks[0]:
            framework = self._handed.get(types, MISS)
            if framework is MISS:
                if len(self._handed) >= MAX_ENTRIES:
                    self._handed.clear()
                framework = self._handed[types] = concrete_by(args)
            if framework is not None:  # JAX arrays: the call runs as kspec.jax.call (kspec/kernels/callpath/_frameworks.py)
                result = self._hand_off(framework, args, None, extra, True)
                if result is not MISS:
                    return result
        if stream is None and open_stream_blocks[0]:  # inside `with kspec.Stream(...)`
            stream = current_stream()
        dispatcher = self._by_types.get(types)
        read = dispatcher.read(args, given) if dispatcher is not None else None
        prepared = None if read is None else dispatcher.table.get((extra, *read[0]))  # type: ignore[union-attr]
        planned = prepared is None
        if prepared is None and self._records is not None and initialized_device_count() == 1:
            if types not in self._by_types:
                dispatcher = self._dispatcher(types)
                read = dispatcher.read(args, given) if dispatcher is not None else None
            if read is not None:
                prepared = self._records[0](types, (extra, *read[0]), stream)
                if prepared is not None:  # recorded: nothing bound or planned (binding orders CAI producers below)
                    self._keep(dispatcher, read, extra, prepared)
                    planned = False
        if prepared is None:
            found = self._planned(args, stream, extra)
            if isinstance(found, Framework):
                return self._hand_off(found, args, stream, extra, False)  # type: ignore[misc]
            prepared, pointers = found
            if types not in self._by_types:  # made once the driver is up (it knows the device count)
                dispatcher = self._dispatcher(types)
                read = dispatcher.read(args, given) if dispatcher is not None else None
            if dispatcher is None or read is None:  # arguments no signature describes: planned every call
                return prepared.launch(args, stream, *pointers)
            self._keep(dispatcher, read, extra, prepared)
            if self._records is not None:
                self._records[1](types, (extra, *read[0]), prepared)
        assert dispatcher is not None and read is not None
        self.call = dispatcher.dispatch
        keys, pointers, producers = read
        if producers and not planned:  # binding ordered the CAI producers of a planned call
            prepared.order_producers(producers, stream)
        return prepared.launch(args, stream, *pointers)

    def _recorded(self, args: tuple[Any, ...], stream: object, extra: Any) -> Any:
        """The call as kspec.torch runs it (tensors that require grad: autograd records it; CPU tensors on the CPU
        device), or MISS."""
        if self._hand_off is not None:
            recorder = run_by_torch(args)
            if recorder is not None:
                return self._hand_off(recorder, args, stream, extra, False)
        return MISS

    def _dispatcher(self, types: tuple[type, ...]) -> Dispatcher | None:
        """The dispatcher of an argument-type tuple, made and kept (None: no signature describes them)."""
        if len(self._by_types) >= MAX_ENTRIES:
            self._by_types.clear()
        made = self._by_types[types] = make_dispatcher(types, initialized_device_count() > 1, open_stream_blocks,
                                                       current_stream)  # fmt: skip
        return made

    @staticmethod
    def _keep(dispatcher: Dispatcher | None, read: Any, extra: Any, prepared: PreparedCall) -> None:
        assert dispatcher is not None
        table = dispatcher.table
        if len(table) >= MAX_ENTRIES:  # a program cycling through many shapes: start over (still correct)
            table.clear()
        table[(extra, *read[0])] = prepared

    def once(self, args: tuple[Any, ...], stream: object, extra: Any) -> Any:
        """Plan and launch a call whose keyword values cannot be part of a signature."""
        recorded = self._recorded(args, stream, extra)
        if recorded is not MISS:
            return recorded
        if stream is None and open_stream_blocks[0]:
            stream = current_stream()
        found = self._planned(args, stream, extra)
        if isinstance(found, Framework):
            return self._hand_off(found, args, stream, extra, False)  # type: ignore[misc]
        prepared, pointers = found
        return prepared.launch(args, stream, *pointers)

    def _planned(self, args: tuple[Any, ...], stream: object, extra: Any) -> tuple[PreparedCall, tuple[int, ...]] | Framework:
        """The planner's prepared call and pointers (every check, every error); when planning failed on another
        framework's tracers (they have no memory to launch on), that framework, whose adapter runs the call."""
        try:
            return self._plan(args, stream, extra)
        except Exception:
            framework = traced_by(args) if self._hand_off is not None else None
            if framework is None:
                raise
        return framework

    def prepared_calls(self) -> list[PreparedCall]:
        """The prepared calls kept, oldest argument types first (for inspection)."""
        return [p for d in self._by_types.values() if d is not None for p in d.table.values()]

    def __len__(self) -> int:
        return len(self.prepared_calls())
