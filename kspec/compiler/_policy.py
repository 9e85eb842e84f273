"""The compile policy: whether a kernel may compile at run time (``KSPEC_COMPILE=never|warn|allow``).

A production process that must not stall on NVRTC (or the host compiler) sets ``never``: a call whose
specialization has no precompiled binary and no binary-cache entry then raises
:class:`kspec.CompileForbiddenError` before anything is rendered or compiled. ``warn`` gives one
:class:`kspec.CompileWarning` per specialization (per cache key) and compiles. ``allow`` (the default) compiles.

The check is made in one place, :func:`kspec.compiler.compile_cached`, where the binary cache has missed. It
applies only to compiles a kernel makes on its own (the caller passes a :class:`CompileRequest`); explicit
compiles are always allowed: ``kspec build``, the hatch hook, ``compile_*`` called directly, and the kernels'
``compile()`` methods (which run inside :func:`explicit_compiles`).

The setting is process-wide (``compile_policy`` changes it for every thread); the explicit-compile flag is
per thread. A leaf module: the serving path may import it (it imports nothing heavy).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from .._named_tuple import NamedTuple
from .._errors import CompileForbiddenError, CompileWarning, KspecValueError

POLICY_ENV = "KSPEC_COMPILE"
POLICIES = ("never", "warn", "allow")

_ENV_VALUE = os.environ.get(POLICY_ENV)  # read at import; checked on first use (a miss, or compile_policy())
_lock = threading.Lock()
_set_mode: str | None = None  # set by compile_policy(); None: the variable's value (or "allow")
_warned: set[str] = set()  # cache keys already warned about under "warn"
_WARNED_MAX = 100_000  # a bound: a process making this many specializations is warned afresh after it
_explicit = threading.local()


class CompileRequest(NamedTuple):
    """What a kernel that compiles on its own tells ``compile_cached``: for the compile log and the policy's
    messages. ``advice(arch)`` says what would have produced the binary (made only when a message needs it)."""

    kernel: str  # the kernel's (or module's) name
    what: str  # the specialization: placeholder types, scalar inputs, the variant / name expression
    has_binaries: bool = False  # the kernel has precompiled binaries, for other architectures
    advice: Callable[[str], str] | None = None


def default_advice(arch: str) -> str:
    """What produces the binary of a kernel that is not a spec kernel (a raw or jit kernel)."""
    return (f"call it once with KSPEC_COMPILE=allow (the binary cache then serves it), or build it ahead "
            f"(kspec build <spec file> --arch {arch})")


def _env_mode() -> str:
    value = (_ENV_VALUE or "allow").strip().lower()
    if value not in POLICIES:
        raise KspecValueError(
            f"{POLICY_ENV}: expected one of {', '.join(POLICIES)} (default allow), got {_ENV_VALUE!r}"
        )
    return value


def current_policy() -> str:
    """The policy in force: the last ``compile_policy(mode)``, else ``KSPEC_COMPILE``, else ``'allow'``."""
    mode = _set_mode
    return mode if mode is not None else _env_mode()


def _where() -> str:
    mode = current_policy()
    return f"kspec.compile_policy({mode!r})" if _set_mode is not None else f"{POLICY_ENV}={mode}"


class compile_policy(str):  # noqa: N801 - used as a function: `kspec.compile_policy("never")`
    """Set the compile policy for this process and return the previous one (a str: ``'never'``, ``'warn'``
    or ``'allow'``); ``compile_policy()`` only returns the current one.

    Also a context manager that puts the previous policy back on exit::

        with kspec.compile_policy("never"):
            serve()

    Process-wide: the setting applies to every thread, and nested or concurrent ``with`` blocks restore in
    the order they exit.
    """

    _restore: str | None

    def __new__(cls, mode: str | None = None) -> "compile_policy":
        global _set_mode
        with _lock:
            previous_setting = _set_mode
            previous = current_policy()
            if mode is not None:
                if not isinstance(mode, str) or mode.strip().lower() not in POLICIES:
                    raise KspecValueError(f"mode: expected one of {', '.join(POLICIES)}, got {mode!r}")
                _set_mode = mode.strip().lower()
        self = super().__new__(cls, previous)
        self._restore = previous_setting
        return self

    def __enter__(self) -> str:
        return str(self)

    def __exit__(self, *exc: object) -> None:
        global _set_mode
        with _lock:
            _set_mode = self._restore


class explicit_compiles:  # noqa: N801 - a context manager, named for what it makes of the compiles inside it
    """Inside it, this thread's compiles are explicit (a ``compile()`` method): the policy allows them."""

    def __enter__(self) -> None:
        _explicit.depth = getattr(_explicit, "depth", 0) + 1

    def __exit__(self, *exc: object) -> None:
        _explicit.depth -= 1


def is_explicit() -> bool:
    return getattr(_explicit, "depth", 0) > 0


def check_compile(request: CompileRequest, arch: str, key: str, reason: str) -> None:
    """Before a run-time compile of ``request`` for ``arch`` (the binary cache missed under ``key``): raise
    under ``never``, warn once per key under ``warn``; nothing for an explicit compile."""
    if is_explicit():
        return
    mode = current_policy()
    if mode == "allow":
        return
    arch_label = "host (the CPU device)" if arch == "host" else arch
    advice = (request.advice or default_advice)(arch)
    about = f"kernel {request.kernel!r} ({request.what}) for {arch_label}"
    if mode == "never":
        raise CompileForbiddenError(
            f"{about} would compile at run time ({reason}: no precompiled binary and no binary-cache entry), "
            f"and the compile policy forbids that ({_where()}); to produce it: {advice}",
            kernel=request.kernel,
        )
    with _lock:
        if key in _warned:
            return
        if len(_warned) >= _WARNED_MAX:
            _warned.clear()
        _warned.add(key)
    import warnings

    warnings.warn(f"{about} compiles at run time ({reason}; {_where()}); to serve it without compiling: {advice}",
                  CompileWarning, stacklevel=_stacklevel())


def _stacklevel() -> int:
    """The frame of the first caller outside kspec (the user's call that compiles)."""
    import sys

    frame: Any = sys._getframe(1)
    level = 1
    while frame is not None and (frame.f_globals.get("__name__") or "").startswith("kspec."):
        frame = frame.f_back
        level += 1
    return level
