"""Launch variants: the template instantiations one rendered module holds, and their name expressions.

One module per specialization serves every call shape (a precompiled wheel never compiles at run time):
ndim, contiguity, vector width and index width are template arguments of a few entry points, each
instantiation reached through an NVRTC name expression.

Elementwise entries (``V`` = :attr:`Specialization.vec`):

==========================  ==========================================================================
``<name>__contig<I, V>``     every non-raw array operand C-contiguous over the loop shape: ``p[i]``;
                             V elements per load/store when they are all 16-byte aligned (checked inside)
``<name>__strided<I, N>``    any strides: N = 1..4 dims known at compile time, or N = 0 (runtime, <= 16)
``<name>__tiled<I, N>``      any strides, >= 2 dims; operands whose smallest stride is along dim 1
                             (transposed) go through shared-memory tiles so every access is coalesced
==========================  ==========================================================================

An elementwise module whose body uses CuPy's n-d indexer (``_ind.get()``, ``_raw_<operand>``:
:attr:`Specialization.indexed`) holds only ``<name>__strided<I, N>``, from templates/elementwise_indexed.cu.j2:
the loop's dims as CuPy's kernel sees them, each element's n-d index unravelled before its body
(:func:`indexed_variants`).

Reduction entries (``R`` = how the reduced dims are addressed: 1 = one reduced dim with any stride,
0 = runtime number of reduced dims; ``v`` = V: vector loads on the rows that are contiguous and 16-byte
aligned, checked inside):

==============================  ==========================================================================
``<name>__rows<I, R, v>``       a group of lanes per row segment (a power of two <= 32, or the whole
                                block): long rows, short rows, and pass 1 of the split reduction
``<name>__cols<I, R, v>``       32 consecutive outputs per block, warps split the row: reduced axis outer
                                in memory (``axis=0`` of a C-contiguous matrix); R = 0 comes with v = 1 and
                                v = V (32 x V outputs per block where the layout allows)
``<name>__pieces<I, 0, V>``     two reduced dims, the inner one a contiguous piece shorter than a vector
                                (V > 1 only): a lane per VEC / P adjacent outputs, one load per row
``<name>__slab<int, 0, v>``     C-contiguous layouts of two reduced dims in the planner's canonical form
                                (kspec/kernels/planning/_reduction_slab.py): a block per tile and chunk, 32-bit
``<name>__split_final<I>``      pass 2 of the split reduction: partials -> outputs (no atomics)
``<name>__slab_final<int>``     pass 2 of the slab's split: its partials, chunk-major, -> outputs
==============================  ==========================================================================

``I`` is ``int`` or ``long long`` (:data:`INDEX_C_TYPES`). How the launcher picks one is written down in
``kspec/render/_abi.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Literal

from ._record import OrderedRecord, assign

IndexType = Literal["int32", "int64"]
Entry = Literal["contig", "strided", "dense", "tiled", "rows", "cols", "pieces", "slab", "split_final", "slab_final"]

INDEX_C_TYPES: dict[str, str] = {"int32": "int", "int64": "long long"}

# NDIM / RNDIM template argument meaning "rank known only at run time" (up to MAX_NDIM dims).
DYNAMIC_NDIM = 0
MAX_NDIM = 16  # KSPEC_MAX_NDIM of templates/include/kspec/indexer.cuh

# Byte width of one vector load/store of the contiguous fast paths.
VECTOR_BYTES = 16

# The tiled elementwise entry (templates/include/kspec/tile.cuh): tiles of TILE * TILE elements, TILE_WARPS
# warps per block, `tile_span` tiles per block step (tiled_step, tiled_layout), one static shared-memory tile
# (a padded TILE * TILE elements) per array operand and tile. A module holds the entry only when those tiles
# fit in TILE_SMEM_LIMIT bytes (static shared memory stops at 48 KiB; below it, blocks of 256 threads keep 5+
# blocks per SM).
TILE = 32
TILE_WARPS = 8
TILE_SMEM_LIMIT = 40 * 1024
# Tiles of TILE * TILE elements, TILE_WIDTHS wide along dim 0: 32, or 16 / 64 where dim 0 / dim 1 is short
# (16 elements: a 32 x 32 tile would leave half its lanes idle), or 8 / 4 where dim 0 has at most that many (the 8
# channels of (512, 128, 64, 8) permuted (0, 3, 2, 1), the 4 of NCHW -> NHWC); ``vec`` of a tiled VariantKey is the
# width. A first call compiles only the variant it launches: a width costs NVRTC time in full builds only.
NARROW_TILE = 8
# Where an operand's stride along dim 2 is under a memory sector (kspec/tile.cuh's KSPEC_TILE_STACK_BYTES) and dim
# 2 holds at least a step's tiles, the tiled entry's steps stack tiles of consecutive planes at one position: an
# output's short rows along dim 2 then have every sector whole by the end of a step (H200, fractions of a copy:
# float32 (2048, 2048, 4) fully reversed, its rows of 4 moved outward, 0.248 -> 0.497; float32 (32, 2048, 1024, 2)
# permuted (0, 3, 2, 1) 0.887 -> 1.22: benchmarks/NOTES.md v70; with no cap on dim 2 (v75, 8 before), rows of 4-8
# at dim 0 interleaved along a long dim 2: float32 (32, 1024, 1024, 4) permuted (0, 3, 2, 1) 0.551 -> 0.863, float16
# (8, 2048, 1024, 8) 0.340 -> 0.507, 44 layouts 1.02-1.73x). Fewer planes than a step's tiles lose (float16 rows of
# 2 stacked two to a step of four tiles 0.58-0.65 -> 0.36-0.38), so they stay side by side.
TILE_STACK_BYTES = 32
TILE_WIDTHS = (32, 16, 64, NARROW_TILE, 4)
SHAPED_TILE_GAIN = 1.25
# a row's elements in shared memory per tile width: padded so that a warp's accesses fall in different banks
# (8 and 4 wide: swizzled instead, templates/include/kspec/tile.cuh)
_TILE_ROW = {16: 17, 32: 33, 64: 66, 8: 8, 4: 4}
# A block step takes TILE_SPANS[i] tiles where the largest operand has at most SPAN_ITEMSIZES[i] bytes and their
# tiles fit: each step costs a few hundred instructions per warp (its coordinates, divisions, a block's start),
# spread over more elements for narrow types, whose tiles move fewer bytes (benchmarks/NOTES.md v28).
SPAN_ITEMSIZES = (2, 4)
TILE_SPANS = (4, 2)


# the elements of the largest tile in shared memory, rows padded: any width's tile fits in that
_TILE_MOST = max(TILE * TILE // width * row for width, row in _TILE_ROW.items())


def _one_span_bytes(itemsizes: list[int]) -> int:
    return sum(_TILE_MOST * size for size in itemsizes)


def tile_span(itemsizes: list[int]) -> int:
    """Tiles per block step of the tiled entry, for array operands of these item sizes."""
    widest = max(itemsizes, default=0)
    for limit, span in zip(SPAN_ITEMSIZES, TILE_SPANS):
        if widest <= limit and span * _one_span_bytes(itemsizes) <= TILE_SMEM_LIMIT:
            return span
    return 1


def tile_bytes(itemsizes: list[int]) -> int:
    """Static shared memory of the tiled entry for array operands of these item sizes."""
    return tile_span(itemsizes) * _one_span_bytes(itemsizes)


class VariantKey(OrderedRecord):
    """One launch variant of a rendered module.

    ``ndim``: elementwise ``strided``: a static rank (the templates take any; the module instantiates 2), or
    0 for a runtime rank; reductions: 1 = one reduced dim, 0 = a runtime number of reduced dims; ``contig``
    and ``split_final``: always 0 (unused).
    ``vec``: elements per vector load (1 = scalar loads); ``tiled``: the tile's width along dim 0 (TILE_WIDTHS).
    """

    # A record, not a NamedTuple (its field ``index`` is a tuple method) nor a dataclass (import cost:
    # kspec/render/_record.py). Equal, hashed and ordered by (entry, index, ndim, vec).
    __slots__ = ("entry", "index", "ndim", "vec")
    entry: Entry
    index: IndexType
    ndim: int
    vec: int

    def __init__(self, entry: Entry, index: IndexType, ndim: int = 0, vec: int = 1) -> None:
        assign(self, "entry", entry)
        assign(self, "index", index)
        assign(self, "ndim", ndim)
        assign(self, "vec", vec)
        assign(self, "_values", (entry, index, ndim, vec))

    @property
    def index_c_type(self) -> str:
        return INDEX_C_TYPES[self.index]

    @property
    def text(self) -> str:
        """``entry/index/ndim/vec``, as a spec file's ``variants`` and a build's manifest spell it."""
        from ..spec import variant_text  # the one spelling (kspec/spec/_specializations.py)

        return variant_text(self._values)


TILED_VARIANTS = tuple(VariantKey("tiled", "int32", DYNAMIC_NDIM, width) for width in TILE_WIDTHS)


def tiled_step(variant: VariantKey, span: int, extents: Sequence[int], turn: bool = True) -> tuple[int, int]:
    """The elements a block step of the tiled entry covers along dims 0 and 1 of a loop of ``extents`` (innermost
    first): ``span`` tiles side by side, along dim 0 (along dim 1 for tiles narrower than TILE: 16, 8 and 4 wide,
    64, 128 and 256 high), or the other way where the default pads the plane SHAPED_TILE_GAIN times as much (a dim
    0 of one tile's width under a long dim 1; kspec/tile.cuh's step_along_dim1 decides the same way, its margin
    written 5 / 4; ``turn`` False: never the other way)."""
    width = variant.vec
    height = TILE * TILE // width
    e0, e1 = extents[0], extents[1]
    along0 = -(-e0 // (width * span)) * width * span * -(-e1 // height) * height
    along1 = -(-e0 // width) * width * -(-e1 // (height * span)) * height * span
    default_dim1 = width < TILE
    turned = turn and (along1 > SHAPED_TILE_GAIN * along0 if default_dim1 else along0 > SHAPED_TILE_GAIN * along1)
    return (width, height * span) if default_dim1 != turned else (width * span, height)


def stacked_planes(strides: Sequence[Sequence[int]], ndim: int) -> bool:
    """Whether an operand (``strides``: each one's byte strides, innermost first) interleaves the planes of the
    tiled entry's dim 2 within a memory sector, 0 < |stride[2]| < TILE_STACK_BYTES: the case for stacked steps
    (tiled_layout; elementwise.cu.j2's ``_interleaved`` decides the same way)."""
    return ndim > 2 and any(0 < abs(s[2]) < TILE_STACK_BYTES for s in strides)


def tiled_layout(variant: VariantKey, span: int, extents: Sequence[int], interleaved: bool = False,
                 turn: bool = True) -> tuple[int, float]:  # fmt: skip
    """(block steps, the share of their slots that hold elements) of the tiled entry over a loop of ``extents``
    (innermost first). Planes of at most one tile, or a dim 2 of ``span`` elements or more that an operand
    interleaves (``interleaved``: stacked_planes), take steps of a tile at one position of ``span`` consecutive
    planes along dim 2 (elementwise.cu.j2's ``_planes``: the kernel decides the same way), others steps of
    ``span`` tiles side by side (tiled_step; ``turn`` passed to it)."""
    e0, e1 = extents[0], extents[1]
    width = variant.vec
    height = TILE * TILE // width
    planes = math.prod(extents[2:])
    if len(extents) > 2 and ((span > 1 and e0 <= width and e1 <= height)
                             or (interleaved and span <= extents[2])):  # fmt: skip
        groups = -(-extents[2] // span)
        n0, n1 = -(-e0 // width), -(-e1 // height)
        steps = planes // extents[2] * groups * n0 * n1
        return steps, e0 * e1 / (n0 * width * n1 * height) * extents[2] / (groups * span)
    s0, s1 = tiled_step(variant, span, extents, turn)
    n0, n1 = -(-e0 // s0), -(-e1 // s1)
    return planes * n0 * n1, e0 * e1 / (n0 * s0 * n1 * s1)


def tiled_variant(extents: Sequence[int], span: int, interleaved: bool = False, turn: bool = True) -> VariantKey:
    """The tiled entry for a loop of ``extents`` (innermost first) and steps of ``span`` tiles: the narrowest
    of the tiles 4 and 8 wide that holds dim 0 where it has at most 8 elements (a row in one tile; 16-wide tiles
    there ran at 0.6-0.75x their speed, H200: benchmarks/NOTES.md v64), else 32 x 32 tiles, unless tiles 16 or 64
    wide leave SHAPED_TILE_GAIN times fewer slots of the steps idle (a dim 0 or dim 1 of 16-48): their rows of 16
    elements coalesce less, so they must win clearly. Widths are weighed with their steps unturned (tiled_step);
    with ``turn``, 16-wide tiles turned along dim 0 then replace 32 x 32 ones they beat by as much (float16 (3917,
    84, 51) permuted (0, 2, 1) 0.44 -> 0.58 of a copy, int8 (5593, 50, 60) 0.22 -> 0.38; weighed against 64-wide
    tiles or against 32-wide ones turned they lost 1-10%: H200, benchmarks/NOTES.md v75)."""
    if extents[0] <= NARROW_TILE:  # the narrowest tile that holds a row
        return min((v for v in TILED_VARIANTS if v.vec >= extents[0]), key=lambda v: v.vec)
    square, sixteen = TILED_VARIANTS[0], TILED_VARIANTS[1]
    fill = {v: tiled_layout(v, span, extents, interleaved, turn=False)[1] for v in TILED_VARIANTS if v.vec > NARROW_TILE}
    best = max(fill, key=fill.__getitem__)  # the first (32 wide) on a tie
    chosen = best if fill[best] >= SHAPED_TILE_GAIN * fill[square] else square
    if turn and chosen == square and tiled_layout(sixteen, span, extents, interleaved)[1] >= SHAPED_TILE_GAIN * fill[square]:
        return sixteen
    return chosen


@lru_cache(maxsize=None)  # the same few tuples for every kernel: made once, not per call
def elementwise_variants(vec: int, tiled: bool = False, contiguous: bool = False) -> tuple[VariantKey, ...]:
    """The instantiations of an elementwise module, trimmed for NVRTC time.

    Every instantiation costs ~10 ms of NVRTC time however small it is, and the float32 module must
    compile in under 100 ms cold, so: one contiguous entry, 64-bit (it divides nothing, so 32-bit indexing
    would save nothing) and vectorised when the dtypes allow (it checks alignment itself and falls back to
    scalar loads); the strided path in 32-bit with 2 static dims (broadcast rows/columns, transposes: the
    common strided case) and a runtime rank; a 64-bit runtime-rank fallback for launches beyond 2**31.
    The templates take any (IndexT, NDIM, VEC); only this list is compiled. ``tiled`` adds the tiled entry
    (32-bit, runtime rank: its per-element work does not depend on the rank, so one instantiation serves
    2-d and n-d loops) for modules that can hold it (see :attr:`Specialization.variants`). ``contiguous`` (a
    spec's ``layouts = "contiguous"``: its calls pass C-contiguous arrays): the contiguous entry and the 64-bit
    runtime-rank strided one only, which serves any other layout correctly.
    """
    if contiguous:
        return (VariantKey("contig", "int64", 0, vec), VariantKey("strided", "int64", DYNAMIC_NDIM, 1))
    variants = (
        VariantKey("contig", "int64", 0, vec),
        VariantKey("strided", "int32", 2, 1),
        VariantKey("strided", "int32", DYNAMIC_NDIM, 1),
        VariantKey("strided", "int64", DYNAMIC_NDIM, 1),
    )
    return (*variants, *TILED_VARIANTS) if tiled else variants


@lru_cache(maxsize=None)
def indexed_variants(dense: bool = False) -> tuple[VariantKey, ...]:
    """The instantiations of an indexed elementwise module (:attr:`Specialization.indexed`): the strided entry,
    with 1, 2 or 3 static dims (the n-d index then lives in registers; these are the ranks of the
    ndimage-style kernels that ask for it, and 1 is every loop that CuPy's ``reduce_dims`` merges whole) and a
    runtime rank, each 32-bit and 64-bit. The 64-bit static ranks serve loops past 2**31 bytes (an ndimage
    volume of 4 GiB): with a runtime rank the index and each ``_raw_<name>`` view are arrays of KSPEC_MAX_NDIM
    entries indexed at run time, held in local memory and written per element (one thread an element):
    correlate1d over a (1026, 1024, 1024) float32 volume moved ~20x its bytes through DRAM and ran at 47 GB/s
    (H100; CuPy 1,060). ``dense``: the body reads no n-d index, and the module holds the dense entry too, over
    the same ranks (the planner launches it where every array operand is C-contiguous over the loop). A first call
    compiles only the variant it launches (:func:`kspec.compiler.variant_program`)."""
    return tuple(
        VariantKey(entry, index, ndim, 1)
        for entry in (("strided", "dense") if dense else ("strided",))
        for index in ("int32", "int64")
        for ndim in (1, 2, 3, DYNAMIC_NDIM)
    )


def stand_in(variant: VariantKey) -> VariantKey | None:
    """The variant whose entry point may serve ``variant``'s launches, or None: an indexed module's dense entry and
    its strided one of the same rank and index width take the same parameters, and the strided one is right for
    every layout (a store built from a capture made before dense entries holds the strided one alone)."""
    return VariantKey("strided", variant.index, variant.ndim, variant.vec) if variant.entry == "dense" else None


@lru_cache(maxsize=None)
def reduction_variants(vec: int) -> tuple[VariantKey, ...]:
    """The instantiations of a reduction module: 64-bit only (their inner loops divide nothing: two
    reduced dims split their index with a multiply-shift, more unravel; each reduction instantiation costs
    ~30 ms of NVRTC time); the rows entries vectorise by themselves when a row allows it. cols has its own
    one-reduced-dim instantiation (axis=0 of a matrix): the runtime-rank one (axes (0, 2) of a 4-d array)
    needs more registers, which cost the one-dim case a quarter of its bandwidth when it served both. With
    ``vec`` > 1 the runtime-rank one comes twice: scalar lanes (VEC = 1: its vectorised branch compiles out)
    and lanes of VEC adjacent outputs, which the planner takes only where their tiles fill the device
    (kspec/kernels/planning/_reduction_cols.py, ``_cols_launch``), and so does the pieces entry, whose lanes load
    VEC elements holding several outputs' pieces (kspec/kernels/planning/_reduction_pieces.py). The slab entry
    is 32-bit: C-contiguous layouts below 2**31 elements, where the 64-bit index arithmetic was a large part of
    a block's fixed cost; so is slab_final, the second pass of its split. The vectorised cols entry comes in 32 bits
    too, last (the planner's searches take the 64-bit one, then narrow an unsplit launch whose offsets fit: a segment's
    work outside the inner loop was ~700 instructions a warp in 64 bits, ~520 in 32; benchmarks/NOTES.md v74)."""
    vectorised = (VariantKey("cols", "int64", DYNAMIC_NDIM, vec), VariantKey("pieces", "int64", DYNAMIC_NDIM, vec))
    return (
        VariantKey("rows", "int64", 1, vec),
        VariantKey("rows", "int64", DYNAMIC_NDIM, vec),
        VariantKey("cols", "int64", 1, 1),
        VariantKey("cols", "int64", DYNAMIC_NDIM, 1),
        *(vectorised if vec > 1 else ()),
        VariantKey("slab", "int32", DYNAMIC_NDIM, vec),
        VariantKey("split_final", "int64", 0, 1),
        VariantKey("slab_final", "int32", 0, 1),
        *((VariantKey("cols", "int32", DYNAMIC_NDIM, vec),) if vec > 1 else ()),
    )


def module_variant(variants: Sequence[VariantKey], captured: VariantKey) -> VariantKey | None:
    """The variant of a module (its ``variants``) that a captured launch variant names: itself, else the one of the
    same entry, index type and rank, another vector width (a capture by a kspec whose module had other vectors for
    this kernel: what a call takes now), else None. A tiled variant's width is its tile's, which a call picks by
    its extents: only itself."""
    if captured in variants or captured.entry == "tiled":
        return captured if captured in variants else None
    return next((v for v in variants if (v.entry, v.index, v.ndim) == (captured.entry, captured.index, captured.ndim)), None)


def name_expression(kernel: str, variant: VariantKey) -> str:
    """The NVRTC name expression of ``variant`` in the module of kernel ``kernel``."""
    it = variant.index_c_type
    entry = variant.entry
    if entry == "contig":
        args = f"{it}, {variant.vec}"
    elif entry in ("strided", "dense"):
        args = f"{it}, {variant.ndim}"
    elif entry == "tiled":
        args = f"{it}, {variant.ndim}, {variant.vec}"
    elif entry in ("rows", "cols", "pieces", "slab"):
        args = f"{it}, {variant.ndim}, {variant.vec}"
    else:
        args = it
    return f"{kernel}__{entry}<{args}>"
