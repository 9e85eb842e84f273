"""The strategy of a ReductionKernel call: which entry points run, with what grid, block and workspace, for a
:class:`~kspec.kernels.planning._reduction_plan.ReductionPlan` on a device with a given number of SMs; and each pass's
part of its launch's parameter frame. Pure Python and driver-free, like the plan."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Callable

from ...render import VariantKey
from ._plan import DEFAULT_BLOCK, MAX_GRID, raw_view_values
from ._reduction_plan import ReductionPlan
from ._reduction_cols import COLS_MIN_OUTPUTS, cols_strategy, rows_share_warps
from ._reduction_passes import REDUCE_UNROLL, Pass, PassShape, Strategy, final_pass
from ._reduction_fold import ahead_of_slab, fold_strategy, fold_view
from ._reduction_pieces import pieces_strategy
from ._reduction_slab import slab_strategy


# Shape classes (kspec/render/_abi.py describes the entries):
SHORT_ROW = 32  # rows of at most this many vectors: a power-of-two group of lanes (<= a warp) per row
SPLIT_MIN_ROW = 16384  # rows at least this long are split over several blocks when the outputs are few
# ... unless (one reduced dim) there are at least this many rows per SM and they are shorter than SPLIT_LONG_ROW:
# a block per row then beat two chunks per row and split_final (float32 L2 norm, fraction of copy, H200: 400 rows
# of 32768 0.67 -> 0.83, 448 of 65536 0.78 -> 0.92, 512 of 32768 0.76 -> 0.88 (PyTorch 0.87); 300 of 65536 0.83
# -> 0.81, 280 and 384 of 131072 0.90 -> 0.84 and 0.94 -> 0.93 kept split; NOTES v57)
UNSPLIT_ROWS_PER_SM = 3
SPLIT_LONG_ROW = 131072
BLOCKS_PER_SM = 4  # the grid a reduction aims at, in resident blocks per SM


def reduction_strategy(plan: ReductionPlan, sm_count: int, block_size: int | None = None,
                       max_threads: Callable[[VariantKey], int] | None = None,
                       resident: Callable[[VariantKey, int], int] | None = None, slab: bool = True,
                       knobs: Mapping[str, int] | None = None) -> Strategy:
    """Pick the entry points, grid and block for ``plan`` on a device with ``sm_count`` SMs; ``max_threads``
    tells a loaded entry's largest block (its registers decide), for the entries that may launch more than
    256 threads, and ``resident(variant, threads)`` how many blocks of that many threads an SM holds at once
    (the cols split sizes its grid to one wave of them). ``slab=False`` leaves out the slab entry
    (:mod:`._reduction_slab`), which takes the C-contiguous layouts of two reduced dims that fit it. ``knobs``:
    a tuning record's choices for the layout (kspec/_plan_tuning.py): ``block`` (the block it starts from where
    ``block_size`` is not given), ``per_sm`` (the blocks per SM a split aims at), ``slab``, ``cols`` and ``fold``
    (0: that entry or strategy is not taken), ``pieces`` (:mod:`._reduction_pieces`)."""
    if plan.out_size == 0:
        return Strategy((), kind="none")
    variants = plan.specialization.variants
    vec = plan.specialization.vec
    rows_variant = next(v for v in variants if v.entry == "rows" and v.ndim == plan.rndim)
    knobs = knobs or {}
    block = block_size or knobs.get("block", DEFAULT_BLOCK)
    block = max(32, block // 32 * 32)
    blocks_per_sm = knobs.get("per_sm", BLOCKS_PER_SM)
    target_blocks = sm_count * blocks_per_sm
    red = plan.red_size

    # pieces shorter than a vector, their outputs enough to fill the device: one pass of the pieces entry
    # (_reduction_pieces)
    asked = block if block_size is not None or "block" in knobs else None
    if knobs.get("pieces", 1) and (pieces := pieces_strategy(plan, sm_count, asked, max_threads)) is not None:
        return pieces
    # a short contiguous reduced dim inside a kept one: cols over it kept, then split_final (_reduction_fold);
    # with few outputs ahead of the slab entry
    view = fold_view(plan) if knobs.get("fold", 1) else None
    slab_first = view is None or not ahead_of_slab(plan, sm_count)
    if slab and slab_first and knobs.get("slab", 1) and block_size is None and (slabbed := slab_strategy(plan, sm_count)) is not None:
        return slabbed
    if view is not None:
        return fold_strategy(plan, view, sm_count, block, block_size is not None, max_threads, resident)
    if plan.inner_rows:
        return _inner(plan, sm_count, block, rows_variant=next(v for v in variants if v.entry == "rows" and v.ndim == 1))
    group = _row_group(plan, vec, sm_count)

    # the cols entry from 8 contiguous outputs: a tile of 32 lanes with 8 or 16 at work, its rows split over the
    # device, beat a split of the rows entry over rows strided by the kept dim (8 or 16 float32 outputs of
    # 2^25 elements: 0.25 -> 0.70 of copy; 8 float64 0.43 -> 0.62; H200, benchmarks/NOTES.md v29); fewer outputs
    # take it where its warps share rows (NHWC per channel, (64, 512, 512, C) over (0, 1, 2), float32: C = 2
    # 0.736 -> 0.836, C = 4 0.722 -> 0.980; PyTorch 0.775, 0.871; H200)
    if plan.contiguous_cols and red >= 2 and knobs.get("cols", 1) and (
            plan.out_size >= COLS_MIN_OUTPUTS or plan.rndim == 1 and rows_share_warps(plan)):  # fmt: skip
        return cols_strategy(plan, sm_count, block, block_size is not None, max_threads, resident)

    # a tuning record's per_sm decides the split itself (the tuner timed the split against a block per row)
    whole_rows = "per_sm" not in knobs and plan.rndim == 1 and red < SPLIT_LONG_ROW and (
        plan.out_size >= UNSPLIT_ROWS_PER_SM * sm_count)  # fmt: skip
    if red >= SPLIT_MIN_ROW and plan.out_size < target_blocks and not whole_rows:
        # at most one wave: BLOCKS_PER_SM per SM, fewer where the entry's registers allow fewer, and rounded
        # down (256 rows of 65536, axes (1, 3) of (16, 1024, 16, 64): 768 blocks of a runtime-rank rows entry
        # that an SM holds 4 of ran at 0.66 of copy, 512 at 0.82, H200)
        per_sm, threads = blocks_per_sm, block
        if plan.rndim != 1 and block_size is None:
            # rows over two reduced dims: the same threads per SM in blocks of ROWS_WALK_BLOCK (the 18 sweep
            # shapes with this plan, H200: mean 0.900 -> 0.923 of copy, 512 rows of 32768 over (1, 3) or (0, 3)
            # 0.93 -> 1.04; none lost more than 0.005), or ROWS_SPLIT_FEW_BLOCK for fewer rows than SMs
            walk = _split_walk_block(plan, sm_count)
            per_sm, threads = blocks_per_sm * block // walk, walk
        if resident is not None and (held := resident(rows_variant, threads)) > 0:
            per_sm = min(per_sm, held)
        nchunks_wanted = max(2, per_sm * sm_count // plan.out_size)
        chunk = -(-red // nchunks_wanted)
        chunk = max(chunk, threads * vec)  # at least one full block-wide vector sweep per chunk
        chunk = -(-chunk // vec) * vec
        nchunks = -(-red // chunk)
        if nchunks > 1:
            final = next(v for v in variants if v.entry == "split_final")
            segments = plan.out_size * nchunks
            first = Pass(rows_variant, min(segments, MAX_GRID), threads, group=threads, nchunks=nchunks, chunk=chunk)
            second = final_pass(final, plan.out_size, block, nchunks, chunk)
            return Strategy((first, second), workspace_items=segments, kind="split")

    if (plan.rndim != 1 and group is None and block_size is None and "block" not in knobs
            and _group_for_row(red, vec, block) == block):  # fmt: skip
        block = group = ROWS_WALK_BLOCK_SHORT if _short_inner_pieces(plan) else ROWS_WALK_BLOCK
    return Strategy((_rows_pass(rows_variant, plan.out_size, red, vec, block, sm_count, group=group),), kind="rows")


def _row_group(plan: ReductionPlan, vec: int, sm_count: int) -> int | None:
    """Two reduced dims whose inner one is at most 32 vectors long (axes (1, 3) of (1024, 16, 256, 16)),
    with outputs enough to fill the device that way: a group of exactly that many lanes, each lane walking
    the outer reduced dim at one position of the inner row, so that a warp reads the rows of adjacent
    outputs, adjacent in memory, whole instead of 64-byte pieces of rows far apart (see
    benchmarks/kernels/layouts.py --sweep); None: :func:`_rows_pass` sizes the group by the row length."""
    if len(plan.red) != 2 or plan.red[0] % vec:
        return None
    lanes = plan.red[0] // vec
    if lanes > 32 or lanes & (lanes - 1) or plan.out_size * lanes < sm_count * ROW_GROUP_MIN_WARPS * 32:
        return None
    return lanes


def _rows_pass(variant: VariantKey, out_size: int, red: int, vec: int, block: int, sm_count: int,
               group: int | None = None, **extra: object) -> Pass:
    """A ``rows`` launch over ``out_size`` rows of ``red`` elements: the group size for the row length,
    unless ``group`` is given."""
    if group is None:
        group = _group_for_row(red, vec, block, out_size, sm_count)
    per_block = block // group
    grid = max(1, min(-(-out_size // per_block), sm_count * 32, MAX_GRID))
    return Pass(variant, grid, block, group=group, chunk=red, **extra)  # type: ignore[arg-type]


def _group_for_row(red: int, vec: int, block: int, out_size: int = 0, sm_count: int = 0) -> int:
    """Lanes per row of ``red`` elements: a power of two up to a warp for short rows, a block for long ones;
    rows of at most 4096 elements a warp, or a block where ``out_size`` rows are too few (see below; without
    ``out_size`` and ``sm_count``, a warp)."""
    vectors = -(-max(red, 1) // vec)
    if vectors <= SHORT_ROW * REDUCE_UNROLL:
        # a group small enough that each lane has REDUCE_UNROLL vectors in flight (rows of 16 float32: one
        # lane per row, four 16-byte loads; adjacent lanes read adjacent rows, so warps stay coalesced;
        # rows of 256 float32: 16 lanes, four loads each)
        group = 1
        while group * REDUCE_UNROLL < vectors:
            group *= 2
        return group
    if red > 4096:
        return block
    # a warp per row leaves each lane `rounds` rounds of loads, one after another; with fewer rows than SMs x
    # rounds they are not hidden, and a block per row reads its row in one round (graph replays, H200, float32
    # sums: 1 row of 4096 4.54 -> 2.36 us, 528 rows of 4096 5.21 -> 3.82; 528 rows of 1024 3.01 -> 3.29, kept a
    # warp; .device/exp/p3_small.py)
    rounds = vectors // (32 * REDUCE_UNROLL)
    return block if out_size < sm_count * rounds else 32


# A block per row over two reduced dims (a row is pieces far apart: axes (0, 3) of (1024, 64, 16, 16)) takes
# 128 threads, or 64 where the pieces are at most 4 vectors long, not DEFAULT_BLOCK (256). On the 112 shapes of
# the layouts.py sweep that take this plan (H200), worst / mean fraction of copy: inner pieces of 16 float32,
# 256 threads 0.751 / 0.815, 128 0.768 / 0.831, 64 0.835 / 0.850; longer pieces, 256 threads 0.845 / 1.01,
# 128 0.878 / 1.01, 64 0.863 / 1.00.
ROWS_WALK_BLOCK = 128
ROWS_WALK_BLOCK_SHORT = 64
SHORT_INNER_VECTORS = 4
ROW_GROUP_MIN_WARPS = 12  # warps per SM a group of the inner row's length must give: ~25 KB of loads in flight
# Fewer rows than SMs over two reduced dims, each split into many chunks (NCHW over (0, 2, 3) with a few
# channels), walk in blocks of this many threads, half as many per SM: fraction of copy, H200, 128 -> 256
# threads: float16 (8, 32, 32, 2048) 0.600 -> 0.660, (4, 128, 2048, 64) 0.887 -> 0.925, (64, 2, 2048, 256)
# 0.867 -> 0.891; float32 (32, 32, 128, 256) 0.901 -> 0.929, (64, 32, 64, 512) 0.982 -> 1.000. Where the inner
# pieces are a few vectors long they keep ROWS_WALK_BLOCK: float32 (1024, 1024, 16, 2) over (0, 1, 3) lost
# 0.259 -> 0.231 on 256 (benchmarks/NOTES.md v59).
ROWS_SPLIT_FEW_BLOCK = 256


def _split_walk_block(plan: ReductionPlan, sm_count: int) -> int:
    """Threads per block of a rows split over two reduced dims (the caller gave no block)."""
    return ROWS_SPLIT_FEW_BLOCK if plan.out_size < sm_count and not _short_inner_pieces(plan) else ROWS_WALK_BLOCK


def _short_inner_pieces(plan: ReductionPlan) -> bool:
    """Whether the innermost reduced dim is at most SHORT_INNER_VECTORS of the module's vectors long."""
    return -(-plan.red[0] // plan.specialization.vec) <= SHORT_INNER_VECTORS


def _inner(plan: ReductionPlan, sm_count: int, block: int, rows_variant: VariantKey) -> Strategy:
    """Reduced dims that do not merge (axes (1, 3) of a 4-d array), in two passes without per-element index
    arithmetic (the runtime-rank rows entry unravels every element with 64-bit divisions: 0.23 of copy).

    Pass 1 is ``rows`` with one reduced dim, the innermost (contiguous: vector loads): its "outputs" are the
    rows of that dim, with the outer reduced dims as the innermost kept dims, so that row ``o * R + s``
    (output o, s over the R outer reduced positions) writes partial ``o * R + s``: the split workspace layout
    with nchunks = R. Pass 2 is ``split_final``, which merges each output's R partials and applies post_map.
    """
    outer = plan.red[1:]  # the outer reduced extents, innermost first
    nchunks = math.prod(outer)
    pass1_shape = PassShape(
        out_size=plan.out_size * nchunks,
        red_size=plan.red[0],
        kept=outer + plan.kept,
        red=plan.red[:1],
        in_strides={n: (red[1:] + kept, red[:1]) for n, (kept, red) in plan.in_strides.items()},
        # outputs are not written by pass 1, but its kept offsets cover them: zero along the reduced dims
        out_strides={n: (0,) * len(outer) + kept for n, kept in plan.out_strides.items()},
    )
    vec = plan.specialization.vec
    first = _rows_pass(rows_variant, pass1_shape.out_size, plan.red[0], vec, block, sm_count, shape=pass1_shape)
    final = next(v for v in plan.specialization.variants if v.entry == "split_final")
    second = final_pass(final, plan.out_size, block, nchunks, plan.red[0])
    return Strategy((first, second), workspace_items=pass1_shape.out_size, kind="inner")


def pass_frame_values(plan: ReductionPlan, step: Pass) -> dict[str, Any]:
    """One pass's part of its launch's parameter frame (kspec/kernels/callpath/_frame.py): everything that is not a
    pointer or a scalar value."""
    final = step.variant.entry in ("split_final", "slab_final")
    shape = step.shape or plan  # pass 1 of the "inner" strategy has a shape of its own
    static: dict[str, Any] = {
        "_reduce_shape": {
            "out_size": shape.out_size,
            "red_size": shape.red_size,
            "kept_extent": shape.kept,
            "red_extent": shape.red if not final else (shape.red_size,),
            "kept_ndim": len(shape.kept),
            "red_ndim": len(shape.red) if not final else 1,
        },
        "_group": step.group,
        "_workspace": {"nchunks": step.nchunks, "chunk": step.chunk},
    }
    for name, (kept, red) in shape.in_strides.items():
        static[name] = {"kept_stride": kept, "red_stride": red}
    for name, kept in shape.out_strides.items():
        static[name] = {"stride": kept}
    for name, layout in plan.raw.items():
        static[name] = raw_view_values(layout)
    return static
