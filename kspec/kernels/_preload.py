"""Load now what the first kernel call of a process would load: for ``kspec.cupy``'s switch, whose ``enable()`` is a
program's start, the point where CuPy does its own loading (CuPy's first kernel call then costs ~1 ms).

Without it the first call of a served process pays ~35 ms once (an H200 host, a fresh machine): the CUDA driver
bindings' import (16-18 ms), the templates' and renderer's digests (read and hashed where the memo is empty), the
compiled call path's lookup, the installed binary stores' discovery. Nothing here initialises CUDA, starts a
thread or a child process (a program that forks after ``enable()`` keeps usable children) or compiles anything;
a part that fails is left to the first call, which reports it as it would have.
"""

from __future__ import annotations

import functools


def preload_call_path() -> None:
    """Import and look up, once, what every first kernel call needs (see the module docstring)."""
    from .. import runtime
    from .._resources import renderer_digest, templates_digest
    from .binaries import registered_binaries

    runtime.import_driver_bindings()
    # the call path from the cache only: a cold cache builds it at the first call, as before
    cached_call_path = functools.partial(runtime.fastcall_module, build=False)
    for step in (templates_digest, renderer_digest, registered_binaries, cached_call_path):
        try:
            step()
        except Exception:  # noqa: BLE001  # the first call meets the same failure and reports it
            pass

