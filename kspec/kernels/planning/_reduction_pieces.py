"""The pieces strategy of a ReductionKernel call: each output reduces a short contiguous piece (the innermost
reduced dim, fewer elements than the module's vector) of each of several rows far apart, the outputs' pieces
adjacent in memory: axes (0, 3) of (8, 1024, 1024, 2), 2^20 outputs each summing 8 pairs 8 MB apart. Pure
Python and driver-free, like the plan; ``reduction_strategy`` (:mod:`._reduction_strategy`) chooses it.

The pieces entry (templates/reduction/pieces.cu.j2) runs it in one pass: a lane
loads the pieces of VEC / P adjacent outputs as one 16-byte vector per outer row and merges each output's P
partials in registers. The rows entry read those pieces 8 bytes a lane, far apart, and the fold
(:mod:`._reduction_fold`) writes P partials per output and merges them in a second pass: it keeps the layouts
whose outputs are too few for a warp per tile to fill the device.
"""

from __future__ import annotations

from typing import Callable

from ...render import DYNAMIC_NDIM, VariantKey
from ._plan import MAX_GRID
from ._reduction_cols import COLS_RUNTIME_RANK_WARPS
from ._reduction_passes import Pass, Strategy
from ._reduction_plan import ReductionPlan

# Tiles (a warp's 32 * VEC / P outputs) per SM the layout must give, at least: the path is unsplit, a warp per
# tile walking its rows alone, so fewer tiles leave the device idle; the fold or the rows entry take those. L2
# norm, fraction of a copy, H200, fold -> pieces: float32 (256, 131072, 2) over (0, 2), 15.5 tiles per SM, 0.899
# -> 0.998; float16 (128, 262144, 2) 0.714 -> 0.935; at 7.8 per SM it lost, float32 (512, 65536, 2) 0.941 ->
# 0.868, (8, 16, 65536, 2) over (0, 1, 3) 0.806 -> 0.759.
PIECES_MIN_TILES_PER_SM = 12
# Threads per block where no block is asked for: 128 beat 256 and 512 on every layout tried (float32 (8, 1024,
# 1024, 2) over (0, 3): 0.742 / 0.791 / 0.818 of copy for 512 / 256 / 128; float16 (8, 2048, 2048, 4) 0.807 /
# 0.841 / 0.875).
PIECES_BLOCK = 128


def pieces_variant(plan: ReductionPlan) -> VariantKey | None:
    """The module's pieces entry where ``plan``'s layout is one it takes (kspec/render/_abi.py: the entry
    relies on these checks; it checks the pointers' alignment itself), else None."""
    spec = plan.specialization.spec
    if len(plan.red) != 2 or plan.rndim == 1 or not plan.kept or plan.raw or any(p.raw for p in spec.params):
        return None
    wide = next((v for v in plan.specialization.variants if v.entry == "pieces" and v.ndim == DYNAMIC_NDIM), None)
    piece = plan.red[0]
    if wide is None or not 1 < piece < wide.vec or wide.vec % piece or plan.kept[0] % (wide.vec // piece):
        return None  # (vec is a power of two, so is a piece dividing it)
    items = {op.name: op.itemsize for op in plan.specialization.operands if op.is_array and not op.is_output}
    if not items:
        return None
    for name, (kept, red) in plan.in_strides.items():
        item = items[name]
        if red[0] != item or kept[0] != piece * item:
            return None
        if red[1] % 16 or any(k % 16 for k in kept[1:]):
            return None  # rows the entry would read element by element: the fold's or the rows entry's
    return wide


def pieces_strategy(plan: ReductionPlan, sm_count: int, block: int | None,
                    max_threads: Callable[[VariantKey], int] | None) -> Strategy | None:
    """One launch of the pieces entry for ``plan`` where the layout takes it and its tiles fill the device,
    else None. A warp per tile; blocks of ``block`` threads (None: PIECES_BLOCK), fewer where the entry's
    registers allow fewer."""
    wide = pieces_variant(plan)
    if wide is None:
        return None
    tiles = -(-plan.out_size // (32 * (wide.vec // plan.red[0])))
    if tiles < PIECES_MIN_TILES_PER_SM * sm_count:
        return None
    warps = min(max(1, (block or PIECES_BLOCK) // 32), COLS_RUNTIME_RANK_WARPS)
    if max_threads is not None and (most := max_threads(wide)) > 0:
        warps = min(warps, max(1, most // 32))
    grid = max(1, min(-(-tiles // warps), MAX_GRID))
    return Strategy((Pass(wide, grid, 32 * warps, chunk=plan.red_size),), kind="pieces")
