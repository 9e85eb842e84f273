"""The launch ABI of rendered modules: what each entry point takes, byte for byte, and how to pick one.

The launcher packs arguments from this data and never parses C. Every variant of a rendered module has an
:class:`EntryAbi`: an ordered tuple of :class:`Slot` (one kernel parameter each) with the exact C layout
of each (a :class:`kspec.render._layout.Layout`: fields, offsets, size, alignment, and a NumPy dtype that
reproduces it), and the offsets of the slots in the kernel-parameter buffer (C rules: each slot at the next
multiple of its alignment; the form ``cuLaunchKernel``'s ``CU_LAUNCH_PARAM_BUFFER_POINTER`` takes).
``tests/test_render_abi`` compiles static_asserts of every offset and checks the PTX parameter list against
these numbers. Each slot kind's C type and fields, and the conventions of the index structs (dims innermost
first, strides in bytes), are in :mod:`kspec.render._layout`.

Entry points and their slots, parameters in declaration order (inputs, then outputs):

* elementwise ``contig<I, VEC>``: size; then per parameter: array (non-raw array), scalar, raw_view.
* elementwise ``strided<I, NDIM>`` and ``tiled<I, NDIM>``: shape; then strided_array / scalar / raw_view.
* reduction ``rows<I, R, VEC>``: reduce_shape, group; inputs: reduce_array / scalar / raw_view; outputs:
  strided_array with NDIM 0 (strides over the kept dims) / raw_view; workspace.
* reduction ``cols<I, R, v>``: reduce_shape; inputs and outputs as rows (no group); workspace.
* reduction ``slab<int, 0, VEC>``: as rows (``group``: 0 for its "cols" form, else the outputs per tile).
* reduction ``slab_final<int>``: as split_final. It reads the partials of a slab split: partial s of output o
  at ``s * out_size + o`` (chunk-major: a slab block's writes are adjacent). On the CPU device the slab pass
  writes the rows layout and slab_final reads that: the layout is private to the pair.
* reduction ``split_final<I>``: reduce_shape (R = 1; only out_size, red_size and the kept dims are read);
  scalar and raw inputs only (it reads the workspace, not the array inputs); outputs as rows; workspace.

The module's variants (:mod:`kspec.render._variants`) are a trimmed set of instantiations: today contig is
int64 only, strided is int32 with NDIM 2 or 0 plus int64 with NDIM 0, reductions are int64 only (rows
with R 1 or 0; cols with R 1 and v 1, R 0 and v 1, and R 0 and v = vec when vec > 1); an elementwise module whose
body uses CuPy's n-d indexer (``Specialization.indexed``) holds strided only, int32 and int64, each with
NDIM 1, 2, 3 or 0 (same slots). Pick among ``RenderedModule.variants``; never assume a variant exists.

How the launcher picks a variant
---------------------------------
Index: int32 when the loop size and every array operand's reachable byte offset
``sum((extent-1) * |stride|)`` are below 2**31, and ``gridDim.x * blockDim.x < 2**31``; else int64.

``strided`` needs no choice either: where every operand's innermost stride is its item size or 0, the inner
extent a multiple of :attr:`Specialization.vec` and every dense operand's base and outer strides aligned to its
vectors, it moves a vector of the inner dim per thread (a broadcast operand: one element per vector), checked
inside; the plan then sizes its grid as for several elements per thread (``ElementwisePlan.inner_dense``).

Vector width needs no choice: the one ``contig`` variant and the ``rows`` variants carry ``vec`` =
:attr:`Specialization.vec` and test alignment themselves (every array operand 16-byte aligned; for a
reduction row also an innermost reduced stride equal to the item size and a chunk start that is a multiple
of vec; with two reduced dims also an inner extent and a chunk end that are multiples of vec, and an outer
stride that is a multiple of 16 bytes), falling back to scalar loads. Any pointer may be passed to any
variant. The one choice is the runtime-rank ``cols``: v = vec (lanes of vec adjacent outputs, where the
layout allows) or v = 1 (scalar lanes), below.

Elementwise, indexed modules: ``strided`` over the dims CuPy's kernel would see (kspec/kernels/planning/_indexed_loop.py),
with the static NDIM when there is one for them; one element per thread. Other modules, after merging dims
(``reduce_dims``): ``contig`` when every non-raw array operand (inputs that
are not scalars, and outputs) is C-contiguous over the loop shape (no broadcasting). Otherwise ``strided``
with NDIM = ndim when a static variant exists for it, else 0 (runtime ndim, <= 16). A 0-d loop (size 1)
takes ``contig``; so does a kernel whose arguments are all raw or scalar (``size=``). Block: any size up
to the function's MAX_THREADS_PER_BLOCK attribute. Grid: any (every loop is grid-stride); measured on the
H200: ``contig`` at 16 blocks of 256 per SM reaches ~3950 GB/s (vec 4, float32 (x-y)^2, 2**28 elements;
CuPy 2536), while ``strided`` wants one element per thread, ``ceil(size / block)`` blocks: a transposed
operand runs at 1592 GB/s that way and at 561 GB/s with a device-sized grid (the grid-stride order loses
the locality between neighbouring rows). ``tiled`` (when the module holds it: ``Specialization.tiled``) for
a loop of >= 2 dims where an operand is *staged*, ``stride[1] != 0 and |stride[1]| < |stride[0]|`` (the
kernel applies that rule per operand itself): blockDim.x = 256 exactly, grid: any (it strides over
32 x 32 tiles of dims 0 and 1; one block per tile is what the plan launches). Measured on the H100:
``(x.T - y)^2`` over (2^14, 2^14) float32 at 0.89 of copy (strided: 0.46).

Reduction, with kept axes outer and reduced axes inner (logically, by strides): R = 1 when the reduced
dims merge into one (any stride), else 0 (runtime, <= 16 reduced dims; two reduced dims, the case of
4-d arrays reduced over axes that do not merge, take a path of their own inside: no division per element).

* ``rows`` reduces *segments*: segment ``seg`` is chunk ``s = seg % nchunks`` of output ``o = seg //
  nchunks``, i.e. row elements ``[s*chunk, min((s+1)*chunk, red_size))``. ``group`` lanes reduce one
  segment: a power of two 1..32 (about the row length / VEC: short rows), or ``group == blockDim.x`` (one
  block per segment: long rows). blockDim.x a multiple of 32 and of ``group``; grid: any (grid-stride over
  segments). Plain reduction: workspace ``{ptr: 0, nchunks: 1, chunk: red_size}``; the groups write the
  outputs. With a workspace pointer, segment ``seg`` writes partial ``seg`` instead (any nchunks).
* ``cols``: when the inputs' innermost kept dim is the contiguous one (``axis=0`` of a C-contiguous
  matrix, axes (0, 2) of a 4-d one): lane l of each warp takes output ``o0 + l``, the warps of the block
  split the row. blockDim.x in {32, 64, ..., 1024} (at most COLS_MAX_WARPS = 32 warps, 8 for an opaque
  reduce type: static shared memory); grid: any. Segments as in rows, over tiles of 32 outputs: segment
  ``seg`` is chunk ``seg % nchunks`` of tile ``seg // nchunks``. Plain: workspace ``{0, 1, red_size}``.
  ``cols<I, 0, vec>`` (vec > 1) with two reduced dims, the innermost kept one contiguous and a multiple of
  vec long, every other stride and every input 16-byte aligned (checked inside): lane l takes outputs
  ``o0 + l*vec .. o0 + l*vec + vec - 1``, tiles of 32 * vec outputs (the launcher's grid must count those
  tiles: ``cols_tile_width``). Taken only when those tiles are at least the blocks the device holds at once;
  with fewer, ``cols<I, 0, 1>`` and the split (vectorised tiles of few outputs: 0.61 -> 0.24 of copy, H200).
  Where the innermost kept run is under 32 vectors and the rows follow each other, a tile is that run (or a power
  of two of runs, so that each lane walks COLS_WARP_LOADS rows at least), and a segment one warp covers in
  2 * COLS_WARP_LOADS loads a lane or fewer is that warp's own: warp w of block b takes segment ``b * warps + w``
  (grid-stride by ``gridDim.x * warps``; the launcher's grid counts a segment per warp: ``warps_own_segments``).
  ``cols<I, 0, 1>`` over one reduced dim of at most COLS_SHORT_ROWS elements, unsplit: warp w of block b takes
  tile ``b * warps + w`` (grid-stride over tiles by ``gridDim.x * warps``), no merge across warps.
* ``pieces<I, 0, vec>`` (vec > 1): two reduced dims, the inner one P elements long with the item size as its
  stride, P a power of two below vec, the innermost kept dim's stride P items and its extent a multiple of
  vec / P (the launcher checks all this: any other layout is wrong here). Lane l of each warp takes outputs
  ``o0 + l*vec/P .. o0 + (l+1)*vec/P - 1``, tiles of 32 * vec / P outputs, warp w of block b tile ``b * warps
  + w`` (grid-stride over tiles by ``gridDim.x * warps``). blockDim.x a multiple of 32, at most
  KSPEC_COLS_THREADS; workspace ``{0, 1, red_size}``; alignment is checked inside (element loads without it).
* cols split (too few tiles of 32 outputs to fill the device): pass 1 is ``cols`` with a workspace and
  ``nchunks > 1`` (every chunk non-empty); lane l of a segment writes partial ``(o0 + l) * nchunks + s``,
  the split layout; pass 2 is ``split_final``.
* split (few outputs with long rows, e.g. a full reduction), two launches, no atomics: pass 1 is ``rows``
  with ``group == blockDim.x``, a real workspace, ``chunk`` (a multiple of vec, or it loads scalars) and
  ``nchunks = ceil(red_size / chunk) > 1``, so every chunk is non-empty (identity None needs that); it
  writes partial ``seg`` instead of an output. Pass 2 is ``split_final`` with the same workspace (one block
  per output, grid-stride; blockDim.x a multiple of 32), which merges each output's partials and writes it.
* inner (three or more reduced dims that do not merge, the innermost contiguous): pass 1 is ``rows`` with R = 1 over the
  innermost reduced dim, the outer reduced dims prepended to the kept dims (innermost), nchunks 1 and a
  workspace, so that its segment ``o * R + s`` writes the split layout; pass 2 is ``split_final`` with
  ``nchunks = R`` = the product of the outer reduced extents.

Workspace (split only): ``out_size * nchunks`` values of the reduce type, output-major, aligned to the
reduce type's alignment (any allocation aligned to 256 bytes is). The item size and alignment are in
``RenderedModule.reduce_item`` when the reduce type is one of kspec's dtypes; for an opaque C type (a
preamble struct) read the module global ``<name>__reduce_type_info`` (two uint64: sizeof, alignof) with
``cuModuleGetGlobal``. Zero-size: out_size == 0 -> no launch; red_size == 0 -> ``rows`` writes
post_map(identity) (identity None: the caller raises before launching).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from .._named_tuple import NamedTuple
from .. import dtypes
from ._layout import (
    Layout,
    index_layout,
    int_layout,
    pointer_layout,
    raw_view_layout,
    reduce_array_layout,
    reduce_shape_layout,
    round_up,
    scalar_layout,
    shape_layout,
    strided_array_layout,
    workspace_layout,
)
from ._specialize import Operand
from ._variants import DYNAMIC_NDIM, VariantKey

SlotKind = Literal[
    "size",
    "shape",
    "array",
    "strided_array",
    "scalar",
    "raw_view",
    "reduce_shape",
    "group",
    "reduce_array",
    "workspace",
]

# Blocks of the cols reduction have at most this many warps (KSPEC_COLS_MAX_WARPS of reduce.cuh), or
# COLS_WIDE_WARPS when the accumulator is wider than COLS_WIDE_ACC bytes: a reduce type that is not one of
# kspec's dtypes counts as wide, since its size is known only to the compiler.
COLS_MAX_WARPS = 32
COLS_WIDE_WARPS = 8
COLS_WIDE_ACC = 24
# The cols entry's launch bounds (KSPEC_COLS_THREADS x KSPEC_COLS_MIN_BLOCKS for the runtime-rank instantiation,
# KSPEC_COLS_ONE_DIM_THREADS x KSPEC_COLS_ONE_DIM_BLOCKS for the one-dim one, of reduce.cuh): its largest block and
# the blocks of it an SM holds, for reduce types of at most 4 bytes (one block for wider ones)
COLS_THREADS = 512
COLS_MIN_BLOCKS = 2
COLS_ONE_DIM_THREADS = 1024
COLS_ONE_DIM_BLOCKS = 2
# One reduced dim this short or shorter, unsplit: each warp of a cols block takes a tile of its own (the blocks
# then cover 32 x warps outputs; KSPEC_COLS_SHORT_ROWS of reduce.cuh)
COLS_SHORT_ROWS = 32
# Vectorised cols tiles whose lanes share rows: each lane walks this many rows at least (short rows widen the tile),
# and a segment one warp covers in twice as many loads a lane or fewer is that warp's own (KSPEC_COLS_WARP_LOADS of
# reduce.cuh)
COLS_WARP_LOADS = 16
# split_final merges an output's partials in one thread where they are at most FINAL_OWN_CHUNKS and the outputs at
# least FINAL_OWN_OUTPUTS, else in a group of lanes (KSPEC_FINAL_OWN_CHUNKS and KSPEC_FINAL_OWN_OUTPUTS of
# reduce.cuh). Groups of 4 lanes over 2^17 outputs of 3 partials made two waves of threads each reading one: a fold's
# second pass took 6.6 us (ncu) after a first of 30, and a thread per output took float16 (256, 128, 512, 3) over
# (1, 3) from 0.73 to 0.79-0.81 of a copy (H200); splits of 256-16,384 outputs lost 1-2% that way
FINAL_OWN_CHUNKS = 8
FINAL_OWN_OUTPUTS = 65536
# The slab entry (KSPEC_SLAB_* of reduce.cuh): blockDim.x, the blocks per SM its launch bounds ask for, and
# the most accumulator bytes per thread (VEC accumulators) it takes: the planner keeps to them.
SLAB_BLOCK = 256
SLAB_MIN_BLOCKS = 8
SLAB_ACC_BYTES = 32


class Slot(NamedTuple):
    """One kernel parameter: what it carries (``kind``, ``param``, ``dtype``) and its bytes (``layout``)."""

    kind: SlotKind
    layout: Layout
    param: str | None = None  # the spec parameter (array, strided_array, scalar, raw_view, reduce_array)
    dtype: str | None = None  # that parameter's canonical dtype

    @property
    def name(self) -> str:
        """Field name in :meth:`EntryAbi.numpy_dtype`: the parameter's name, or ``_<kind>``."""
        return self.param if self.param is not None else f"_{self.kind}"


