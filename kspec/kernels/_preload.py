"""Load now what the first kernel call of a process would load: for ``kspec.cupy``'s switch, whose ``enable()`` is a
program's start, the point where CuPy does its own loading (CuPy's first kernel call then costs ~1 ms).

Without it the first call of a served process pays ~35 ms once (an H200 host, a fresh machine): the CUDA driver
bindings' import (16-18 ms), the templates' and renderer's digests (read and hashed where the memo is empty), the
compiled call path's lookup, the installed binary stores' discovery, whether call records can be kept (NVRTC's
version); and the first call of each kind (elementwise, reduction, raw) loads kspec's modules for it: about seventy
for the first elementwise call (binding, planning, the call path, call records, binary lookup: 15-20 ms on a 2-core
machine). Nothing here initialises CUDA, starts a thread or a child process (a program that forks after
``enable()`` keeps usable children) or compiles anything; a part that fails is left to the first call, which
reports it as it would have.
"""

from __future__ import annotations

import functools
import importlib

# What the first call of each kind of kernel loads, by the names it reaches them through (each package's own
# lazy names, so a module that moves is found where its package says)
_FIRST_CALLS = (
    ("kspec.kernels", ("ElementwiseKernel", "ReductionKernel", "RawModule")),
    ("kspec.kernels.planning", ("prepare_elementwise", "prepare_reduction")),
    ("kspec.kernels.callpath", ("CallPath", "PreparedCall")),
    ("kspec.kernels.binaries", ("loaded_kernel", "cached_function")),
    ("kspec.kernels.records", ("RecordedCalls", "specialization_of", "notify")),
    ("kspec.render", ("specialize", "module_interface")),
    ("kspec.spec", ("plain_from_fields", "variant_text")),
    ("kspec.compiler", ("compile_program", "cached_binary", "current_policy", "record_load", "environment_key",
                        "default_cache")),
    ("kspec.runtime", ("Launcher",)),
)
# ... and what a raw module's first call loads to find its binary in the compile cache: for a process with no
# binary store registered (with one, a deployment's, its raw modules come from the store and never load these)
_CACHE_HITS = (("kspec.compiler", ("compile_cached", "nvrtc_version")),)


def preload_call_path() -> None:
    """Import and look up, once, what every first kernel call needs: the driver bindings, the machinery of
    elementwise, reduction and raw kernels, the compiled call path from the cache, the installed binary stores.

    A generated module's import loads none of it (its first call would: ~20 ms on an H200 host): call this at a
    program's start where the first call must launch at once. It compiles nothing, initialises no CUDA context
    and starts no thread or process; a part that fails is left to the first call, which reports it."""
    from .. import runtime
    from .._resources import renderer_digest, templates_digest
    from .binaries import registered_binaries
    from .records import settle_availability

    runtime.import_driver_bindings()
    # the call path from the cache only: a cold cache builds it at the first call, as before
    cached_call_path = functools.partial(runtime.fastcall_module, build=False)
    steps = (templates_digest, renderer_digest, registered_binaries, cached_call_path, settle_availability,
             _first_call_modules)
    for step in steps:
        try:
            step()
        except Exception:  # noqa: BLE001  # the first call meets the same failure and reports it
            pass


def _first_call_modules() -> None:
    from .._lazy import settle_imports
    from .binaries import registered_binaries

    for package, names in _FIRST_CALLS if registered_binaries() else _FIRST_CALLS + _CACHE_HITS:
        module = importlib.import_module(package)
        for name in names:
            try:
                getattr(module, name)
            except Exception:  # noqa: BLE001  # the first call that needs it meets the failure and reports it
                pass
    settle_imports()  # the collection a first call would make over these imports' objects, made here
