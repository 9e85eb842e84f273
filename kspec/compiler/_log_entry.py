"""One entry of the compile log (its own module: a dataclass is defined only when the log is read)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CompileEvent:
    """One kernel load of this process (:func:`kspec.compile_log`).

    ``source``: ``'binary'`` (a precompiled binary: a ``kspec build`` output, a wheel's binaries, a file),
    ``'cache'`` (a binary-cache hit) or ``'compiled'``. ``ms``: what the load took (reading and loading a
    binary; the cache lookup; rendering, compiling and caching). ``reason``, for ``'compiled'`` only:
    ``'no binary for this arch'`` (the kernel has binaries, none for this architecture), ``'new
    specialization'`` (no binary, no cache entry) or ``'stale cache entry'`` (an entry was there but
    unreadable or damaged); ``''`` otherwise.
    """

    kernel: str
    what: str  # the specialization: placeholder types, scalar inputs, the variant / name expression
    arch: str  # sm_XX, or 'host' for the CPU device
    source: str
    ms: float
    reason: str = ""
