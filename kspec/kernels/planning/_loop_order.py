"""The order of an elementwise loop's dims: merged where every operand allows, reordered for locality, the
sectors a warp of consecutive elements touches in each order (the strided entry's cost, to choose between them),
whether the tiled entry's planes in an order find the sectors they share still in the L2, the order that moves a
short inner dim out of the way of tiles over the two dims beyond it, how far apart in an order the elements of
one of an input's sectors lie, and whether the strided entry's runs of chunks pay in an order.

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
# Where C order's inner dim is short and a transposed operand's rows run along dim 2, short_dim_outward's order
# (tiles over C order's dims 1 and 2, the short dim outside them, in stacked steps: kspec/render/_variants.py)
# against the strided entry in C order and by_stride's narrow tiles (H200, fractions of a copy, benchmarks/NOTES.md
# v70): over 84 layouts 1.60x (geometric mean), float16 rows of 2 0.20-0.37 -> 0.60-0.67, float32 of 2 0.35-0.65 ->
# 0.78-1.22, of 3 0.36-0.41 -> 0.57-0.59, int8 of 2-8 0.11-0.31 -> 0.25-0.38; rows of 16 bytes went either way
# (float64 of 2 0.86-1.41x, float32 of 4 0.69-0.90x unstacked), longer ones lost (0.43-0.89x). From narrow tiles,
# float32 rows of 3 gained 1.49-1.63x, int8 rows of 6 1.06-1.47x, float16 rows of 6 went 0.84-1.06x (0.38 of a copy
# moved, 0.36-0.45 in tiles: still ahead of CuPy and PyTorch). Where a sector of the operand spans 128
# elements of C order's loop or fewer the strided entry's warps share it at one step (float32 (2048, 1024, 8, 2)
# 0.876 strided, 0.756 tiled; float16 (2048, 2048, 8, 2), 256 elements, 0.535 -> 0.629). Planes whose share of the
# outputs spans more than the L2 gain too (v71: float16 (4096, 4096, 2) fully reversed 0.200 -> 0.439, float32
# (2048, 2048, 3) 0.291 -> 0.608, int8 (4096, 4096, 4) 0.134 -> 0.366, over 14 such layouts of 48-128 MB).
MAX_ROW_BYTES = 12
# Rows of 16 bytes of 8-byte items (float64 rows of 2) move too, where the dim beyond them holds more than
# SECTOR_SHARED_SPAN elements of rows (H200, fractions of a copy, benchmarks/NOTES.md v75: float64 (8, 2048, 2048, 2)
# permuted (0, 3, 2, 1) 0.402 -> 0.972, (32, 128, 2048, 2) 0.678 -> 0.768); over fewer, by_stride's strided order
# writes each sector's halves from warps of one step (rows of 2 x 16-64: 0.93-0.97x moved). Float32 rows of 4 and
# float16 rows of 8 lost moved (0.49-0.75 against 0.57-0.86 in narrow tiles, stacked).
MAX_WIDE_ROW_BYTES = 16
SECTOR_SHARED_SPAN = 128
# By_stride's narrow tiles where they write the outputs across the loop (rows of 3-7 of a transpose (0, 3, 2, 1))
# against the strided entry in C order, for 4- and 8-byte items (H200, fractions of a copy, benchmarks/NOTES.md v71):
# where a sector of the transposed input spans at most this many elements of C order's loop the strided entry's
# blocks share it (float32 rows of 4 0.52-0.61 -> 0.61-0.64, of 5 0.535 -> 0.640; float64 rows of 4 0.86 -> 0.92-0.95,
# of 5 0.717 -> 0.850); beyond it the tiles win (float32 rows of 4 over 4,096 elements 0.613 against 0.394, of 6
# over 24,576 0.589 against 0.377; float64 rows of 6 over 3,072 0.835 against 0.751). Float64 rows of 3, 24 bytes
# that straddle sectors in the tiles' rows, run strided at any span measured (0.52-0.63 -> 0.75-0.96 up to 3,072).
STRIDED_SHARED_SPAN = 2048


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


def short_dim_outward(extents: Sequence[int], strides: Sequence[Sequence[int]], itemsizes: Sequence[int],
                      outputs: Sequence[bool]) -> tuple[list[int], list[list[int]]] | None:
    """C order (``extents`` outermost first) with its inner dim moved out to dim 2, where the outputs' rows along
    it hold at most MAX_ROW_BYTES (MAX_WIDE_ROW_BYTES of 8-byte items, whose dim 2 holds more than
    SECTOR_SHARED_SPAN elements of rows) and an operand is read along dim 2 (its smallest stride), so that tiles over
    the two dims beyond the short one read that operand in rows and write each plane's share of the outputs' rows
    (NCHW -> NHWC of 2-6 channels: a transpose (0, 3, 2, 1)); None where that does not pay: the strided entry in C
    order already shares that operand's sectors between the warps of a block's step (a sector's elements within
    SECTOR_SHARED_SPAN elements of the loop)."""
    out_itemsize = max((i for i, o in zip(itemsizes, outputs) if o), default=0)
    if len(extents) < 3 or not 0 < extents[-1] * out_itemsize <= MAX_WIDE_ROW_BYTES:
        return None
    wide_rows = extents[-1] * out_itemsize > MAX_ROW_BYTES
    if wide_rows and (out_itemsize < 8 or extents[-1] * extents[-3] <= SECTOR_SHARED_SPAN):
        return None
    inside = extents[-1] * extents[-2]  # C order's elements between neighbours along dim 2

    def read_along_dim2_apart(stride: Sequence[int], itemsize: int) -> bool:
        along, *rest = [abs(s) for s in stride[-3:]]
        rest = [a for a in rest if a]
        return bool(rest) and 0 < along < min(rest) and inside * max(1, SECTOR // itemsize) > SECTOR_SHARED_SPAN

    if not any(read_along_dim2_apart(s, i) for s, i in zip(strides, itemsizes)):
        return None
    order = [*range(len(extents) - 3), len(extents) - 1, len(extents) - 3, len(extents) - 2]
    return merge_dims([extents[a] for a in order], [[s[a] for a in order] for s in strides])


def _nearest_dim(stride: Sequence[int]) -> int | None:
    """The dim (outermost first) along which an operand's neighbours in memory lie: its smallest nonzero stride."""
    dims = [d for d, s in enumerate(stride) if s]
    return min(dims, key=lambda d: abs(stride[d])) if dims else None


