"""What is remembered of calls and constructions: call records kept on disk between processes and restored,
memos of identical constructor calls and of specializations, and the observers told of every build.

A room of :mod:`kspec.kernels`: the rest of the layer uses it through the names below, each loading its module on
first access, so a process loads only what its calls use (one serving elementwise kernels never loads the reduction
planner); a room imports only the rooms below it (docs/architecture.md, "Rooms").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_getattr

if TYPE_CHECKING:  # what mypy reads (explicit re-exports); at run time each name loads its module on first access
    from ._constructor_memo import (
        RAW_MODULES as RAW_MODULES, SPEC_KERNELS as SPEC_KERNELS, UNKEYED as UNKEYED,
        clear_constructor_memos as clear_constructor_memos,
    )
    from ._call_store import settle_availability as settle_availability
    from ._kernel_records import RecordedCalls as RecordedCalls, spec_digest as spec_digest
    from ._observers import (
        BuildObserver as BuildObserver, notify as notify, observe_builds as observe_builds, observers as observers,
    )
    from ._specialization_memo import raw_layouts_of as raw_layouts_of, specialization_of as specialization_of

_LAZY = {
    "BuildObserver": "_observers",
    "RAW_MODULES": "_constructor_memo",
    "RecordedCalls": "_kernel_records",
    "SPEC_KERNELS": "_constructor_memo",
    "UNKEYED": "_constructor_memo",
    "clear_constructor_memos": "_constructor_memo",
    "notify": "_observers",
    "observe_builds": "_observers",
    "observers": "_observers",
    "raw_layouts_of": "_specialization_memo",
    "settle_availability": "_call_store",
    "spec_digest": "_kernel_records",
    "specialization_of": "_specialization_memo",
}

__getattr__ = lazy_getattr(__name__, _LAZY, globals())

__all__ = sorted(_LAZY)
