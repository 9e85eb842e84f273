"""The cols entry's part of a ReductionKernel call's strategy (:func:`cols_strategy`): contiguous outputs whose
reduced axes are outer in memory (axis=0 of a C matrix, axes (0, 2) of a 4-d array, NHWC statistics), each warp's
loads spanning adjacent outputs. Pure Python and driver-free, like the plan; ``reduction_strategy``
(:mod:`._reduction_strategy`) chooses it."""

from __future__ import annotations

import math
from typing import Callable

from ..._named_tuple import NamedTuple
from ...render import (
    COLS_MAX_WARPS, COLS_MIN_BLOCKS, COLS_ONE_DIM_BLOCKS, COLS_ONE_DIM_THREADS, COLS_SHORT_ROWS, COLS_THREADS,
    COLS_WIDE_ACC, COLS_WIDE_WARPS, DYNAMIC_NDIM, VariantKey,
)
from ._cols_tiles import (
    OWNED_TILE_WARPS, cols_tile_width, cols_vectorised, narrowed, rows_follow_kept, sized_cols, tile_lanes,
    warps_own_segments, with_outer_unit_dim,
)
from ._plan import INT32_LIMIT, MAX_GRID
from ._reduction_passes import REDUCE_UNROLL, WARPS_PER_SM, Pass, PassShape, Strategy, acc_bytes_at_most, final_pass
from ._reduction_plan import ReductionPlan

COLS_MIN_CHUNK = 16  # reduced elements per warp of a cols split block, at least: 4 rounds of 4 loads each
COLS_MIN_OUTPUTS = 8  # contiguous outputs that take the cols entry, at least (reduction_strategy)
# the runtime-rank cols entry's block, at most, in warps: its registers do not allow 1024 threads everywhere
COLS_RUNTIME_RANK_WARPS = 16


