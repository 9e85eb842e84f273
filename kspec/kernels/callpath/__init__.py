"""What runs on every call of a spec kernel: the signature read from the arguments (generated dispatchers, or
the compiled call path), the prepared call and its generated or native launch, parameter frames, scalar
packing, and the hand-off of calls traced or recorded by another framework.

A room of :mod:`kspec.kernels`: the rest of the layer uses it through the names below, each loading its module on
first access, so a process loads only what its calls use (one serving elementwise kernels never loads the reduction
planner); a room imports only the rooms below it (docs/architecture.md, "Rooms").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_getattr

if TYPE_CHECKING:  # what mypy reads (explicit re-exports); at run time each name loads its module on first access
    from ._call_path import CallPath as CallPath
    from ._frame import Frame as Frame
    from ._frameworks import refuse_traced as refuse_traced, run_by_torch as run_by_torch, traced_by as traced_by
    from ._launch_code import (
        RESULT_NONE as RESULT_NONE, RESULT_ONE as RESULT_ONE, RESULT_TUPLE as RESULT_TUPLE, Step as Step,
    )
    from ._prepared import CallLayout as CallLayout, PreparedCall as PreparedCall, sm_count as sm_count
    from ._scalars import scalar_bytes as scalar_bytes
    from ._signature import MISS as MISS

_LAZY = {
    "CallLayout": "_prepared",
    "CallPath": "_call_path",
    "Frame": "_frame",
    "MISS": "_signature",
    "PreparedCall": "_prepared",
    "RESULT_NONE": "_launch_code",
    "RESULT_ONE": "_launch_code",
    "RESULT_TUPLE": "_launch_code",
    "Step": "_launch_code",
    "run_by_torch": "_frameworks",
    "refuse_traced": "_frameworks",
    "scalar_bytes": "_scalars",
    "sm_count": "_prepared",
    "traced_by": "_frameworks",
}

__getattr__ = lazy_getattr(__name__, _LAZY, globals())

__all__ = sorted(_LAZY)
