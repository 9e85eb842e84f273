"""Call plans of ReductionKernel: reduced axes and merged layouts (the strategy that runs a plan is in
:mod:`kspec.kernels.planning._reduction_strategy`).

Pure Python and driver-free, like :mod:`kspec.kernels.planning._plan` (which holds the shared layout helpers and the
elementwise planner; see its docstring for the conventions). The non-raw inputs broadcast together;
``axis`` (None, int, tuple; negatives normalised) picks the reduced axes; kept axes stay in order, reduced
axes are ordered by stride (largest outer: which element is reduced first does not matter) and merged. Raw
inputs only when the reduced axes lead.
"""

from __future__ import annotations

import math
import re

from ..._named_tuple import NamedTuple
from ... import dtypes
from ..._errors import AxisError, KspecNotImplementedError, KspecValueError, about_kernel
from ...render import DYNAMIC_NDIM, MAX_NDIM, Specialization
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: plans serve plain specs too, without the Pydantic models
    from ...spec import ReductionSpec
from ._binding import Bound
from ._plan import (
    RawLayout,
    Specializer,
    as_int,
    broadcast_shape,
    broadcast_strides,
    c_strides,
    plan_outputs,
)
from ._loop_order import merge_dims


# -- reduction -------------------------------------------------------------------------------------------


def normalize_axis(kernel: str, axis: object, ndim: int) -> tuple[int, ...]:
    """``axis`` (None, an int, or a tuple/list of ints) -> sorted non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    items = list(axis) if isinstance(axis, (tuple, list)) else [axis]
    result = []
    for item in items:
        item = as_int(kernel, "axis", item, "None, an int or a tuple of ints")
        if not -ndim <= item < ndim:
            raise AxisError(f"axis {item} is out of bounds for array of dimension {ndim}: kernel '{kernel}'", axis=item, ndim=ndim)
        result.append(item % ndim if ndim else item)
    if len(set(result)) != len(result):
        raise KspecValueError(f"duplicate value in 'axis': kernel '{kernel}' got axis={axis!r}")
    return tuple(sorted(result))


INNER_MIN_ROW = 16  # the "inner" strategy needs an innermost reduced extent of at least this many elements
_ROW_NAMES = re.compile(r"\b(_J|_out_ind)\b")


def uses_row_names(map_expr: str) -> bool:
    """Whether ``map_expr`` reads the row index (_J) or the output count (_out_ind): a strategy whose pass 1
    runs over other rows than the call's (inner, slab, fold) would change them."""
    return _ROW_NAMES.search(map_expr) is not None


class ReductionPlan(NamedTuple):
    """Everything about a reduction call except pointer and scalar values and the strategy."""

    specialization: Specialization
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]  # as returned (keepdims applied)
    allocate: tuple[tuple[str, str], ...]
    out_size: int
    red_size: int
    kept: tuple[int, ...]  # kept extents, innermost first (merged)
    red: tuple[int, ...]  # reduced extents, innermost first (merged; (extent,) when rndim is 1)
    in_strides: dict[str, tuple[tuple[int, ...], tuple[int, ...]]]  # input -> (kept, reduced) strides
    out_strides: dict[str, tuple[int, ...]]  # output -> kept strides
    raw: dict[str, RawLayout]
    rndim: int  # 1: one reduced dim; 0 (DYNAMIC_NDIM): several
    contiguous_cols: bool  # the innermost kept dim is contiguous in every array input, the reduced dims outer
    inner_rows: bool = False  # several reduced dims, the innermost contiguous: two passes fit (see below)