def cols_strategy(plan: ReductionPlan, sm_count: int, block: int, block_given: bool,
                  max_threads: Callable[[VariantKey], int] | None,
                  resident: Callable[[VariantKey, int], int] | None) -> Strategy:
    """32 adjacent outputs per block, the warps of a block splitting their rows; when the tiles of 32
    outputs are fewer than half the blocks the device holds at once, the rows split over several blocks too
    (a workspace of partials and ``split_final``): axes (0, 2) of a (1024, 16, 32, 16) array has 8 tiles of
    32k elements. The split makes one wave: as many segments as fit the SMs together, never a few more (a
    second wave of 16 blocks after 528 took as long as the first: (128, 32, 1024, 32) at 0.62 of copy
    against 0.81, H200)."""
    red = plan.red_size
    if plan.rndim == 1 and (red <= COLS_SHORT_ROWS or _lanes_alone(plan, sm_count)):
        return _short_cols(plan, block, max_threads)
    shape = None  # the plan's own
    shared = plan.rndim == 1 and rows_share_warps(plan)
    if plan.rndim == 1 and (_vector_inputs(plan) or shared):  # the runtime-rank entry, the dim as (R, 1)
        view = with_outer_unit_dim(plan)
        view_shape = PassShape(view.out_size, view.red_size, view.kept, view.red, view.in_strides, view.out_strides)
        # 4-byte inputs' scalar lanes move 128 bytes a warp load: their vectorised entry is not loaded for a
        # layout whose tiles the warps alone say are too few
        estimate = max(_input_itemsizes(plan), default=0) > 2
        wide = _vector_launch(view, sm_count, block, block_given, max_threads, resident, estimate)
        if wide is not None:  # vectorised lanes
            grid = min(wide.blocks, MAX_GRID)
            return Strategy((Pass(narrowed(view, wide.variant), grid, 32 * wide.warps, chunk=red, shape=view_shape),),
                            kind="cols")
        few = _few_long_vector_tiles(view, sm_count, block, block_given, max_threads, resident, shared)
        if few is not None or shared:  # vectorised lanes split below, or scalar lanes spanning 32 / kept rows
            plan, shape = view, view_shape
    else:
        few = None
    launch = few or _cols_launch(plan, sm_count, block, block_given, max_threads, resident)
    cols, tiles, warps, slots = launch.variant, launch.tiles, launch.warps, launch.slots
    threads = 32 * warps
    if 2 * launch.blocks <= slots:
        nchunks = slots // launch.blocks
        chunk = max(-(-red // nchunks), COLS_MIN_CHUNK * warps)
        nchunks = -(-red // chunk)
        if nchunks > 1:
            final = next(v for v in plan.specialization.variants if v.entry == "split_final")
            grid = _segment_blocks(plan, cols, warps, tiles * nchunks, chunk)
            first = Pass(cols, min(grid, MAX_GRID), threads, nchunks=nchunks, chunk=chunk, shape=shape)
            second = final_pass(final, plan.out_size, block, nchunks, chunk)
            return Strategy((first, second), workspace_items=plan.out_size * nchunks, kind="cols split")
    return Strategy((Pass(narrowed(plan, cols), min(launch.blocks, MAX_GRID), threads, chunk=red, shape=shape),),
                    kind="cols")


# a one-reduced-dim layout splits its vectorised tiles where they are at most this many per SM (float16 L2 norm,
# fraction of a copy, H200, 128 tiles, scalar lanes -> split vector lanes: (2048, 512, 64) over 0 0.723 -> 0.907,
# (64, 2048, 64, 8) over 1 0.717 -> 0.895, PyTorch 0.768 and 0.752; at 0.25 per SM those kept their scalar lanes)
FEW_TILES_PER_SM = 4
# ... and each lane of a split block still walks this many rows (half a batch of the entry's vector loads)
FEW_TILES_MIN_ROWS = 8


def _few_long_vector_tiles(view: ReductionPlan, sm_count: int, block: int, block_given: bool,
                           max_threads: Callable[[VariantKey], int] | None,
                           resident: Callable[[VariantKey, int], int] | None, shared: bool) -> ColsLaunch | None:
    """The vectorised cols launch of a one-reduced-dim plan seen as (R, 1) (``view``) whose vectorised tiles
    are few and whose rows are long: a few contiguous outputs reduced over many rows ((4096, 512, 32) over
    (0, 1): one tile of 32 outputs over 2^21 rows), split over the device with 16-byte loads. Where the inputs
    are narrower than 4 bytes (their scalar lanes' warp loads move 64 bytes or less), or the outputs are fewer
    than a warp's lanes (``shared``: scalar lanes sharing a warp between rows). Fractions of a copy on an H200,
    scalar lanes -> split vector lanes: float16 (4096, 512, 32) over (0, 1) 0.71 -> 0.87, (8192, 4096) over 0
    0.63 -> 0.75, (128, 128, 512, 8) over (0, 1, 2) 0.61 -> 0.87; float32 (128, 128, 512, 8) 0.94 -> 0.98,
    (2048, 1024, 16) over (0, 1) 0.85 -> 0.89; but float32 with 32-1024 outputs moved -7% to +2% ((1024, 512,
    32) over (0, 1) 0.74 -> 0.70), so those keep their scalar lanes (NOTES v52). None where the tiles are many
    (splitting those lost: :func:`_cols_launch`) or the layout takes no vectorised lanes."""
    sizes = _input_itemsizes(view)
    if not sizes or max(sizes) > (4 if shared else 2):
        return None
    for wide in sized_cols(view):
        if wide.ndim != view.rndim or not cols_vectorised(view, wide.vec):
            continue
        lanes = cols_tile_width(view, wide.vec) // wide.vec
        if shared and lanes == 32:
            return None  # vector lanes would not share rows (kept / VEC not a power of two): the scalar ones do
        guess = _cols_shape(view, wide, sm_count, block, block_given, None, None)  # asks nothing of the entry
        if guess.tiles > FEW_TILES_PER_SM * sm_count or not _long_rows(view, guess, lanes):
            return None
        launch = _cols_shape(view, wide, sm_count, block, block_given, max_threads, resident)
        if 2 * launch.blocks > launch.slots or not _long_rows(view, launch, lanes):
            return None  # unsplit (_vector_launch's), or rows too short for its split
        return launch
    return None


def _long_rows(view: ReductionPlan, launch: ColsLaunch, lanes: int) -> bool:
    """Whether each lane of ``launch``'s split blocks walks FEW_TILES_MIN_ROWS rows at least (``lanes``: a tile
    row's lanes; a warp covers 32 / lanes rows a load)."""
    chunk = -(-view.red_size // max(1, launch.slots // launch.blocks))
    return chunk >= FEW_TILES_MIN_ROWS * launch.warps * (32 // lanes)


def rows_share_warps(plan: ReductionPlan) -> bool:
    """Whether a one-reduced-dim plan's outputs are fewer than a warp's lanes, adjacent, each row right after
    the one before in every input: NHWC statistics, (N, H, W, 8) over (0, 1, 2). The one-dim cols
    entry gives every lane an output of its own, so a warp load there moves kept * itemsize bytes with the other
    lanes idle; the runtime-rank entry shares each warp between 32 / kept rows (cols.cu.j2's tile width), so that
    its loads move 128 bytes, and splits the rows over the device (L2 norm of (128, 128, 512, 8) over (0, 1, 2),
    fraction of a copy, H200: float32 0.475 -> 0.924, PyTorch 0.798; float16 0.257 -> 0.600, PyTorch 0.614)."""
    if plan.red_size >= INT32_LIMIT:  # the entry walks two reduced dims in 32-bit positions only
        return False
    return 1 < cols_tile_width(with_outer_unit_dim(plan), 1) < 32


def _vector_inputs(plan: ReductionPlan) -> bool:
    """Whether every array input is at most 4 bytes wide: the vectorised cols lanes (one 16-byte load of VEC
    adjacent outputs per lane) pay there. A 2-byte type's scalar warp load moves 64 bytes (axis 1 of a float16
    (1024, 64, 2048) array: 0.49 of copy, H100); a 4-byte one's 128, yet vectors still gained where their tiles
    fill the device unsplit (float32 L2 norm on an H200, fraction of a copy: (128, 16, 1024, 64) over axis 1
    1.04 -> 1.52, (128, 64, 128, 128) over axis 2 1.35 -> 1.53, (16, 512, 8, 512) over axis 1 0.91 -> 0.93).
    Where they would be too few, the scalar one-dim entry keeps the layout (axis=0 of a float32 matrix: 1.0)."""
    sizes = _input_itemsizes(plan)
    return bool(sizes) and max(sizes) <= 4


def _input_itemsizes(plan: ReductionPlan) -> list[int]:
    return [op.itemsize for op in plan.specialization.operands if op.is_array and not op.is_output]


# One reduced dim longer than COLS_SHORT_ROWS whose (R, 1) tiles would share each warp load between rows (the
# innermost kept dim under 32 vectors) still walks a lane per VEC outputs, each lane its whole row alone, where
# those lanes give at least this many warps per SM: no share, no merge (rows of 64 shared between 16 lanes spent
# more on the tile's merge than on their loads). L2 norm, fraction of a copy, H200, shared -> alone: float16 over
# axis 2 of (16, 2048, 64, 16) 0.338 -> 0.748, (1024, 64, 64, 16) 0.344 -> 0.839, (64, 256, 128, 16) 0.544 ->
# 0.593 (4 warps per SM); float32 (1024, 64, 64, 16) 0.754 -> 0.976; int8 (64, 256, 128, 32) 0.236 -> 0.426;
# PyTorch 0.70, 0.79, 0.76, 0.90. Long rows held ((512, 512, 1024) over 0).
LANES_ALONE_WARPS_PER_SM = 4
# ... or, where the (R, 1) tiles' warps would each own a tile and halve its outputs between their lanes
# (warps_own_segments, halves_outputs), this many for rows of at most LANES_ALONE_SHORT_ROWS and twice as many for
# longer ones. Lanes alone -> owned tiles, L2 norm over axis 2, fraction of a copy, H200 (warps a SM of lanes alone):
# float16 (64, 512, 256, 16) 0.798 -> 0.877-0.915 (15.5), (32, 512, 512, 16) 0.638 -> 0.906 (7.75), (64, 256, 128,
# 16) 0.588 -> 0.723-0.759 (7.75), float32 (8, 1024, 64, 16) 0.640 -> 0.734 (7.75); lanes alone led on short rows
# at 15.5 (float16 (64, 256, 128, 32) 0.853 / 0.808, (16, 2048, 64, 16) 0.751 / 0.706-0.745) and at 31-62
# ((1024, 64, 64, 16) float16 0.852 / 0.834, float32 0.980 / 0.942)
LANES_ALONE_OVER_OWNED_WARPS_PER_SM = 12
LANES_ALONE_SHORT_ROWS = 128


def _lanes_alone(plan: ReductionPlan, sm_count: int) -> bool:
    """Whether a one-reduced-dim plan whose rows are longer than COLS_SHORT_ROWS takes :func:`_short_cols`'s
    vectorised lanes, each walking its row alone. (Rows whose tiles span a warp keep the (R, 1) lanes: there no
    merge is shared, and NCHW statistics over the channels were tuned on them.)"""
    wide = _runtime_cols(plan, vectorised=True)
    if wide is None or not _vector_inputs(plan) or not plan.contiguous_cols or plan.kept[0] % wide.vec:
        return False
    view = with_outer_unit_dim(plan)
    if tile_lanes(view, wide) >= 32:
        return False
    per_sm = LANES_ALONE_WARPS_PER_SM
    if warps_own_segments(view, wide, OWNED_TILE_WARPS, plan.red_size):
        per_sm = LANES_ALONE_OVER_OWNED_WARPS_PER_SM * (1 if plan.red_size <= LANES_ALONE_SHORT_ROWS else 2)
    return plan.out_size // (32 * wide.vec) >= per_sm * sm_count


def _runtime_cols(plan: ReductionPlan, vectorised: bool) -> VariantKey | None:
    """The module's runtime-rank cols instantiation with vector lanes (None: the module has none) or without."""
    return next((v for v in plan.specialization.variants
                 if v.entry == "cols" and v.index == "int64" and v.ndim == DYNAMIC_NDIM and (v.vec > 1) == vectorised),
                None)


def _short_cols(plan: ReductionPlan, block: int, max_threads: Callable[[VariantKey], int] | None) -> Strategy:
    """One reduced dim of at most COLS_SHORT_ROWS elements (or longer, vectorised, where :func:`_lanes_alone`
    says the lanes fill the device): the runtime-rank cols entry gives each warp a tile of
    32 outputs (cols.cu.j2 takes that path for such rows, unsplit; the one-dim entry has no registers for it), so
    blocks are full-sized and nothing is split. Before, a row of 8 made blocks of one warp (rows split over warps:
    nothing to split), 32 of them per SM: axis 0 of a float32 (8, 32, 2048, 32) array ran at 0.61 of copy, 0.75
    now (H100; 0.95 in the one-dim entry, whose long rows then lost 4-6% to spilled registers). Inputs of at most
    4 bytes (:func:`_vector_inputs`) whose innermost kept dim is contiguous and a multiple of the module's vector take the vectorised
    instantiation: VEC adjacent outputs per lane, tiles of 32 * VEC (cols.cu.j2 checks alignment and otherwise
    runs the scalar lanes, a tile's warp then covering a fraction of it: for longer rows its warps then split
    them, correct and slower)."""
    cols = _runtime_cols(plan, vectorised=False)
    assert cols is not None  # every reduction module has it
    wide = _runtime_cols(plan, vectorised=True)
    if wide is not None and _vector_inputs(plan) and plan.contiguous_cols and plan.kept[0] % wide.vec == 0:
        cols = wide
    warps = max(1, block // 32)
    if max_threads is not None and (most := max_threads(cols)) > 0:
        warps = min(warps, max(1, most // 32))
    tiles = -(-plan.out_size // (32 * cols.vec))
    return Strategy((Pass(cols, max(1, min(-(-tiles // warps), MAX_GRID)), 32 * warps, chunk=plan.red_size),), kind="cols")


class ColsLaunch(NamedTuple):
    """A cols entry and how it would run: its tiles (:func:`cols_tile_width`), warps per block, the blocks of
    that size the device holds at once, and the blocks its tiles make unsplit (the tiles, or a tile per warp where
    :func:`warps_own_segments`)."""

    variant: VariantKey
    tiles: int
    warps: int
    slots: int
    blocks: int
    owned: bool = False  # a tile per warp whose rows it covers alone (OWNED_TILE_WARPS): never split


def _segment_blocks(plan: ReductionPlan, cols: VariantKey, warps: int, segments: int, chunk: int) -> int:
    """Blocks of ``warps`` warps of entry ``cols`` that ``segments`` segments of ``chunk`` rows take."""
    return -(-segments // warps) if warps_own_segments(plan, cols, warps, chunk) else segments


def _cols_launch(plan: ReductionPlan, sm_count: int, block: int, block_given: bool,
                 max_threads: Callable[[VariantKey], int] | None,
                 resident: Callable[[VariantKey, int], int] | None) -> ColsLaunch:
    """The cols entry for ``plan``: lanes of VEC adjacent outputs (``cols<I, 0, VEC>``) only where the layout
    allows them (:func:`cols_vectorised`) and their own plan needs no split (tiles at least half the resident
    blocks, :func:`_cols`'s test); else scalar lanes (``cols<I, R, 1>``), split when their tiles are few. A
    vectorised block ends with VEC rounds of its warps' combine, and a split adds its partials and a second
    pass: where the vectorised tiles were few enough to split, that cost more than the vector loads saved
    (L2 norm, float32, fraction of copy bandwidth on an H200, graph replays; scalar -> vectorised: axes
    (0, 2) of (16, 256, 16, 256), 512 tiles of 128 outputs, 4 warps, ~2100 resident blocks: 0.61 -> 0.24;
    (64, 32, 16, 512), 128 tiles: 0.62 -> 0.43; (16, 16, 256, 1024), 128 tiles: 0.84 -> 0.74), while every
    layout whose vectorised tiles ran unsplit gained or held ((16, 256, 64, 256), 512 tiles of 16 warps on
    528 slots: 0.78 -> 0.87; (32, 128, 32, 1024): 0.84 -> 0.98; (16, 256, 16, 1024): 0.72 -> 0.86)."""
    wide = _vector_launch(plan, sm_count, block, block_given, max_threads, resident)
    if wide is not None:
        return wide
    scalar = next(v for v in plan.specialization.variants if v.entry == "cols" and v.ndim == plan.rndim and v.vec == 1)
    return _cols_shape(plan, scalar, sm_count, block, block_given, max_threads, resident)


def _vector_launch(plan: ReductionPlan, sm_count: int, block: int, block_given: bool,
                   max_threads: Callable[[VariantKey], int] | None,
                   resident: Callable[[VariantKey, int], int] | None, estimate: bool = False) -> ColsLaunch | None:
    """The vectorised cols entry's launch for ``plan`` where the layout allows it and its tiles fill the device
    unsplit (:func:`_cols_launch`), else None."""
    for wide in sized_cols(plan):
        if wide.ndim == plan.rndim and cols_vectorised(plan, wide.vec):
            # the vectorised entry's own block cap and occupancy decide (asking them loads it: a first call whose
            # layout allows vectors but has few outputs compiles both entries when nothing is precompiled);
            # ``estimate``: first the launch as the warps alone bound it, which asks nothing
            if estimate:
                guess = _cols_shape(plan, wide, sm_count, block, block_given, None, None)
                if not guess.owned and 2 * guess.blocks <= guess.slots:
                    return None
            launch = _cols_shape(plan, wide, sm_count, block, block_given, max_threads, resident)
            if launch.owned or 2 * launch.blocks > launch.slots:
                return launch
    return None


def _cols_shape(plan: ReductionPlan, cols: VariantKey, sm_count: int, block: int, block_given: bool,
                max_threads: Callable[[VariantKey], int] | None,
                resident: Callable[[VariantKey, int], int] | None) -> ColsLaunch:
    """How entry ``cols`` would run ``plan``: its tiles, warps per block and the blocks the device holds."""
    red = plan.red_size
    width = cols_tile_width(plan, cols.vec)
    tiles = -(-plan.out_size // width)
    launched = min(tiles, MAX_GRID)  # tiles the grid holds at once
    cap = COLS_MAX_WARPS if acc_bytes_at_most(plan) <= COLS_WIDE_ACC else COLS_WIDE_WARPS
    if plan.rndim != 1:
        cap = min(cap, COLS_RUNTIME_RANK_WARPS)
    if max_threads is not None and (most := max_threads(cols)) > 0:
        cap = min(cap, max(1, most // 32))
    one_dim = math.prod(plan.red[1:]) == 1  # one reduced dim, whichever instantiation walks it
    # one reduced dim fills the warps its entry holds (32 per SM for the runtime-rank one), not the SM's 64:
    # (32, 256, 256, 8) over 1, 512 tiles, took 16-warp blocks in two waves at 0.80 of copy; 8 warps 0.88
    held = _bounded_warps(plan, cols) if one_dim else WARPS_PER_SM
    if block_given:
        warps = block // 32
    else:
        # 32 outputs per block: with few outputs, more warps per block split each row so that one wave
        # fills the device (axis=0 of a 16384^2 matrix: 512 blocks of 8 warps fill half of an H200; of
        # 16 warps, 4 per SM, all of it)
        fill = held // -(-launched // sm_count)  # warps a tile that make one wave
        warps = fill if _one_wave(plan, cols, fill, width) else max(block // 32, fill)
    # rows a warp walks at least: 2 rounds of loads (the one-dim entry), 8 for one reduced dim in the runtime-rank
    # entry (blocks of one warp, which its shared memory holds 25 of per SM, walked rows of 64 alone: float32 L2
    # norm over axis 1 of (4096, 64, 128) 0.82 -> 0.93 of copy on two, PyTorch 0.94; float16 (32, 64, 32, 1024)
    # 0.78 -> 0.88, PyTorch 0.81; H200), 16 with several (their walk's setup costs more: axes (0, 2) of
    # (16, 1024, 16, 1024), rows of 256, ran at 0.70 of copy on 8 warps, 0.77 on 4)
    per_warp = 2 if plan.rndim == 1 else 8 if one_dim else 16
    by_rows = -(-red // (per_warp * REDUCE_UNROLL))
    share = 32 // tile_lanes(plan, cols)
    if share > 1:
        # warps sharing each load between `share` rows: a lane walks SHARED_LOADS_PER_LANE of them at least, so
        # that its loads outweigh the tile's merge at the end (float16 L2 norm over axis 2 of (8, 512, 256, 16),
        # 16 rows a warp load, fraction of a copy, H200: 8 warps 0.199, 1 0.511; (64, 256, 128, 16) 0.198 ->
        # 0.507; float32 (8, 512, 256, 16) 0.497 -> 0.798 on 2; CuPy 0.23, 0.21, 0.46)
        by_rows = -(-red // (share * SHARED_LOADS_PER_LANE))
    if one_dim and launched * by_rows < WARPS_PER_SM * sm_count // 4:
        # one reduced dim whose warps would leave most of the device idle: more, down to 4 rounds each, up to
        # its warp slots (float32 L2 norm over axis 1 of (8, 64, 64, 512), rows of 64, 2048 tiles of 128 outputs:
        # one warp a tile, 0.64 of copy; four, 0.79. H200. Rows of 128 on 4096 tiles lost 0.91 -> 0.61 on
        # eight, float16. Several reduced dims keep their rule: their vectorised tiles lost where they were few)
        by_rows = max(by_rows, min(-(-red // (4 * REDUCE_UNROLL)), held * sm_count // launched))
    warps = max(1, min(cap, warps, by_rows))
    owned = share > 1 and not block_given and warps_own_segments(plan, cols, OWNED_TILE_WARPS, red)
    if owned:
        warps = min(cap, OWNED_TILE_WARPS)  # a tile per warp, whatever its rows asked
    per_sm = resident(cols, 32 * warps) if resident is not None else 0
    if per_sm <= 0:
        per_sm = _bounded_blocks(plan, cols, warps)
    return ColsLaunch(cols, tiles, warps, per_sm * sm_count, _segment_blocks(plan, cols, warps, tiles, red), owned)


SHARED_LOADS_PER_LANE = 16  # loads a lane of a tile sharing rows walks at least (_cols_shape)

# Vectorised tiles that one wave holds at this many warps each or more take that many, fewer than the default block's
# 8, where their rows are this long at least: blocks of 8 warps made two to four waves (L2 norm, fraction of a copy,
# H200, 97 sweep layouts whose plans it changed: geometric mean +1.7%, float32 (512, 256, 512) over 1 0.954 -> 0.977 (PyTorch 0.989), (256, 512,
# 256) over 0 0.904 -> 0.938, float16 (512, 256, 512) over 1 0.886 -> 0.920, folds of 3-6 +1-6%). Not one warp
# a tile (4,096 tiles: 0.88-0.93 of what 2-8 warps gave), nor rows of 128 (float16 lost up to 1.7%), nor tiles that
# are each one run of memory (a whole kept row, the rows adjacent: float16 (2048, 256, 256) over 1 lost 4%)
ONE_WAVE_MIN_WARPS = 2
ONE_WAVE_MIN_ROWS = 256


def _one_wave(plan: ReductionPlan, cols: VariantKey, fill: int, width: int) -> bool:
    """Whether entry ``cols``'s tiles of ``width`` outputs take ``fill`` warps each, the warps one wave gives them
    (ONE_WAVE_MIN_WARPS)."""
    if cols.vec <= 1 or fill < ONE_WAVE_MIN_WARPS or plan.red_size < ONE_WAVE_MIN_ROWS:
        return False
    if width < 32 * cols.vec:  # tiles sharing warps between rows: sized by their own rule
        return False
    return not (plan.kept[0] == width and rows_follow_kept(plan))  # each tile one run of memory


# what an SM holds of the cols entry without asking the loaded entry, as cols.cu.j2's __launch_bounds__ promise:
# (threads a block, blocks per SM) for reduce types of at most 4 bytes; one block for wider ones
COLS_BOUNDS = {1: (COLS_ONE_DIM_THREADS, COLS_ONE_DIM_BLOCKS), DYNAMIC_NDIM: (COLS_THREADS, COLS_MIN_BLOCKS)}
MAX_BLOCKS_PER_SM = 32  # sm_80..sm_90


def _bounded_blocks(plan: ReductionPlan, cols: VariantKey, warps: int) -> int:
    """Blocks of ``warps`` warps of entry ``cols`` an SM holds, by its launch bounds (the entry not loaded). The
    runtime-rank entry's registers hold 32 warps, not the SM's 64: a guess of 64 sent NCHW statistics over axis
    1 to the scalar lanes where the vectorised tiles fill the device ((4096, 64, 128), float32)."""
    return max(1, min(MAX_BLOCKS_PER_SM, _bounded_warps(plan, cols) // warps))


def _bounded_warps(plan: ReductionPlan, cols: VariantKey) -> int:
    """Warps of entry ``cols`` an SM holds by its launch bounds."""
    threads, blocks = COLS_BOUNDS[1 if cols.ndim == 1 else DYNAMIC_NDIM]
    reduce_type = plan.specialization.reduce_type
    if reduce_type is None or reduce_type.itemsize is None or reduce_type.itemsize > 4:
        blocks = 1
    return threads * blocks // 32
