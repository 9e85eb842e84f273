"""The slab strategy of a ReductionKernel call: C-contiguous layouts of two reduced dims (axes (1, 3), (0, 2)
or (0, 3) of a 4-d array) through the ``slab`` entry, 32-bit, with a block per tile of outputs and chunk of
the outer reduced dim (templates/reduction/slab.cu.j2 says how a block walks its tile).

The plan's merged dims are rewritten into one of two canonical shapes of the same elements, innermost first
(element strides, shared by every input):

* "cols", outputs along the contiguous dim: kept (K0, K1), red (R0, R1) with strides kept (1, R0 * K0),
  red (K0, any): a tile is one K1 position, a region of R0 x K0 contiguous elements per R1 position; where
  K1 gives too few tiles, kept (K0 / P, P, K1) with strides (1, K0 / P, R0 * K0): a tile is a part of K0,
  R0 rows of K0 / P elements at stride K0 per R1 position;
* "rows", the contiguous dim reduced: kept (k1t, K1 / k1t, K2), red (R0, R1) with strides kept (R0,
  k1t * R0, any), red (1, any): a tile is k1t consecutive rows of R0 (k1t * R0 contiguous elements).

Both need powers of two (the entry splits a position with shifts) and vectors that stay whole. Where a layout
does not fit, :func:`slab_strategy` returns None and the other strategies run. Pure Python, driver-free.
"""

from __future__ import annotations

from ...render import SLAB_ACC_BYTES, SLAB_BLOCK, SLAB_MIN_BLOCKS
from ._plan import INT32_LIMIT
from ._reduction_plan import ReductionPlan, uses_row_names
from ._reduction_passes import Pass, PassShape, Strategy, acc_bytes_at_most

# Vectors a split block reads at least: 8 rounds of 4 loads per thread. On the 25 slab splits of the sweep's
# 2^24-element shapes (H200), 2 / 4 / 8 rounds ran at a mean of 0.844 / 0.851 / 0.857 of copy, 15 / 14 / 11 of
# them below 0.85 ((64, 64, 64, 64) over (0, 2): 2048 / 1024 / 512 blocks, 0.806 / 0.836 / 0.856).
SLAB_MIN_VECTORS = SLAB_BLOCK * 32
# Where the tiles fill the device (at least UNSPLIT_TILES_PER_SM per SM) a block reduces a whole tile: unsplit
# tiles of 256-1024 blocks ran at 0.90-1.07 of copy (the layouts.py sweep, H200). Fewer tiles split the outer
# reduced dim into chunks (a workspace and slab_final) until about SPLIT_WAVES waves of blocks run, within limits
# (_may_split) measured on the sweep's (0, 2) shapes of 2^24 elements (H200, .device/exp/p3_knobs3.py):
# * rows tiles (few outputs of long rows) split below two tiles per SM: 256 rows of 65536 went 0.79-0.81 ->
#   0.86-0.87; regions of at most SPLIT_MAX_REGION vectors;
# * cols tiles split below one per SM, regions of at most SPLIT_MAX_REGION vectors, or COLS_SPLIT_MAX_REGION
#   where a K0 row is at most COLS_WIDE_REGION_LANES vectors ((16, 16, 1024, 64): 0.78 -> 0.85; K0 of 1024
#   float32: 0.80 -> 0.79);
# * cols tiles between one and two per SM split where a K0 row is at most COLS_FEW_TILES_LANES vectors
#   ((256, 256, 16, 16): 0.82 -> 0.86; K0 of 256 float32, 65536 outputs: 0.85 -> 0.80).
# Before any of that, cols tiles take parts of K0 (_cols_parts) where K1 alone gives fewer than two per SM:
# (16, 16, 64, 1024) over (0, 2) went 0.80 -> 0.92 (32 parts, unsplit), (16, 16, 256, 256) 0.84 -> 0.89 (8 parts,
# 4 chunks); H200, .device/exp/p3_parts.py.
UNSPLIT_TILES_PER_SM = 2
SPLIT_MAX_REGION = 16 * SLAB_BLOCK
COLS_SPLIT_MAX_REGION = 64 * SLAB_BLOCK
COLS_WIDE_REGION_LANES = 64
COLS_FEW_TILES_LANES = 16
SPLIT_MIN_PER_PARTIAL = 64
SPLIT_WAVES = 2
COLS_MIN_RUN = 8  # vectors: a part of K0 reads runs of at least 128 bytes
PARTS_MAX_WHOLE_BLOCK = 4 * SLAB_MIN_VECTORS  # see _cols_parts
SPLIT_MAX_CHUNKS = 32  # chunks per tile at most: slab_final's lanes load at most 4 partials each
FINAL_OUTPUTS_PER_BLOCK = 32  # slab_final: a lane per output, the block's warps over its chunks


