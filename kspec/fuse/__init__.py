"""kspec.fuse: a Python function of arrays traced into elementwise and reduction kernel specs.

``@kspec.fuse`` (also ``@kspec.fuse()``, ``@kspec.fuse(kernel_name='name')``, ``kspec.fuse(func)``) runs code
written for ``cupy.fuse``. The first call with a new signature (per argument: dtype and ndim, or the
scalar's type) runs the function once on symbolic values; what they record becomes one
:class:`kspec.spec.ElementwiseSpec` or :class:`kspec.spec.ReductionSpec` (a few, for functions CuPy refuses),
rendered, compiled, cached and launched by the same layers as any spec. ``f.spec(*args)`` shows it and can be
saved as a spec file; ``f.cuda_source(*args)`` shows the CUDA C++.

The package is also callable (``kspec.fuse(func)`` works whether ``kspec.fuse`` was reached as the function
or as this module), since Python binds a subpackage's name over the attribute of the same name once the
subpackage is imported.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from ._api import FusedFunction, fuse
from ._forms import ProgramForm, StepForm

__all__ = ["FusedFunction", "ProgramForm", "StepForm", "fuse"]


class _CallableModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return fuse(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
