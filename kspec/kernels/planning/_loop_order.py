"""The order of an elementwise loop's dims: merged where every operand allows, reordered for locality, the
sectors a warp of consecutive elements touches in each order (the strided entry's cost, to choose between them),
and whether the tiled entry's planes in an order find the sectors they share still in the L2.

Pure Python, dims outermost first, byte strides (the planner's convention before it reverses them for the ABI).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

SECTOR = 32  # bytes of a memory sector
WARP = 32
OUTPUT_WEIGHT = 2  # an output's sectors count this many times: a partial sector written costs more than one read
# The bytes of an operand's sectors one plane of the tiled entry may touch and still find them in the L2 when the next
# planes read the same sectors again (H100 and H200 hold 50 MB), and how many planes may read each sector from memory
# where they do not fit
PLANE_CACHE_BYTES = 40 << 20
PLANE_REREADS = 4


def merge_dims(extents: Sequence[int], strides: Sequence[Sequence[int]]) -> tuple[list[int], list[list[int]]]:
    """Drop extent-1 axes and merge neighbours that are contiguous in every operand (C order in and out).

    ``strides`` holds one stride list per operand, aligned with ``extents``.
    """
    out_extents: list[int] = []
    out_strides: list[list[int]] = [[] for _ in strides]
    for axis, extent in enumerate(extents):
        if extent == 1:
            continue
        if out_extents and all(s[-1] == op[axis] * extent for s, op in zip(out_strides, strides)):
            out_extents[-1] *= extent
            for s, op in zip(out_strides, strides):
                s[-1] = op[axis]
            continue
        out_extents.append(extent)
        for s, op in zip(out_strides, strides):
            s.append(op[axis])
    return out_extents, out_strides


def by_stride(extents: Sequence[int], strides: Sequence[Sequence[int]]) -> tuple[list[int], list[list[int]]]:
    """Merged loop dims (outermost first) reordered for locality, NumPy's nditer's way: the innermost dim stays
    (the output's, for coalesced stores and the tiled entry's rows), the others go inner the smaller their
    smallest nonzero stride over the operands. An operand read along an outer dim (a transposed view whose rows
    are that dim) then has its neighbours in memory a row of the loop apart, not a plane: its sectors are read
    once while they are in cache, and the tiled entry sees it as transposed. Ties keep C order."""

    def smallest(axis: int) -> float:
        return min((abs(s[axis]) for s in strides if s[axis]), default=math.inf)

    order = [*sorted(range(len(extents) - 1), key=smallest, reverse=True), len(extents) - 1]
    if order == sorted(order):  # already in order (always, under 3 dims)
        return list(extents), [list(s) for s in strides]
    return merge_dims([extents[a] for a in order], [[s[a] for a in order] for s in strides])


def warp_sectors(extents: Sequence[int], strides: Sequence[Sequence[int]], outputs: Sequence[bool]) -> int:
    """The memory sectors the first warp of the strided entry touches (its 32 consecutive elements of the loop,
    bases aligned), summed over operands, an output's OUTPUT_WEIGHT times. Where the loop's innermost dim holds 32
    elements or more every order of the outer dims costs the same."""
    count = min(WARP, math.prod(extents))
    total = 0
    for stride, output in zip(strides, outputs):
        sectors = set()
        for i in range(count):
            offset, rem = 0, i
            for extent, s in zip(reversed(extents), reversed(stride)):
                rem, coordinate = divmod(rem, extent)
                offset += coordinate * s
            sectors.add(offset // SECTOR)
        total += len(sectors) * (OUTPUT_WEIGHT if output else 1)
    return total


def planes_reread_in_cache(extents: Sequence[int], strides: Sequence[Sequence[int]]) -> bool:
    """Whether the tiled entry over this order's two inner dims reads each operand's memory about once: an operand
    read along dim 1 (staged) whose outer dims have strides under a sector shares each sector with the next planes,
    which read it again; that stays in the L2 where a plane's footprint (its elements times the dim-1 stride) fits
    PLANE_CACHE_BYTES, else each of those planes reads it from memory, which costs more than the tiles save past
    PLANE_REREADS planes (H200, fractions of a copy: float32 (8, 256, 8192) fully reversed, 8 planes of a
    64 MB footprint, 0.367 strided -> 0.319 tiled; float32 (4, 1024, 4096), 4 planes, 0.372 -> 0.531; float16
    (8, 256, 8192), 32 MB, 0.218 -> 0.464: benchmarks/NOTES.md v69)."""
    if len(extents) < 3:
        return True
    plane = extents[-1] * extents[-2]
    for stride in strides:
        inner = abs(stride[-2])
        if not 0 < inner < abs(stride[-1]) or plane * inner <= PLANE_CACHE_BYTES:
            continue
        sharing = [min(extent, SECTOR // abs(s)) for extent, s in zip(extents[:-2], stride[:-2]) if 0 < abs(s) < SECTOR]
        if math.prod(sharing) > PLANE_REREADS:
            return False
    return True
