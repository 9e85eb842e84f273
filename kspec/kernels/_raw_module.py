"""The module ``kspec.kernels`` loads ``RawModule`` and ``DeviceGlobal`` from (its lazy export table names it).

RawModule is defined in :mod:`._raw`, next to RawKernel: each makes the other, and one module holding both
keeps the imports one way (``_raw_module`` -> ``_raw`` -> ``_raw_code``, ``_raw_attributes``).
``_rebuild_module`` stays importable here: pickles of a RawModule made before the move name it here.
"""

from __future__ import annotations

from ..runtime import DeviceGlobal
from ._raw import RawModule, _rebuild_module

__all__ = ["DeviceGlobal", "RawModule", "_rebuild_module"]
