"""Observers of what kernels build: how a front end such as ``kspec capture`` learns of every kernel a program
constructs and every specialization its calls compile or load, without a branch in the callers.

The kernels notify here at six points, each once per thing (never per call): a constructor call that builds
a kernel (not one that adopts an identical earlier call's), a specialization of an elementwise or reduction spec
made for the first time in the process, a launch variant of one loaded on its own, a raw module loaded for the
first time, a function looked up in one (once per kernel object), and a raw module that failed to compile. With
no observer (the normal case) each point costs one truthiness test of a list.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol


class BuildObserver(Protocol):
    """What an observer implements; kspec calls it on the thread that built or called the kernel."""

    def constructed(self, token: object) -> None:
        """A constructor call built a kernel; ``token`` identifies it in a later notification (its spec's digest
        for an elementwise or reduction kernel, the raw module's build object for a raw one)."""

    def specialized(self, spec: Any, spec_key: str, types: dict[str, str], scalars: frozenset[str],
                    raw_layouts: tuple[tuple[str, tuple[int, bool]], ...], key: str) -> None:  # fmt: skip
        """A spec was specialized for the first time (a call is about to compile or load it); ``key``: the
        specialization's content key, which :meth:`variant_loaded` names it by."""

    def variant_loaded(self, key: str, variant: str) -> None:
        """A launch variant (``entry/index/ndim/vec``) of the specialization ``key`` was loaded on its own: a
        call launches it."""

    def raw_function(self, build: Any, name: str) -> None:
        """A function of a raw module was looked up by ``name`` (a kernel name or name expression)."""

    def raw_loaded(self, build: Any) -> None:
        """A raw module of source code was loaded for the first time: ``build`` has ``code``, ``options``,
        ``name_expressions``, ``translate_cucomplex``, ``backend`` and ``label``."""

    def raw_failed(self, build: Any, name: str) -> None:
        """A raw module of source code failed to compile when its function ``name`` was looked up (the
        CompileError is raised to the caller next, which may fall back on other code)."""


_lock = threading.Lock()
observers: list[BuildObserver] = []  # read by the notifying modules: `if observers:` costs nothing more


def observe_builds(observer: BuildObserver) -> Callable[[], None]:
    """Notify ``observer`` of what kernels build from now on; returns the function that stops it."""
    with _lock:
        observers.append(observer)
    from ..binaries import on_variant_loaded

    on_variant_loaded(_variant_loaded)  # once per process: the binaries room tells of variants from then on

    def stop() -> None:
        with _lock:
            if observer in observers:
                observers.remove(observer)

    return stop


def notify(event: str, *args: Any) -> None:
    """Call ``event`` on every observer (an observer's exception propagates: a capture must not lose records)."""
    for observer in list(observers):
        getattr(observer, event)(*args)


def _variant_loaded(key: str, variant: str) -> None:
    if observers:
        notify("variant_loaded", key, variant)
