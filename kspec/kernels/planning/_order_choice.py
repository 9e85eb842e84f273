"""Which order of an elementwise loop runs it: by_stride's (a transposed operand's rows next to the inner dim, for
the tiled entry), or C order, or C order with its short inner dim moved outward, where by_stride's order leaves the
loop strided or in narrow tiles of its short inner dim.

Pure Python, dims outermost first (the planner's convention, :mod:`._loop_order`); the plan (:mod:`._plan`) passes
its entry choice for an order, so that each order here is judged by the entry that would run it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...render import NARROW_TILE
from ._entry_point import EntryChoice
from ._loop_order import (SECTOR, STRIDED_SHARED_SPAN, planes_reread_in_cache, sector_span, short_dim_outward,
                          warp_sectors)

Loop = tuple[Sequence[int], Sequence[Sequence[int]]]  # extents and each operand's strides, outermost first
Entry = Callable[..., tuple[EntryChoice, bool]]  # (extents, strides, tiles=True) -> (entry, inner_dense)


def other_order(taken: Loop, choice: EntryChoice, in_order: Loop, entry: Entry,
                outputs_follow: Callable[[Sequence[int], Sequence[Sequence[int]]], bool],
                itemsizes: Sequence[int], outputs: Sequence[bool]) -> tuple[Loop, tuple[EntryChoice, bool], bool] | None:  # fmt: skip
    """The order and its entry that beat by_stride's (``taken``, run by ``choice``) from C order (``in_order``),
    and whether the strided entry may still take runs of chunks there where the items allow (``runs_pay``); None
    where by_stride's order stays."""
    strided = choice.variant.entry == "strided"
    narrow_tiles = choice.variant.entry == "tiled" and choice.variant.vec <= NARROW_TILE
    if not (strided or narrow_tiles):
        return None
    if strided and (in_c_order := entry(*in_order))[0].variant.entry == "tiled" \
            and in_c_order[0].variant.vec > NARROW_TILE and planes_reread_in_cache(*in_order):  # fmt: skip
        # no tiles in by_stride's order (a dim of it too short), whole ones in C order: float16 (64, 8, 1024, 64)
        # permuted (0, 3, 2, 1) 0.320 -> 0.568 of a copy, float32 0.637 -> 0.752 (H200, benchmarks/NOTES.md v69)
        return in_order, in_c_order, True
    follow = outputs_follow(*in_order)
    if strided and follow and _c_order_shares_sectors(in_order, itemsizes, outputs):
        return in_order, entry(*in_order, tiles=False), True
    moved = short_dim_outward(*in_order, itemsizes, outputs) if follow else None
    if moved is not None and (in_moved := entry(*moved))[0].variant.entry == "tiled":
        # C order's short inner dim outside tiles over the next two (NCHW -> NHWC of a few channels): float16
        # (2048, 2048, 4) fully reversed 0.235 -> 0.507 of a copy, int8 (8, 1024, 1024, 4) permuted (0, 3, 2, 1)
        # 0.147 -> 0.367 (H200, benchmarks/NOTES.md v70)
        return moved, in_moved, True
    if narrow_tiles and follow and _strided_shares_sectors(taken, in_order, outputs_follow, itemsizes, outputs):
        # float64 (2048, 1024, 8, 3) permuted (0, 3, 2, 1) 0.623 -> 0.959 of a copy, float32 (512, 512, 16, 4)
        # 0.522 -> 0.636, without runs (float32 in runs: 0.599; H200, benchmarks/NOTES.md v71)
        return in_order, entry(*in_order, tiles=False), False
    if strided and warp_sectors(*in_order, outputs) < warp_sectors(*taken, outputs):
        # C order can leave the outputs' warps far fewer sectors (float32 (2048, 1024, 8, 2) permuted (0, 3, 2,
        # 1): a store of 16 sectors a warp in by_stride's order, 4 in C order)
        return in_order, entry(*in_order, tiles=False), True  # strided still: C order's tiles are untried
    return None


def _strided_shares_sectors(taken: Loop, in_order: Loop,
                            outputs_follow: Callable[[Sequence[int], Sequence[Sequence[int]]], bool],
                            itemsizes: Sequence[int], outputs: Sequence[bool]) -> bool:  # fmt: skip
    """Whether the strided entry in C order beats by_stride's narrow tiles that write the outputs across the loop
    in rows shorter than the widest narrow tile (rows of 8 fill theirs, and kept them ahead: float64 (256, 1024, 16,
    8) permuted (0, 3, 2, 1) 1.009 of a copy tiled, 0.928 strided; float32 (512, 256, 16, 8) 0.859, 0.646): for 4-
    and 8-byte items where the transposed input's sectors lie within STRIDED_SHARED_SPAN elements of C order's loop,
    or for 8-byte rows that straddle sectors (rows of 3)."""
    widest = max(itemsizes, default=1)
    rows = in_order[0][-1]
    if widest < 4 or rows >= NARROW_TILE or outputs_follow(*taken):
        return False
    return sector_span(*in_order, outputs) <= STRIDED_SHARED_SPAN or (widest >= 8 and rows * widest < SECTOR)


def _c_order_shares_sectors(in_order: Loop, itemsizes: Sequence[int], outputs: Sequence[bool]) -> bool:
    """Whether the strided entry in C order (CuPy's) beats by_stride's strided order for rows of 8-byte items shorter
    than a sector: C order's warps write whole sectors and share the transposed input's where they lie within
    STRIDED_SHARED_SPAN elements of its loop (H200, fractions of a copy, benchmarks/NOTES.md v75: float64 (2048, 512,
    32, 2) permuted (0, 3, 2, 1), 256 elements, 0.645 -> 1.269; (256, 2048, 128, 2), 1,024, 0.561 -> 1.168; rows of
    3 (2048, 128, 32, 3) 0.612 -> 0.941; from 2,048 elements short_dim_outward's order wins; rows of 4 and 8 lost
    there, 0.92-0.95x)."""
    widest = max(itemsizes, default=1)
    rows = in_order[0][-1]
    return widest >= 8 and rows * widest < SECTOR and sector_span(*in_order, outputs) < STRIDED_SHARED_SPAN
