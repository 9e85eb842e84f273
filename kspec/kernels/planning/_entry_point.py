"""The launch of an elementwise plan: which of the module's entry points runs the loop, with what block and
grid width, by the planner's rules or by the knobs a tuning record gives the call's layout
(kspec/_plan_tuning.py names the knobs, kspec/kernels/planning/_tuned_knobs.py looks them up).

Pure Python and driver-free, like the plan (:mod:`._plan`), which calls it once per call signature.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from ..._named_tuple import NamedTuple
from ...render import (DYNAMIC_NDIM, NARROW_TILE, TILED_VARIANTS, Specialization, VariantKey, stacked_planes,
                       tiled_layout, tiled_variant)

# Grid of the strided grid-stride paths: blocks of 256 threads per SM (measured on the H200, see
# kspec/render/_abi.py).
GRID_STRIDE_BLOCKS_PER_SM = 16
# The contig entry's: 0, a thread per vector (the grid covers the loop, as CuPy launches a thread per element).
# From 2^24 elements on it moves 3-6% more than 16 blocks per SM striding over the loop (H200: float64
# (x-y)^2 over 2^28 4401 against 4167 GB/s, CuPy 4383; float32 4393 against 4149; benchmarks/NOTES.md v34); a
# tuning record's per_sm makes it a grid-stride grid again.
CONTIG_BLOCKS_PER_SM = 0
# The tiled entry (kspec/tile.cuh): blocks of TILE_THREADS over tiles of the two inner dims (32 x 32, 16 x 64,
# 64 x 16, or 8 x 128 / 4 x 256 where dim 0 has at most 8 / 4 elements: kspec.render.tiled_variant), used only when
# dim 1 is at least TILE_MIN_EXTENT and dim 0 too, or fits a narrow tile (thinner tiles would leave most of a block
# idle).
TILE_THREADS = 256
TILE_MIN_EXTENT = 16
TILED_MIN_FILL = 0.3  # the share of a step's slots that must hold elements (benchmarks/NOTES.md v28)
# ... and for the narrow tiles: at half full they lost to the strided entry, from 0.62 on they won (H200, fractions
# of a copy: float32 rows of 4 in 4 x 256 tiles 0.964 against 0.759 where dim 1 fills them, 0.511 against 0.570
# where it fills half; rows of 5 / 8 in 8 x 128 tiles 0.568 / 0.884 against 0.531 / 0.673: benchmarks/NOTES.md v64)
NARROW_MIN_FILL = 0.6
# ... unless the outputs are written in the loop's order: there the strided entry takes runs of chunks (v68), and a
# narrow tile short of full rows (3 of 4, 6 of 8) lost to it on every such 1- to 4-byte layout measured (H200,
# fractions of a copy: float32 (256, 256, 512, 3) permuted (0, 1, 3, 2) 0.758 against 0.934, float16 (1024, 512,
# 16, 6) permuted (0, 2, 3, 1) 0.504 against 0.659; 8-byte ones within 1.5%), while full rows (4 of 4, 8 of 8) and
# outputs written across the loop kept their tiles ahead (benchmarks/NOTES.md v69)
NARROW_FOLLOWED_MIN_FILL = 0.9

Tuning = Callable[[str], "Mapping[str, int] | None"]  # a layout label -> knobs (None: the rules)
_NO_KNOBS: Mapping[str, int] = MappingProxyType({})


class EntryChoice(NamedTuple):
    variant: VariantKey
    block: int
    per_sm: int  # blocks of 256 threads per SM a grid-stride grid aims at (contig: 0, a thread per vector)


def knobs_for(tuning: Tuning | None, cls: str, itemsize: int, extents: Sequence[int]) -> Mapping[str, int]:
    """The tuned knobs of a layout (outermost-first ``extents``), or none: the planner's rules."""
    if tuning is None:
        return _NO_KNOBS
    from ..._plan_tuning import layout_label  # only where a record is in use

    return tuning(layout_label(cls, itemsize, extents)) or _NO_KNOBS


