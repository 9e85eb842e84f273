"""The kernels benchmarks/kernels/bench.py times: one definition each, built by kspec and by CuPy with the same arguments.

Each pair is built once, on first use, so that ``--only`` builds only what it runs. cupy and kspec are
imported there too (``--help`` and ``--list`` need neither).
"""

from __future__ import annotations

import sys
import tempfile
from typing import Any

from _settings import REPO

ELEMENTWISE_DEFS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "sqd": (("T x, T y", "T z", "z = (x - y) * (x - y)", "sqd"), {}),
    "fma3": (("T a, T b, T c", "T w", "w = a * b + c", "fma3"), {}),
    "axpy": (("float32 a, T x, T y", "T z", "z = a * x + y", "axpy"), {}),
    # the host-cost kernel: concrete types, no placeholder
    "sqd32": (("float32 x, float32 y", "float32 z", "z = (x - y) * (x - y)", "sqd32"), {}),
}
REDUCTION_DEFS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "ssq": (("T x", "T y", "x * x", "a + b", "y = a", "0", "ssq"), {}),
    "l2norm": (("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2norm"), {}),
    # float16 input, float32 accumulation and output
    "ssq16": (("T x", "float32 y", "float(x) * float(x)", "a + b", "y = a", "0", "ssq16"), {"reduce_type": "float"}),
}

_pairs: dict[str, tuple[Any, Any]] = {}  # name -> (kspec kernel, CuPy kernel)
_fused: dict[str, tuple[Any, Any]] = {}  # name -> (kspec.fuse, cupy.fuse) of the same function
_jit: dict[str, Any] = {}  # "kspec" / "cupyx" -> the module of benchmarks/helpers/_jit_kernels.py for that library


def kernel_pair(name: str) -> tuple[Any, Any]:
    """(kspec kernel, CuPy kernel) of ELEMENTWISE_DEFS or REDUCTION_DEFS ``name``."""
    if name not in _pairs:
        import cupy as cp

        import kspec

        if name in ELEMENTWISE_DEFS:
            args, kwargs = ELEMENTWISE_DEFS[name]
            _pairs[name] = (kspec.ElementwiseKernel(*args, **kwargs), cp.ElementwiseKernel(*args, **kwargs))
        else:
            args, kwargs = REDUCTION_DEFS[name]
            _pairs[name] = (kspec.ReductionKernel(*args, **kwargs), cp.ReductionKernel(*args, **kwargs))
    return _pairs[name]


def fused_pair(name: str) -> tuple[Any, Any]:
    """The same Python function under ``kspec.fuse`` and ``cupy.fuse`` (built once)."""
    if name not in _fused:
        import cupy as cp

        import kspec

        fns = {
            "sqd": lambda x, y: (x - y) ** 2,
            "ssq_rows": lambda x, y: cp.sum((x - y) ** 2, axis=1),
        }
        fn = fns[name]
        _fused[name] = (kspec.fuse(kernel_name=f"bench_{name}")(fn), cp.fuse(kernel_name=f"bench_{name}")(fn))
    return _fused[name]


def jit_kernels(lib: str) -> Any:
    """benchmarks/helpers/_jit_kernels.py's kernels under ``lib``'s jit ("kspec" or "cupyx")."""
    if lib not in _jit:
        if str(REPO / "benchmarks" / "helpers") not in sys.path:
            sys.path.insert(0, str(REPO / "benchmarks" / "helpers"))
        import _jit_kernels

        _jit[lib] = _jit_kernels.load(lib, tempfile.mkdtemp(prefix="kspec-bench-jit-"))
    return _jit[lib]