def _itemsize(plan: ReductionPlan, name: str) -> int:
    return next(op.itemsize for op in plan.specialization.operands if op.name == name)


def _pow2(n: int) -> bool:
    return n > 0 and not n & (n - 1)


def _element_strides(plan: ReductionPlan) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The inputs' (kept, reduced) strides in elements, when every input has the same ones, all positive."""
    found = None
    for name, (kept, red) in plan.in_strides.items():
        item = _itemsize(plan, name)
        if any(s <= 0 or s % item for s in kept + red):
            return None
        mine = (tuple(s // item for s in kept), tuple(s // item for s in red))
        if found is not None and mine != found:
            return None
        found = mine
    return found


def _eligible(plan: ReductionPlan, vec: int) -> bool:
    spec = plan.specialization.spec
    if len(plan.red) != 2 or plan.inner_rows or plan.raw or any(p.raw for p in spec.params):
        return False
    if uses_row_names(spec.map_expr) or acc_bytes_at_most(plan) * vec > SLAB_ACC_BYTES:
        return False
    # 32-bit offsets: the inputs' elements (checked on the canonical shape) and every output's bytes
    outputs = all(sum((n - 1) * abs(s) for n, s in zip(plan.kept, strides)) < INT32_LIMIT
                  for strides in plan.out_strides.values())
    return outputs and plan.out_size * plan.red_size < INT32_LIMIT


def slab_strategy(plan: ReductionPlan, sm_count: int) -> Strategy | None:
    """The slab launch (and slab_final, for a split) of ``plan``, or None where its layout does not fit."""
    variant = next((v for v in plan.specialization.variants if v.entry == "slab"), None)
    if variant is None or not _eligible(plan, variant.vec):
        return None
    strides = _element_strides(plan)
    if strides is None:
        return None
    vec = variant.vec
    (ks, (rs0, rs1)), (r0, r1) = strides, plan.red
    if rs1 % vec:
        return None
    kept = plan.kept
    if ks and ks[0] == 1:
        canon = _cols_shape(plan, kept, ks, rs0, rs1, r0, r1, vec, sm_count)
    elif rs0 == 1:
        canon = _rows_shape(plan, kept, ks, rs1, r0, r1, vec, sm_count)
    else:
        return None
    if canon is None:
        return None
    shape, group, tiles, region = canon
    nchunks, chunk = 1, r1 * r0
    if tiles < UNSPLIT_TILES_PER_SM * sm_count:
        split = _chunks(group == 0, tiles, region // vec, shape.kept[0] // vec, r0, r1, sm_count)
        if split is None:
            return None
        nchunks, chunk = split
    first = Pass(variant, tiles * nchunks, SLAB_BLOCK, group=group, nchunks=nchunks, chunk=chunk, shape=shape)
    if nchunks == 1:
        return Strategy((first,), kind="slab")
    final = next(v for v in plan.specialization.variants if v.entry == "slab_final")
    # the slab entry lets slab_final start as it begins; slab_final waits for the partials (sm_90+): graph
    # replays of the split went 0.775 -> 0.805 of copy ((256, 16, 64, 64) over (0, 2), H200). After the rows
    # and cols entries, which do not, the same launch lost 0.005-0.01.
    grid = -(-plan.out_size // FINAL_OUTPUTS_PER_BLOCK)  # covers the outputs (slab_final has no grid-stride loop)
    second = Pass(final, grid, SLAB_BLOCK, nchunks=nchunks, chunk=chunk, dependent=True)
    return Strategy((first, second), workspace_items=plan.out_size * nchunks, kind="slab split")


def _chunks(cols: bool, tiles: int, region: int, lanes: int, r0: int, r1: int, sm_count: int) -> tuple[int, int] | None:
    """(chunks per tile, reduced positions per chunk) for tiles fewer than UNSPLIT_TILES_PER_SM per SM, or None
    where they do not split (see above); ``region``: vectors per R1 position, ``lanes``: vectors per K0 row (cols)."""
    if not _may_split(cols, tiles, region, lanes, sm_count):
        return None
    wanted = max(1, SPLIT_WAVES * SLAB_MIN_BLOCKS * sm_count // tiles)  # at most SPLIT_WAVES full waves
    rows = max(-(-r1 // wanted), -(-SLAB_MIN_VECTORS // region))
    if -(-r1 // rows) > SPLIT_MAX_CHUNKS:
        rows = -(-r1 // SPLIT_MAX_CHUNKS)
    nchunks = -(-r1 // rows)
    if nchunks * SPLIT_MIN_PER_PARTIAL > r0 * r1:
        return None
    return nchunks, rows * r0


def _may_split(cols: bool, tiles: int, region: int, lanes: int, sm_count: int) -> bool:
    """Whether tiles fewer than UNSPLIT_TILES_PER_SM per SM split at all (the limits above)."""
    if not cols:
        return region <= SPLIT_MAX_REGION
    if tiles >= sm_count and lanes > COLS_FEW_TILES_LANES:
        return False
    return region <= (COLS_SPLIT_MAX_REGION if lanes <= COLS_WIDE_REGION_LANES else SPLIT_MAX_REGION)


def _canonical(plan: ReductionPlan, kept: tuple[int, ...], red: tuple[int, ...], kept_strides: tuple[int, ...],
               red_strides: tuple[int, ...], outs: dict[str, tuple[int, ...]]) -> PassShape | None:
    """The canonical shape from extents and element strides (every input's, as bytes), or None where an input's
    furthest element lies 2**31 elements or more away (the entry's offsets are 32-bit)."""
    if sum((n - 1) * st for n, st in zip(kept + red, kept_strides + red_strides)) >= INT32_LIMIT:
        return None
    strides = {}
    for name in plan.in_strides:
        item = _itemsize(plan, name)
        strides[name] = (tuple(st * item for st in kept_strides), tuple(st * item for st in red_strides))
    return PassShape(plan.out_size, plan.red_size, kept, red, strides, outs)


def _cols_shape(plan: ReductionPlan, kept: tuple[int, ...], ks: tuple[int, ...], rs0: int, rs1: int,
                r0: int, r1: int, vec: int, sm_count: int) -> tuple[PassShape, int, int, int] | None:
    k0 = kept[0]
    k1 = kept[1] if len(kept) > 1 else 1
    if len(kept) > 2 or rs0 != k0 or (len(kept) > 1 and ks[1] != r0 * k0):
        return None
    if k0 % vec or not _pow2(k0 // vec) or k0 // vec > SLAB_BLOCK or not _pow2(r0 * k0 // vec):
        return None
    outs: dict[str, tuple[int, ...]] = {n: (s[0], s[1] if len(s) > 1 else 0) for n, s in plan.out_strides.items()}
    parts = _cols_parts(k0 // vec, k1, r0, r1, sm_count)
    if parts == 1:
        shape = _canonical(plan, (k0, k1), (r0, r1), (1, r0 * k0), (k0, rs1), outs)
        return None if shape is None else (shape, 0, k1, r0 * k0)
    # a tile is a part of K0 (its rows then run k0 / parts outputs long, at stride K0): kept (K0 / parts, parts, K1)
    k0p = k0 // parts
    shape = _canonical(plan, (k0p, parts, k1), (r0, r1), (1, k0p, r0 * k0), (k0, rs1),
                       {n: (s[0], k0p * s[0], s[1]) for n, s in outs.items()})
    return None if shape is None else (shape, 0, k1 * parts, r0 * k0p)


def _cols_parts(lanes: int, k1: int, r0: int, r1: int, sm_count: int) -> int:
    """Parts of K0 per cols tile (a power of two, runs of at least COLS_MIN_RUN vectors): as few as give
    UNSPLIT_TILES_PER_SM tiles per SM. Where even the most parts must split, they are taken only where whole-K0
    tiles would split into blocks of fewer than PARTS_MAX_WHOLE_BLOCK vectors; longer blocks carry their
    partials well, and 128-byte runs cost more than they save ((1024, 16, 64, 256): 1.682 whole, 1.653 in 8
    parts; (64, 16, 64, 256): 0.877 whole, 0.907 in 8 parts; H200, .device/exp/p3_waves.py)."""
    parts = 1
    while k1 * parts < UNSPLIT_TILES_PER_SM * sm_count and lanes // (2 * parts) >= COLS_MIN_RUN:
        parts *= 2
    if parts == 1 or k1 * parts >= UNSPLIT_TILES_PER_SM * sm_count:
        return parts
    whole = _chunks(True, k1, r0 * lanes, lanes, r0, r1, sm_count)
    if whole is not None and whole[1] // r0 * r0 * lanes >= PARTS_MAX_WHOLE_BLOCK:
        return 1
    return parts


def _rows_shape(plan: ReductionPlan, kept: tuple[int, ...], ks: tuple[int, ...], rs1: int, r0: int, r1: int,
                vec: int, sm_count: int) -> tuple[PassShape, int, int, int] | None:
    if r0 % vec or not _pow2(r0 // vec) or len(kept) > 2:
        return None
    outs = plan.out_strides
    if kept and ks[0] == r0:  # K1 right outside the reduced row, then K2 anywhere
        k1, k2, sk2 = kept[0], kept[1] if len(kept) > 1 else 1, ks[1] if len(kept) > 1 else 0
        out_k1 = {n: s[0] for n, s in outs.items()}
        out_k2 = {n: s[1] if len(s) > 1 else 0 for n, s in outs.items()}
    elif len(kept) <= 1:  # no K1: the rows of a tile are one
        k1, k2, sk2 = 1, kept[0] if kept else 1, ks[0] if kept else 0
        out_k1 = {n: 0 for n in outs}
        out_k2 = {n: s[0] if s else 0 for n, s in outs.items()}
    else:
        return None
    if sk2 % vec:
        return None
    k1t = _rows_per_tile(k1, k2, r0 // vec, sm_count)
    # between one and two tiles per SM neither runs well (slab_strategy): fewer, wider tiles split instead
    while (sm_count <= k2 * (k1 // k1t) < UNSPLIT_TILES_PER_SM * sm_count and k1 % (2 * k1t) == 0
           and 2 * k1t * (r0 // vec) <= SLAB_BLOCK):
        k1t *= 2
    shape = _canonical(plan, (k1t, k1 // k1t, k2), (r0, r1), (r0, k1t * r0, sk2), (1, rs1),
                       {n: (out_k1[n], k1t * out_k1[n], out_k2[n]) for n in outs})
    return None if shape is None else (shape, k1t, k2 * (k1 // k1t), k1t * r0)


def _rows_per_tile(k1: int, k2: int, row_vectors: int, sm_count: int) -> int:
    """Rows per tile: at least 8 vectors (128 bytes) of contiguous reading per tile and R1 position, then as
    many as keep half a wave of tiles, at most a block's width of vectors. (64-byte pieces ran at 0.87 of copy,
    128-byte pieces at 0.97; H100, (1024, 64, 16, 16) over (0, 3).)"""
    if row_vectors > SLAB_BLOCK:
        return 1
    best = 1
    k1t = 1
    while k1t <= k1 and k1 % k1t == 0 and k1t * row_vectors <= SLAB_BLOCK:
        if k1t * row_vectors <= 8 or k2 * (k1 // k1t) >= SLAB_MIN_BLOCKS * sm_count // 2:
            best = k1t
        k1t *= 2
    return best