class EntryAbi(NamedTuple):
    """The parameter list of one entry point: slots in order, their offsets in the parameter buffer."""

    variant: VariantKey
    slots: tuple[Slot, ...]
    offsets: tuple[int, ...]
    size: int  # bytes of the parameter buffer: end of the last slot (CU_LAUNCH_PARAM_BUFFER_SIZE)

    def numpy_dtype(self) -> np.dtype:
        """The whole parameter buffer as one NumPy structured dtype with a field per slot (``Slot.name``)."""
        return np.dtype(
            {
                "names": [s.name for s in self.slots],
                "formats": [s.layout.numpy_dtype() for s in self.slots],
                "offsets": list(self.offsets),
                "itemsize": self.size,
            }
        )

    def slot(self, name: str) -> Slot:
        for s in self.slots:
            if s.name == name:
                return s
        raise KeyError(name)


def _c_type(op: Operand) -> str:
    return dtypes.BY_NAME[op.dtype].c_type


def _param_slot(op: Operand, kind: SlotKind, array: Layout) -> Slot:
    """The slot of one parameter: ``array`` for an array operand; scalars and raw views look alike everywhere."""
    if op.raw:
        return Slot("raw_view", raw_view_layout(_c_type(op), op.raw_ndim, op.raw_c_contiguous), op.name, op.dtype)
    if op.scalar:
        return Slot("scalar", scalar_layout(op.dtype), op.name, op.dtype)
    return Slot(kind, array, op.name, op.dtype)