def sector_span(extents: Sequence[int], strides: Sequence[Sequence[int]], outputs: Sequence[bool]) -> int:
    """The most elements of this order's loop between the first and the last element of one of an input's sectors
    (read along its nearest dim, a sector's elements lie that dim's inner extents apart): how far the strided entry
    must reach to read each sector once."""
    widest = 1
    for stride, output in zip(strides, outputs):
        dim = _nearest_dim(stride)
        if output or dim is None:
            continue
        per_sector = min(extents[dim], max(1, SECTOR // abs(stride[dim])))
        widest = max(widest, math.prod(extents[dim + 1:]) * per_sector)
    return widest


def runs_pay(itemsizes: Sequence[int]) -> bool:
    """Whether the strided entry's blocks take runs of chunks (where its outputs are written in the loop's order).
    The runs save 1- to 4-byte items the divisions that held them issue-bound (v68); 8-byte items lost with them on
    every layout measured (H200, fractions of a copy, benchmarks/NOTES.md v71: float64 (1024, 8, 64, 32) permuted
    (0, 3, 1, 2) 0.468 in runs, 0.857 without; (512, 64, 2048, 2) permuted (0, 1, 3, 2) 1.237, 1.304; 40 layouts, none
    lost)."""
    return max(itemsizes, default=1) < 8