def contig_choice(variant: VariantKey, block: int, block_given: bool, itemsize: int, size: int,
                  tuning: Tuning | None) -> EntryChoice:  # fmt: skip
    knobs = knobs_for(tuning, "contig", itemsize, (size,))
    return EntryChoice(variant, block if block_given else knobs.get("block", block),
                       knobs.get("per_sm", CONTIG_BLOCKS_PER_SM))  # fmt: skip


def strided_choice(specialization: Specialization, extents: Sequence[int], merged: Sequence[Sequence[int]],
                   variant: VariantKey, block: int, block_given: bool, fits32: bool, indexed: bool, inner_dense: bool,
                   itemsize: int, tuning: Tuning | None, allow_tiles: bool = True,
                   outputs_follow: bool = False) -> EntryChoice:  # fmt: skip
    """The entry of a strided loop (``extents`` and each operand's ``merged`` strides outermost first):
    ``variant`` (the strided entry of the loop's rank and index width), or, unless ``allow_tiles`` is false, the tiled
    entry where an operand is transposed and the tiles pay; a record's ``tile`` knob picks a tile width, or 0 for
    no tiles. ``outputs_follow``: every output is C-contiguous over this order of the loop."""
    tiles = (allow_tiles and not indexed and fits32 and TILED_VARIANTS[0] in specialization.variants and block == TILE_THREADS
             and _tiles_pay(extents, merged))  # fmt: skip
    cls = "indexed" if indexed else "tiled" if tiles else "dense" if inner_dense else "strided"
    knobs = knobs_for(tuning, cls, itemsize, extents)
    per_sm = knobs.get("per_sm", GRID_STRIDE_BLOCKS_PER_SM)
    if tiles:
        width = knobs.get("tile")
        if width is None:  # the rule: unless the planes are so small that most of a step's slots would idle
            span, inner_first = specialization.tile_span, extents[::-1]
            interleaved = stacked_planes([s[::-1] for s in merged], len(extents))
            tiled = tiled_variant(inner_first, span, interleaved)
            narrow = tiled.vec <= NARROW_TILE
            least = (NARROW_FOLLOWED_MIN_FILL if outputs_follow else NARROW_MIN_FILL) if narrow else TILED_MIN_FILL
            # judged by the unturned steps' fill: planes that fill steps only turned (batches of 40-60 x 17-60
            # planes) ran 0.4-0.8x as fast tiled as strided (H200, benchmarks/NOTES.md v75)
            unturned = tiled_variant(inner_first, span, interleaved, turn=False)
            if tiled_layout(unturned, span, inner_first, interleaved, turn=False)[1] >= least:
                return EntryChoice(tiled, TILE_THREADS, per_sm)
        elif (tiled := VariantKey("tiled", "int32", DYNAMIC_NDIM, width)) in TILED_VARIANTS:
            return EntryChoice(tiled, TILE_THREADS, per_sm)
    return EntryChoice(variant, block if block_given else knobs.get("block", block), per_sm)


def staged(strides: Sequence[int]) -> bool:
    """Whether the tiled entry stages an operand through shared memory (``strides`` merged, outermost first):
    its stride along loop dim 1 is nonzero and smaller than along dim 0 (a transposed view). The rule of
    elementwise.cu.j2's tiled entry, which decides it for itself; the plan uses it only to pick the entry."""
    return len(strides) >= 2 and strides[-2] != 0 and abs(strides[-2]) < abs(strides[-1])


def _tiles_pay(extents: Sequence[int], merged: Sequence[Sequence[int]]) -> bool:
    """The tiled entry beats the strided one: some operand is staged (an operand read across its rows makes
    each warp of the strided entry touch 32 rows: 0.38 of copy, benchmarks/NOTES.md) and the two inner dims
    are wide enough for tiles."""
    return (
        len(extents) >= 2
        and (extents[-1] >= TILE_MIN_EXTENT or extents[-1] <= NARROW_TILE)
        and extents[-2] >= TILE_MIN_EXTENT
        and any(staged(s) for s in merged)
    )