def _elementwise_slots(v: VariantKey, operands: tuple[Operand, ...]) -> list[Slot]:
    if v.entry == "contig":
        head = Slot("size", index_layout(v.index))
        return [head] + [_param_slot(op, "array", pointer_layout(_c_type(op))) for op in operands]
    head = Slot("shape", shape_layout(v.ndim, v.index))
    return [head] + [
        _param_slot(op, "strided_array", strided_array_layout(_c_type(op), v.ndim, v.index)) for op in operands
    ]


def _reduction_slots(v: VariantKey, operands: tuple[Operand, ...]) -> list[Slot]:
    final = v.entry in ("split_final", "slab_final")
    slots = [Slot("reduce_shape", reduce_shape_layout(1 if final else v.ndim, v.index))]
    if v.entry in ("rows", "slab"):
        slots.append(Slot("group", int_layout()))
    for op in operands:
        if op.is_output:  # strides over the kept dims
            slots.append(_param_slot(op, "strided_array", strided_array_layout(_c_type(op), DYNAMIC_NDIM, v.index)))
        elif not (final and op.is_array):  # pass 2 reads the workspace, not the array inputs
            slots.append(_param_slot(op, "reduce_array", reduce_array_layout(_c_type(op), v.ndim, v.index)))
    slots.append(Slot("workspace", workspace_layout(v.index)))
    return slots


def entry_abi(kind: str, variant: VariantKey, operands: tuple[Operand, ...]) -> EntryAbi:
    """The parameter list of ``variant`` of an elementwise or reduction module over ``operands``."""
    slots = _elementwise_slots(variant, operands) if kind == "elementwise" else _reduction_slots(variant, operands)
    offsets = []
    end = 0
    for slot in slots:
        offset = round_up(end, slot.layout.align)
        offsets.append(offset)
        end = offset + slot.layout.size
    return EntryAbi(variant, tuple(slots), tuple(offsets), end)