def plan_reduction(
    spec: ReductionSpec,
    bound: Bound,
    specializer: Specializer,
    *,
    axis: object = None,
    keepdims: bool = False,
) -> ReductionPlan:
    kernel = spec.name
    inputs = [p for p in spec.in_params if not p.raw and p.name in bound.arrays]
    if not inputs:
        raise KspecValueError(
            about_kernel(kernel, "a reduction needs at least one non-raw array input (its shape is reduced)")
        )
    in_shape = broadcast_shape(kernel, [(p.name, bound.arrays[p.name].info.shape) for p in inputs])
    ndim = len(in_shape)
    reduced = normalize_axis(kernel, axis, ndim)
    kept_axes = [a for a in range(ndim) if a not in reduced]
    if any(p.raw for p in spec.params) and reduced != tuple(range(len(reduced))):
        raise KspecNotImplementedError(
            f"Illegal conditions: kernel '{kernel}': raw parameters need the reduced axes to be the leading ones (axis=0, (0, 1), "
            f"...), got axis={axis!r} on a {ndim}-d input"
        )
    kept_shape = tuple(in_shape[a] for a in kept_axes)
    out_shape = tuple(1 if a in reduced else in_shape[a] for a in range(ndim)) if keepdims else kept_shape
    allocate, raw = plan_outputs(
        spec, bound, out_shape, f"the reduction's output shape is {out_shape} (axis={axis!r}, keepdims={bool(keepdims)})"
    )
    specialization = specializer(bound)

    out_size = math.prod(kept_shape)
    red_size = math.prod(in_shape[a] for a in reduced)
    if red_size == 0 and out_size and spec.identity is None:
        raise KspecValueError(
            f"zero-size array to reduction operation {kernel} which has no identity: kernel '{kernel}' cannot "
            f"reduce an empty selection (input shape {in_shape}, axis={axis!r})"
        )

    # strides of every non-raw array operand: inputs over the input shape, outputs over the kept shape
    in_full = {p.name: broadcast_strides(in_shape, bound.arrays[p.name].info.shape, bound.arrays[p.name].info.strides) for p in inputs}
    outs: dict[str, tuple[int, ...]] = {}
    for p in spec.out_params:
        if p.raw:
            continue
        given = bound.arrays.get(p.name)
        itemsize = dtypes.BY_NAME[bound.dtypes[p.name]].itemsize
        if given is None:
            outs[p.name] = c_strides(kept_shape, itemsize)
        elif keepdims:
            outs[p.name] = tuple(given.info.strides[a] for a in kept_axes)
        else:
            outs[p.name] = given.info.strides
    in_names, out_names = list(in_full), list(outs)

    kept_ext, kept_str = merge_dims(
        kept_shape, [[in_full[n][a] for a in kept_axes] for n in in_names] + [list(outs[n]) for n in out_names]
    )
    if len(kept_ext) > MAX_NDIM:
        raise KspecValueError(about_kernel(kernel, f"{len(kept_ext)} kept dims after merging, more than {MAX_NDIM}"))
    # reduced axes ordered by the first input's stride, largest outer, then merged
    first = in_names[0]
    red_axes = sorted(reduced, key=lambda a: -abs(in_full[first][a]))
    red_ext, red_str = merge_dims([in_shape[a] for a in red_axes], [[in_full[n][a] for a in red_axes] for n in in_names])
    if red_size == 0 or not red_ext:
        red_ext, red_str = [red_size], [[0] for _ in in_names]
    rndim = 1 if len(red_ext) == 1 else DYNAMIC_NDIM
    if len(red_ext) > MAX_NDIM:
        raise KspecValueError(about_kernel(kernel, f"{len(red_ext)} reduced dims after merging, more than {MAX_NDIM}"))

    n_in = len(in_names)
    in_strides = {
        n: (tuple(reversed(kept_str[i])), tuple(reversed(red_str[i]))) for i, n in enumerate(in_names)
    }
    out_strides = {n: tuple(reversed(kept_str[n_in + j])) for j, n in enumerate(out_names)}
    # the innermost kept dim contiguous and every reduced dim outside it, in every input: the cols layout
    contiguous_cols = bool(kept_ext) and all(
        in_strides[n][0][0] == dtypes.BY_NAME[bound.dtypes[n]].itemsize
        and all(abs(r) > in_strides[n][0][0] for r in in_strides[n][1])
        for n in in_names
    )
    # Three or more reduced dims that do not merge, the innermost contiguous in every input and long enough
    # to be worth a pass of its own: reduction_strategy's "inner" strategy (two reduced dims run in one
    # pass: the templates split their index with a multiply-shift). Not when map_expr can see the row index
    # (_J) or the output count (_out_ind), which pass 1 would change, nor with raw parameters.
    inner_rows = (
        len(red_ext) > 2
        and red_size > 0
        and red_ext[-1] >= INNER_MIN_ROW
        and len(kept_ext) + len(red_ext) - 1 <= MAX_NDIM
        and not raw
        and not any(p.raw for p in spec.params)
        and not uses_row_names(spec.map_expr)
        and all(abs(red_str[i][-1]) == dtypes.BY_NAME[bound.dtypes[n]].itemsize for i, n in enumerate(in_names))
    )
    return ReductionPlan(
        specialization,
        in_shape,
        out_shape,
        allocate,
        out_size,
        red_size,
        tuple(reversed(kept_ext)),
        tuple(reversed(red_ext)),
        in_strides,
        out_strides,
        raw,
        rndim,
        contiguous_cols,
        inner_rows,
    )

