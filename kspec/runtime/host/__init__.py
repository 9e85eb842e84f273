"""The CPU device's runtime: the part of the CUDA driver API kspec calls, answered on the host.

``_driver`` is the driver object the runtime gets on the CPU device (``kspec.use_device("cpu")``,
``KSPEC_DEVICE=cpu``): host memory, synchronous streams, modules from ``_module`` (shared objects the host
compiler built, loaded with ctypes), launches through ``_fault`` (a kernel's hardware fault said against its
arguments) and graph capture from ``_graph``. ``_checked`` is the checked mode (buffers against guard pages),
``_signals`` the fault guard every host module runs its kernels in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_getattr

if TYPE_CHECKING:  # the same names, typed for mypy (a module __getattr__ is Any to it); never run
    from ._checked import checked as checked, note as note, state as state
    from ._driver import HostDriver as HostDriver, host_driver as host_driver, worker_threads as worker_threads
    from ._graph import HostCapture as HostCapture, HostGraph as HostGraph, HostGraphExec as HostGraphExec
    from ._module import HostFunction as HostFunction, HostModule as HostModule


# Lazy exports: nothing here is loaded until asked for (kspec.runtime's __init__ asks for ``checked`` only).
_LAZY = {
    "checked": "_checked",
    # the checked mode's switch (a one-item list, read by every CPU-device launch) and the call that notes a
    # launch's NumPy arguments: the launch code kspec/runtime/_packer.py writes uses both
    "state": "_checked", "note": "_checked",
    "HostDriver": "_driver", "host_driver": "_driver", "worker_threads": "_driver",
    "HostModule": "_module", "HostFunction": "_module",
    "HostCapture": "_graph", "HostGraph": "_graph", "HostGraphExec": "_graph",
}


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


__all__ = [
    "HostCapture",
    "HostDriver",
    "HostFunction",
    "HostGraph",
    "HostGraphExec",
    "HostModule",
    "checked",
    "host_driver",
    "worker_threads",
]
