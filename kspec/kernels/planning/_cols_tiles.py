"""The cols entry's tiles as cols.cu.j2 lays them out, for the planner to size grids by: how many outputs a tile
holds (:func:`cols_tile_width`), whether its lanes load vectors (:func:`cols_vectorised`), whether a block's warps each
own a segment (:func:`warps_own_segments`) and how they merge it (:func:`halves_outputs`). Each function mirrors a
test the template makes on the launch's shape and strides; pure Python and driver-free, like the plan."""

from __future__ import annotations

from ...render import COLS_WARP_LOADS, DYNAMIC_NDIM, VariantKey
from ._plan import INT32_LIMIT, reach
from ._reduction_passes import acc_bytes_at_most
from ._reduction_plan import ReductionPlan, uses_row_names


def with_outer_unit_dim(plan: ReductionPlan) -> ReductionPlan:
    """A one-reduced-dim plan as the runtime-rank entries see two reduced dims: (R, 1), the outer one of stride 0.
    The vectorised cols lanes (VEC adjacent outputs per lane, one 16-byte load each) and the warps shared between
    rows (:func:`rows_share_warps`) exist only there."""
    return plan._replace(
        rndim=DYNAMIC_NDIM,
        red=(plan.red[0], 1),
        in_strides={n: (kept, (red[0], 0)) for n, (kept, red) in plan.in_strides.items()},
    )


# Vectorised tiles whose warps share loads between rows and whose whole row one warp covers in 2 * COLS_WARP_LOADS
# loads a lane or fewer: blocks of this many warps, each taking a tile of its own (cols.cu.j2). A warp a block ran in
# 1.24 waves (the entry's static shared memory holds 25 such blocks per SM): float16 L2 norm over axis 2 of (8, 512,
# 256, 16), fraction of a copy, H200, one warp splitting rows with its block -> 4 owning tiles: 0.534 -> 0.622; with
# their outputs halved between lanes (kspec::warp_scatter_strided), 0.678-0.709 (PyTorch 0.57)
OWNED_TILE_WARPS = 4


