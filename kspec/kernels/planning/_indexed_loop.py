"""The loop of an elementwise kernel whose body uses CuPy's n-d indexer (``Specialization.indexed``).

Such a body sees the loop's dims: ``_ind.get()`` is an element's index over them and ``_raw_y.shape()`` /
``.strides()`` are the operand's over them, so the loop must have the dims CuPy's kernel would have. CuPy keeps
every dim with ``reduce_dims=False``; with ``reduce_dims=True`` (the default) it reduces them before the launch
(``_reduce_dims`` in cupy/_core/_kernel.pyx), by these rules, which this module follows:

* a loop of at most one dim, or a kernel without parameters, keeps its dims;
* a kernel with exactly one parameter reduces it as ``ndarray.reduced_view()`` does: a C-contiguous array to one
  dim; otherwise extent-1 dims dropped and neighbours merged where the outer stride is the inner one times the
  inner extent, unless that leaves as many dims as before (then nothing changes, extent-1 dims included);
* with several parameters, only the non-raw array operands count (scalars and raw arrays do not): if every one
  is C-contiguous (a broadcast input is not) the loop is one dim; if one is not and the loop has two dims, the
  dims stay; otherwise extent-1 dims are dropped and neighbours merged where every operand that is not
  C-contiguous allows it (a C-contiguous one always does), unless that leaves as many dims as before.

Pure Python, no imports from the planner (which imports this).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Strides = tuple[int, ...]


def c_contiguous(shape: Sequence[int], strides: Sequence[int], itemsize: int) -> bool:
    """NumPy's C_CONTIGUOUS flag: strides of a C-order layout, ignoring extent-1 dims."""
    dense = itemsize
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1:
            if stride != dense:
                return False
            dense *= extent
    return True


def cupy_loop_dims(
    shape: tuple[int, ...],
    strides: Sequence[Strides],
    itemsizes: Sequence[int],
    *,
    reduce_dims: bool,
    one_parameter: bool,
) -> tuple[tuple[int, ...], list[Strides]]:
    """The loop's dims (C order) and each operand's byte strides over them, as CuPy's kernel would see them.

    ``strides``: each non-raw array operand's strides over ``shape`` (0 along broadcast dims), ``itemsizes``
    theirs; ``one_parameter``: the kernel has exactly one parameter (then it is the one operand, or a raw or
    scalar one and there are none). The loop's size is never 0 (nothing launches then).
    """
    ops = [tuple(s) for s in strides]
    if not reduce_dims or len(shape) <= 1 or not ops:
        return shape, ops
    if one_parameter:
        return _reduced_view(shape, ops[0], itemsizes[0])
    strided = [s for s, size in zip(ops, itemsizes) if not c_contiguous(shape, s, size)]
    if not strided:
        return (math.prod(shape),), [(size,) for size in itemsizes]
    if len(shape) == 2:
        return shape, ops
    groups = _merged_groups(shape, strided)
    if len(groups) == len(shape):
        return shape, ops
    return tuple(extent for extent, _ in groups), [tuple(s[axis] for _, axis in groups) for s in ops]


def _merged_groups(shape: tuple[int, ...], strided: Sequence[Strides]) -> list[tuple[int, int]]:
    """Extent-1 dims dropped and neighbours merged where every operand of ``strided`` allows it: for each merged
    dim, its extent and the innermost original dim of the group (whose stride it keeps)."""
    groups: list[tuple[int, int]] = []
    for axis, extent in enumerate(shape):
        if extent == 1:
            continue
        if groups and all(s[axis] * extent == s[groups[-1][1]] for s in strided):
            groups[-1] = (groups[-1][0] * extent, axis)
        else:
            groups.append((extent, axis))
    return groups


def _reduced_view(shape: tuple[int, ...], strides: Strides, itemsize: int) -> tuple[tuple[int, ...], list[Strides]]:
    if c_contiguous(shape, strides, itemsize):
        return (math.prod(shape),), [(itemsize,)]
    groups = _merged_groups(shape, [strides])
    if len(groups) == len(shape):
        return shape, [strides]
    return tuple(extent for extent, _ in groups), [tuple(strides[axis] for _, axis in groups)]
