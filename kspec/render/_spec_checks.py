"""Checks of what specialize() is given against the spec: scalar inputs, raw layouts, reduction code.

Raw layouts: each raw array parameter's rank and C-contiguity, which a specialization may fix. The CuPy-style
constructors' kernels are specialized on them, as CuPy compiles ``CArray<T, ndim, c_contiguous>`` per call signature; the kernel then sees such a parameter as ``kspec::RankedView`` (templates/include/kspec/
array.cuh), whose flat index needs no runtime-rank loop. Spec files never fix them: one module serves every raw
layout, so that a wheel's precompiled binaries serve every call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._errors import KspecNotImplementedError, KspecTypeError, KspecValueError, about_kernel
from ._analysis import reduction_indexer_names
from ._variants import MAX_NDIM

if TYPE_CHECKING:
    from ..spec import ElementwiseSpec, ReductionSpec
else:
    ElementwiseSpec = ReductionSpec = Any


def check_raw_layouts(spec: ElementwiseSpec | ReductionSpec, raw_layouts: Mapping[str, tuple[int, bool]],
                       scalars: frozenset[str]) -> dict[str, tuple[int, bool]]:  # fmt: skip
    """``raw_layouts`` as a plain dict in parameter order, each name a raw array parameter and each layout an
    (ndim, c_contiguous) pair kspec can address; a KspecValueError / KspecTypeError naming the entry otherwise."""
    if not isinstance(raw_layouts, Mapping):
        raise KspecTypeError(about_kernel(spec.name, f"raw_layouts: expected a mapping of raw parameter to (ndim, c_contiguous), got {type(raw_layouts).__name__}"))
    raw = [p.name for p in spec.params if p.raw and p.name not in scalars]
    for name, layout in raw_layouts.items():
        if name not in raw:
            raise KspecValueError(about_kernel(spec.name, f"raw_layouts: {name!r} is not a raw array parameter (those: {', '.join(raw) or 'none'})"))
        ok = isinstance(layout, tuple) and len(layout) == 2 and type(layout[0]) is int and isinstance(layout[1], bool)
        if not ok or not 0 <= layout[0] <= MAX_NDIM:
            raise KspecValueError(about_kernel(spec.name, f"raw_layouts[{name!r}]: expected (ndim, c_contiguous) with 0 <= ndim <= {MAX_NDIM}, got {layout!r}"))
    return {name: raw_layouts[name] for name in raw if name in raw_layouts}


def check_scalars(spec: ElementwiseSpec | ReductionSpec, scalars: frozenset[str]) -> None:
    """Only inputs are passed by value. A raw input may be: it is then a plain value of its type, as CuPy
    passes a scalar given for a raw parameter (the kernels' typed path refuses that call before it gets here)."""
    inputs = {p.name for p in spec.in_params}
    for name in sorted(scalars):
        if name not in inputs:
            where = "an output" if any(p.name == name for p in spec.out_params) else "not a parameter"
            raise KspecValueError(about_kernel(spec.name, f"scalars: {name!r} is {where}; only inputs can be scalars"))


def refuse_reduction_indexer(spec: ReductionSpec, arrays: list[str]) -> None:
    """A clear error, before NVRTC's, for reduction code that uses what kspec's reductions do not provide."""
    texts = [spec.map_expr, spec.reduce_expr, spec.post_map_expr]
    names = reduction_indexer_names(texts, arrays)
    if names:
        raise KspecNotImplementedError(about_kernel(
            spec.name,
            f"{', '.join(names)} of CuPy's reduction indexer is not provided in a ReductionKernel's code (kspec "
            "orders and merges a reduction's dims its own way; _in_ind.size(), _out_ind.size() and _J are "
            "provided): pass the array again as a raw parameter and index that",
        ))  # fmt: skip