def warps_own_segments(plan: ReductionPlan, cols: VariantKey, warps: int, chunk: int) -> bool:
    """cols.cu.j2's rule: whether the warps of a block of entry ``cols`` each take segments of ``chunk`` rows of
    their own (one warp covers such a segment in 2 * KSPEC_COLS_WARP_LOADS loads a lane or fewer), rather than
    splitting each segment's rows between them. Vectorised lanes of two reduced dims only, whose warps merge by
    halving (:func:`halves_outputs`)."""
    if cols.vec <= 1 or not cols_vectorised(plan, cols.vec) or not halves_outputs(plan, cols.vec):
        return False
    return warps == 1 or chunk <= 2 * (32 // tile_lanes(plan, cols)) * COLS_WARP_LOADS


def halves_outputs(plan: ReductionPlan, vec: int) -> bool:
    """cols.cu.j2's test: whether the entry's warps may own segments, merging them by halving their lanes' VEC
    outputs between them (kspec::warp_scatter_strided): not for 16 outputs a lane or wide sums (spilled registers)."""
    return vec <= 8 and vec * acc_bytes_at_most(plan) <= 32


def tile_lanes(plan: ReductionPlan, cols: VariantKey) -> int:
    """Lanes of a warp that one tile row of entry ``cols`` takes (32 / that: the rows a warp load covers)."""
    width = cols_tile_width(plan, cols.vec)
    return width // cols.vec if cols_vectorised(plan, cols.vec) else width


def cols_tile_width(plan: ReductionPlan, vec: int) -> int:
    """Outputs per tile of the cols entry of vector width ``vec`` (its VariantKey's): 32, or (runtime rank)
    the innermost kept extent when it is below 32 and the innermost reduced dim lies right outside it in every
    input: the templates' cols entry applies the same rule and shares each warp between that many outputs and
    32 / width reduced positions (lanes past them idle). Where the entry loads ``vec`` adjacent outputs per
    lane (:func:`cols_vectorised`), the same rule in vectors, for a power of two of them: ``vec`` times as many
    outputs, and a tile spans as many runs of them (a power of two) as give each lane COLS_WARP_LOADS rows to walk
    where the rows are shorter; ``cols<I, R, 1>`` never does. (Pointers the plan cannot see may keep the entry on its scalar lanes:
    it then walks more tiles than the grid was sized for, correct but slower.)"""
    if cols_vectorised(plan, vec):
        lanes = plan.kept[0] // vec
        if lanes < 32 and not lanes & (lanes - 1) and rows_follow_kept(plan):
            while lanes < 32 and 32 // lanes * COLS_WARP_LOADS > plan.red_size:
                lanes *= 2  # rows too short for COLS_WARP_LOADS loads a lane: a tile spans several runs
            return lanes * vec
        return 32 * vec
    width = plan.kept[0] if plan.kept else 32
    if plan.rndim == 1 or width >= 32:
        return 32
    return width if rows_follow_kept(plan) else 32


def rows_follow_kept(plan: ReductionPlan) -> bool:
    """Whether the innermost reduced dim lies right outside the innermost kept one in every input: each row
    starts where the one before ends (cols.cu.j2's test for tiles narrower than a warp)."""
    return all(red[0] == plan.kept[0] * kept[0] for kept, red in plan.in_strides.values())


def cols_vectorised(plan: ReductionPlan, vec: int) -> bool:
    """Whether the runtime-rank cols entry of vector width ``vec`` takes its vectorised lanes for ``plan``
    (given 16-byte aligned pointers): the template's test on the strides and extents, as the plan knows them
    (contiguous_cols: the innermost kept stride is the item size in every input)."""
    if vec <= 1 or plan.rndim == 1 or len(plan.red) != 2 or not plan.contiguous_cols or plan.kept[0] % vec:
        return False
    if plan.red_size >= INT32_LIMIT:  # the template's test: it walks the two dims in 32-bit positions
        return False
    return all(
        all(k % 16 == 0 for k in kept[1:]) and red[0] % 16 == 0 and red[1] % 16 == 0
        for kept, red in plan.in_strides.values()
    )


def narrowed(plan: ReductionPlan, cols: VariantKey) -> VariantKey:
    """The module's 32-bit twin of the vectorised cols entry ``cols`` for an unsplit launch of ``plan`` (the
    runtime-rank view), where every offset it forms fits: each input's and output's furthest byte, and every element
    (``out_size * red_size``); else ``cols``. Not for raw parameters or map expressions that name the loop's
    indexers, which would see the narrower type. Splits keep 64 bits (their workspace offsets are not checked here).
    The launch stays sized by the 64-bit entry's occupancy: both hold the entry's launch bounds, and the narrower
    index arithmetic needs no more registers (64 each for a float32 L2 norm, sm_90)."""
    twin = VariantKey(cols.entry, "int32", cols.ndim, cols.vec)
    spec = plan.specialization.spec
    if twin not in plan.specialization.variants or any(p.raw for p in spec.params) or uses_row_names(spec.map_expr):
        return cols
    if plan.out_size * plan.red_size >= INT32_LIMIT:
        return cols
    extents = plan.kept + plan.red
    fits = all(reach(extents, kept + red) + 16 < INT32_LIMIT for kept, red in plan.in_strides.values()) and all(
        reach(plan.kept, strides) + 16 < INT32_LIMIT for strides in plan.out_strides.values())  # + a vector past the last
    return twin if fits else cols


def sized_cols(plan: ReductionPlan) -> list[VariantKey]:
    """The module's vectorised cols entries the planner sizes launches by: the 64-bit ones (an unsplit launch then
    narrows to its 32-bit twin, :func:`narrowed`)."""
    return [v for v in plan.specialization.variants if v.entry == "cols" and v.index == "int64" and v.vec > 1]
