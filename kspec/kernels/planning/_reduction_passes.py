"""The passes of a ReductionKernel call's strategy (:mod:`._reduction_strategy` and :mod:`._reduction_slab`
choose them): launches, their shapes, and the split's second pass. Pure Python and driver-free."""

from __future__ import annotations


from ..._named_tuple import NamedTuple
from ...render import FINAL_OWN_CHUNKS, FINAL_OWN_OUTPUTS, VariantKey
from ._plan import MAX_GRID
from ._reduction_plan import ReductionPlan


class PassShape(NamedTuple):
    """The iteration shape of a pass that differs from its plan's (pass 1 of the "inner" strategy): the
    ReductionPlan fields of the same names, innermost first."""

    out_size: int
    red_size: int
    kept: tuple[int, ...]
    red: tuple[int, ...]
    in_strides: dict[str, tuple[tuple[int, ...], tuple[int, ...]]]
    out_strides: dict[str, tuple[int, ...]]


REDUCE_UNROLL = 4  # loads a lane issues before using them (KSPEC_REDUCE_UNROLL of reduce.cuh)
WARPS_PER_SM = 64  # resident warps per SM on sm_80..sm_90 (2048 threads): what the cols grid aims to fill


class Pass(NamedTuple):
    """One kernel launch of a reduction."""

    variant: VariantKey
    grid: int
    block: int
    group: int = 0  # rows: lanes per segment
    nchunks: int = 1
    chunk: int = 0  # rows / split_final: elements per segment (the row length when nchunks is 1)
    shape: PassShape | None = None  # None: the plan's shape
    dependent: bool = False  # launched as a programmatic dependent of the pass before (its entry waits for it)


class Strategy(NamedTuple):
    """How a reduction runs: one or two passes, and the workspace the split needs (in reduce items)."""

    passes: tuple[Pass, ...]
    workspace_items: int = 0
    kind: str = "rows"  # "rows", "cols", "cols split", "split", "inner", "fold", "slab", "slab split", or "none"


FINAL_GROUP_MAX = 32  # partials per output that split_final merges with a group of lanes (else a whole block)


def final_group(nchunks: int, out_size: int) -> int:
    """Lanes of split_final per output (the template's rule): one for up to FINAL_OWN_CHUNKS partials of at least
    FINAL_OWN_OUTPUTS outputs, else the power of two >= ``nchunks`` up to :data:`FINAL_GROUP_MAX`, or 0 where a
    whole block merges each output's partials."""
    if nchunks > FINAL_GROUP_MAX:
        return 0
    if nchunks <= FINAL_OWN_CHUNKS and out_size >= FINAL_OWN_OUTPUTS:
        return 1
    group = 1
    while group < nchunks:
        group *= 2
    return group


def final_pass(final: VariantKey, out_size: int, block: int, nchunks: int, chunk: int) -> Pass:
    """split_final over ``out_size`` outputs of ``nchunks`` partials: blocks of ``block`` threads holding
    block / group outputs each; with more partials than a group takes, a block per output, a thread per
    partial in whole warps. A programmatic dependent of pass 1 (rows or cols, which let it launch as they
    begin): its launch and start overlap pass 1's last blocks."""
    group = final_group(nchunks, out_size)
    if group == 0:
        threads = min(block, max(32, -(-nchunks // 32) * 32))
        return Pass(final, min(out_size, MAX_GRID), threads, nchunks=nchunks, chunk=chunk, dependent=True)
    grid = -(-out_size * group // block)
    return Pass(final, max(1, min(grid, MAX_GRID)), block, nchunks=nchunks, chunk=chunk, dependent=True)


def acc_bytes_at_most(plan: ReductionPlan) -> float:
    """An upper bound of sizeof(kspec::Acc) in the templates: the reduce type, plus a has-value flag padded to
    the type's alignment (at most its size) without an identity; unbounded for an opaque C type."""
    reduce_type = plan.specialization.reduce_type
    item = reduce_type.itemsize if reduce_type is not None else None
    if item is None:
        return float("inf")
    spec = plan.specialization.spec
    return item if spec.KIND == "reduction" and spec.identity is not None else 2 * item
