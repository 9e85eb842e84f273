"""The fold strategy of a ReductionKernel call: a short contiguous reduced dim inside a kept one (axes (0, 1, 3)
of (1024, 1024, 16, 2): 16 outputs, each reducing pairs of adjacent elements across 2^20 rows of 32). Pure Python
and driver-free, like the plan; ``reduction_strategy`` (:mod:`._reduction_strategy`) chooses it.

Such a layout reads each output's elements as pieces of a few bytes far apart: the rows entry then moves 8-byte
pieces per lane (float32 pairs: 0.26 of copy, PyTorch 0.28; H200, benchmarks/NOTES.md v59), and the slab entry
takes only pieces that are whole vectors. Pass 1 here treats the short dim as kept instead: the cols strategy
(:mod:`._reduction_cols`) over kept (r0, K...) and the outer reduced dims, whose warps read r0 x K0 contiguous
elements a row, writing a partial per (piece position, kept position, chunk). Its output o * r0 + j, chunk s,
lands at (o * r0 + j) * nchunks + s: output o's r0 x nchunks partials are adjacent, the split workspace layout
with r0 * nchunks chunks, so ``split_final`` merges them and applies post_map as for any split.
"""

from __future__ import annotations

import math
from typing import Callable

from ...render import DYNAMIC_NDIM, MAX_NDIM, VariantKey
from ._loop_order import merge_dims
from ._cols_tiles import with_outer_unit_dim
from ._reduction_cols import cols_strategy
from ._reduction_passes import PassShape, Strategy, final_pass
from ._reduction_plan import ReductionPlan, uses_row_names

# Innermost reduced pieces of at most this many bytes (the widest input's) fold, where the rows entry read them as
# pieces far apart (L2 norm, fraction of a copy, H200, without -> with the fold: float32 (1024, 1024, 16, 2) over
# (0, 1, 3) 0.268 -> 0.894, (4096, 4096, 3) over (0, 2) 0.315 -> 0.929, (4096, 512, 6) over (0, 2) 0.494 -> 0.732;
# float16 (4096, 4096, 2) 0.138 -> 0.780, (2048, 1024, 12) 0.237 -> 0.613; PyTorch 0.14-0.50 on all). Pieces of
# 48-64 bytes went either way (float32 (2048, 1024, 12) 0.820 -> 0.856, float16 (2048, 1024, 24) 0.814 -> 0.662).
FOLD_MAX_BYTES = 32
# ... where the outer reduced positions are at least this many: pass 1 writes that many times fewer partials
# than it reads elements (L2 norm, H200, rows entry -> fold: float32 (24, 2^20, 3) over (0, 2) 0.435 -> 0.656,
# (32, 2^19, 2) 0.573 -> 0.696, float16 (64, 32, 8192, 4) over (1, 3) 0.383 -> 0.521; 16 outer positions level,
# float32 (16, 2^20, 2) 0.601 -> 0.614, float16 (512, 16, 2048, 2) over (1, 3) 0.382 -> 0.376; 8 lost, (8, 2^22,
# 2) 0.664 -> 0.451)
FOLD_MIN_OUTER = 24
# ... and fewer than this many outer positions (one dim of them) walk as (R, 1) in the runtime-rank cols entry,
# whose vector lanes take rows that short; more, in the one-dim entry ((64, 2^18, 2): 0.550 -> 0.828)
FOLD_ONE_DIM_OUTER = 64


def ahead_of_slab(plan: ReductionPlan, sm_count: int) -> bool:
    """Whether a layout that folds does so even where the slab entry would take it: fewer outputs than SMs, whose
    slab tiles are too few (float32 (4096, 2048, 8, 8) over (0, 1, 3), 8 outputs: slab 0.698, fold 1.557 of a
    copy; (8192, 1024, 4, 8) 0.374 -> 1.540; 128 outputs level, 1.555 / 1.565; with 512 outputs the slab led,
    (4096, 512, 8) over (0, 2) 0.888 / 0.814; H200)."""
    return plan.out_size < sm_count


def fold_strategy(plan: ReductionPlan, view: ReductionPlan, sm_count: int, block: int, block_given: bool,
                  max_threads: Callable[[VariantKey], int] | None,
                  resident: Callable[[VariantKey, int], int] | None) -> Strategy:
    """Pass 1 (cols over ``view``, :func:`fold_view`'s) and split_final for ``plan``."""
    r0 = plan.red[0]
    first = cols_strategy(view, sm_count, block, block_given, max_threads, resident).passes[0]
    own = PassShape(view.out_size, view.red_size, view.kept, view.red, view.in_strides, view.out_strides)
    first = first._replace(shape=first.shape or own)
    final = next(v for v in plan.specialization.variants if v.entry == "split_final")
    nchunks = r0 * first.nchunks
    second = final_pass(final, plan.out_size, block, nchunks, first.chunk)
    return Strategy((first, second), workspace_items=plan.out_size * nchunks, kind="fold")


def fold_view(plan: ReductionPlan) -> ReductionPlan | None:
    """``plan`` as pass 1 of the fold sees it: its innermost reduced dim as its innermost kept one (merged with
    the kept dims it is contiguous with); None where the layout does not fold (see the module docstring)."""
    spec = plan.specialization.spec
    if len(plan.red) < 2 or len(plan.kept) + 1 > MAX_NDIM or plan.raw or any(p.raw for p in spec.params):
        return None
    if uses_row_names(spec.map_expr):  # pass 1 sees other rows and outputs than the call
        return None
    r0, outer = plan.red[0], plan.red[1:]
    items = {op.name: op.itemsize for op in plan.specialization.operands if op.is_array and not op.is_output}
    if not items or r0 * max(items.values()) > FOLD_MAX_BYTES or math.prod(outer) < FOLD_MIN_OUTER:
        return None
    if any(plan.in_strides[n][1][0] != item for n, item in items.items()):
        return None  # the short dim must be contiguous: pass 1's warps then read it with the kept dims
    names = list(plan.in_strides)
    # C order (outermost first) for merge_dims: the kept dims, then the short one
    kept_c, strides_c = merge_dims(plan.kept[::-1] + (r0,), [list(plan.in_strides[n][0][::-1]) + [items[n]] for n in names])
    kept = tuple(reversed(kept_c))
    in_strides = {n: (tuple(reversed(strides_c[i])), plan.in_strides[n][1][1:]) for i, n in enumerate(names)}
    # pass 1 writes partials only; its kept offsets of the outputs are zero
    out_strides = {n: (0,) * len(kept) for n in plan.out_strides}
    view = plan._replace(
        out_size=plan.out_size * r0,
        red_size=plan.red_size // r0,
        kept=kept,
        red=outer,
        in_strides=in_strides,
        out_strides=out_strides,
        rndim=1 if len(outer) == 1 else DYNAMIC_NDIM,
        contiguous_cols=all(abs(r) > items[n] for n in names for r in plan.in_strides[n][1][1:]),
        inner_rows=False,
    )
    if len(outer) == 1 and outer[0] < FOLD_ONE_DIM_OUTER:
        # a few outer rows as (R, 1): the runtime-rank cols entry's vector lanes walk them (a one-dim plan of 32
        # or fewer would take the short-row path, a warp per tile of scalar lanes)
        return with_outer_unit_dim(view)
    return view
