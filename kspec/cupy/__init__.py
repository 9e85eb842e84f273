"""kspec.cupy: kspec under code written for CuPy, unchanged -- third-party libraries, CuPy's own Python code.

``kspec.cupy.enable()`` rebinds CuPy's user-kernel entry points to kspec's in this process: ``ElementwiseKernel``,
``ReductionKernel``, ``RawKernel``, ``RawModule`` and ``fuse`` (as ``cupy.X`` and ``cupy._core.X``, where CuPy's
Python code such as cupyx.scipy looks them up) and ``cupyx.jit``'s decorator and builtins, together with every
binding of them that an already imported Python module made (``from cupy import RawKernel``). Kernels built from
then on are kspec's (``isinstance(k, cupy.ElementwiseKernel)`` holds: the name is kspec's class), compiled by
NVRTC through kspec's cache and served precompiled where a build has them. ``disable()`` puts back what
``enable()`` changed; ``with kspec.cupy.enabled():`` does both. For a program or a test run you cannot edit,
``python -m kspec.cupy script.py ARGS`` / ``python -m kspec.cupy -m pytest ARGS`` swap as soon as CuPy is
imported, in the program and in the Python processes it starts (``KSPEC_CUPY=1``).

What stays CuPy's: kernels CuPy builds in its compiled (Cython) code -- its ufuncs, reductions and routines such
as ``cupy.sum`` or ``cupy.sort`` -- and CUB, cuBLAS, cuFFT, cuSPARSE calls. docs/guide/drop-in.md has the list.

CuPy is imported by ``enable()``, never by ``import kspec``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ._hook import STARTUP_DIR, launch_environment, watch_jit
from ._hook import install as swap_on_import
from ._swap import CONSTRUCTORS, disable, is_enabled
from ._swap import enable as _enable

__all__ = ["CONSTRUCTORS", "STARTUP_DIR", "disable", "enable", "enabled", "is_enabled", "launch_environment",
           "swap_on_import"]


def enable() -> None:
    """Serve CuPy's kernel constructors, ``cupy.fuse`` and ``cupyx.jit`` from kspec in this process (CuPy is
    imported here; ``cupyx`` is not: where ``cupyx.jit`` is not imported yet, its names are swapped as soon as a
    program imports it)."""
    _enable()
    watch_jit()


@contextmanager
def enabled() -> Iterator[None]:
    """``with kspec.cupy.enabled():`` -- CuPy's constructors are kspec's inside the block (and as they were after
    it: a block inside an enabled process leaves it enabled)."""
    was = is_enabled()
    enable()
    try:
        yield
    finally:
        if not was:
            disable()
