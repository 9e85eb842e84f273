"""Call plans of ElementwiseKernel and ReductionKernel: shapes, layouts, launch variant, grid and block.

Pure Python and driver-free (tested in CI without a GPU): a plan is computed from the bound arguments
(:mod:`kspec.kernels.planning._binding`) and, for the grid, the device's SM count. Layout conventions are those of the
launch ABI (:mod:`kspec.render._abi`): dims innermost first, strides in bytes.

Elementwise (REFERENCE.md): non-raw inputs and outputs broadcast together; missing outputs are allocated
C-contiguous with the broadcast shape; ``size=`` only when every array argument is raw; size 0 launches
nothing. ``reduce_dims`` drops extent-1 axes and merges axes that are contiguous in every operand. A kernel
whose body uses CuPy's n-d indexer (``Specialization.indexed``) gets the loop's dims as CuPy's kernel would
(:mod:`kspec.kernels.planning._indexed_loop`) and the indexed strided or dense entry, never the contiguous or tiled
ones.

Reduction planning is in :mod:`kspec.kernels.planning._reduction_plan` (on top of the shared helpers here, which
import nothing back).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from ..._named_tuple import NamedTuple
from ... import dtypes
from ...dtypes import c_strides
from ..._errors import KspecTypeError, KspecValueError, about_kernel
from ...render import DYNAMIC_NDIM, MAX_NDIM, Specialization, VariantKey, stacked_planes, tiled_layout
from typing import Any, TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: plans serve plain specs too, without the Pydantic models
    from ...spec import ElementwiseSpec, ReductionSpec
from ._binding import ArrayArg, Bound
from ._entry_point import GRID_STRIDE_BLOCKS_PER_SM, EntryChoice, Tuning, contig_choice, strided_choice
from ._indexed_loop import c_contiguous, cupy_loop_dims
from ._loop_order import by_stride, merge_dims, runs_pay
from ._order_choice import other_order

INT32_LIMIT = 2**31
WALK_LIMIT = 2**32 - 1  # elements of a 64-bit launch its walks' 32-bit coordinates reach
WALK_WRAP_LIMIT = 2**31 - 1  # and the extent of each dim they wrap (indexer.cuh's walk_fits)
MAX_BLOCK = 1024
DEFAULT_BLOCK = 256
EW_UNROLL = 4  # KSPEC_EW_UNROLL of indexer.cuh
# The strided entry's chunks (EW_UNROLL elements a thread) a block runs through where its outputs are written in
# the loop's order and the loop has 3 dims or more: a thread divides once a run to find its first element, then
# walks (kspec::GridWalk). At a block per chunk those divisions held such float16 rows issue-bound at 0.38 of a copy
# (ncu: 105 instructions an element, H200; runs of 8: 0.66; benchmarks/NOTES.md v68). Elsewhere a block per chunk
# stays: outputs written across the loop's rows fill their sectors from chunks that run side by side (float32
# (512, 128, 64, 3) permuted (0, 3, 2, 1): 0.44 of a copy, in runs 0.20), and a 2-dim walk divides once (every
# other column of a C array: 0.80, in runs 0.69). Runs shorten so that the grid keeps RUN_MIN_BLOCKS_PER_SM blocks.
EW_RUN_CHUNKS = 8
RUN_MIN_BLOCKS_PER_SM = 16
MAX_GRID = 2**31 - 1

Specializer = Callable[[Bound], Specialization]  # the kernel's specialization of a bound call




def broadcast_shape(kernel: str, named: Sequence[tuple[str, tuple[int, ...]]]) -> tuple[int, ...]:
    """NumPy broadcasting of named shapes; a KspecValueError listing every shape when it fails."""
    ndim = max((len(s) for _, s in named), default=0)
    result = [1] * ndim
    for _, shape in named:
        for axis, extent in enumerate(shape, start=ndim - len(shape)):
            if extent != 1:
                if result[axis] not in (1, extent):
                    listing = ", ".join(f"{name} {shape}" for name, shape in named)
                    raise KspecValueError(f"operands could not be broadcast together: kernel '{kernel}': {listing}")
                result[axis] = extent
    # an extent of 0 wins over 1 (NumPy): the loop above keeps 0 because 0 != 1
    return tuple(result)


def broadcast_strides(shape: tuple[int, ...], info_shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, ...]:
    """Byte strides of an array broadcast to ``shape`` (0 along broadcast axes)."""
    pad = len(shape) - len(info_shape)
    return tuple(
        0 if axis < pad or info_shape[axis - pad] == 1 and shape[axis] != 1 else strides[axis - pad]
        for axis in range(len(shape))
    )


def reach(extents: Sequence[int], strides: Sequence[int]) -> int:
    """Largest byte offset from the base pointer any element reaches (for the index width)."""
    return sum((e - 1) * abs(s) for e, s in zip(extents, strides))


class RawLayout(NamedTuple):
    """A raw parameter's view (kspec::RawView): shape and byte strides in C order."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    size: int
    c_contiguous: bool


def raw_layout(kernel: str, arg: ArrayArg) -> RawLayout:
    info = arg.info
    if len(info.shape) > MAX_NDIM:
        raise KspecValueError(about_kernel(kernel, f"raw parameter {arg.param.name} has {len(info.shape)} dims (at most {MAX_NDIM})"))
    return RawLayout(info.shape, info.strides, info.size, info.is_c_contiguous)


def as_int(kernel: str, what: str, value: object, expected: str = "an int") -> int:
    """An int (or NumPy integer, not a bool) argument; a KspecTypeError naming ``what`` otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, bool) and hasattr(type(value), "__index__"):
        return operator.index(value)  # type: ignore[arg-type]  # NumPy integers
    raise KspecTypeError(about_kernel(kernel, f"{what} must be {expected}, got {value!r} ({type(value).__name__})"))


def check_block_size(kernel: str, block_size: object) -> int | None:
    if block_size is None:
        return None
    block_size = as_int(kernel, "block_size", block_size)
    if block_size <= 0:
        raise KspecValueError(f"block_size must be greater than zero: kernel '{kernel}' got block_size={block_size}")
    if not 1 <= block_size <= MAX_BLOCK:
        raise KspecValueError(about_kernel(kernel, f"block_size must be between 1 and {MAX_BLOCK}, got {block_size}"))
    return int(block_size)


def plan_outputs(
    spec: ElementwiseSpec | ReductionSpec, bound: Bound, shape: tuple[int, ...], expected: str
) -> tuple[tuple[tuple[str, str], ...], dict[str, RawLayout]]:
    """Check the given non-raw outputs against ``shape`` (``expected`` says where it comes from) and return
    the outputs to allocate ((name, dtype), C-contiguous with ``shape``) and every raw parameter's view
    (a raw output that is allocated gets ``shape``)."""
    kernel = spec.name
    for p in spec.out_params:
        given = bound.arrays.get(p.name)
        if given is not None and not p.raw and given.info.shape != shape:
            raise KspecValueError(f"Out shape is mismatched: kernel '{kernel}': output {p.name} has shape {given.info.shape} but {expected}")
    allocate = tuple((p.name, bound.dtypes[p.name]) for p in spec.out_params if p.name not in bound.arrays)
    raw = {p.name: raw_layout(kernel, bound.arrays[p.name]) for p in spec.params if p.raw and p.name in bound.arrays}
    for p in spec.out_params:
        if p.raw and p.name not in bound.arrays:
            itemsize = dtypes.BY_NAME[bound.dtypes[p.name]].itemsize
            raw[p.name] = RawLayout(shape, c_strides(shape, itemsize), math.prod(shape), True)
    return allocate, raw


# -- elementwise -----------------------------------------------------------------------------------------


# The default of a plan's per-operand tables: shared by every plan that has none, read-only, so no plan can
# change another's (plans only read them; plan_elementwise builds a fresh dict for each plan that has some).
_NONE: Mapping[str, Any] = MappingProxyType({})


class ElementwisePlan(NamedTuple):
    """Everything about an elementwise call except pointer and scalar values, and the grid.

    A NamedTuple, not a dataclass: one is made per call, and building a tuple is faster; defining it costs a
    tenth at import.
    """

    specialization: Specialization
    shape: tuple[int, ...]  # loop shape; allocated outputs get it
    size: int
    allocate: tuple[tuple[str, str], ...]  # (output parameter, dtype) to allocate C-contiguous
    variant: VariantKey | None  # None: nothing to launch (size 0)
    extents: tuple[int, ...] = ()  # loop dims innermost first (strided variants)
    strides: Mapping[str, tuple[int, ...]] = _NONE  # array operand -> innermost first
    raw: Mapping[str, RawLayout] = _NONE
    block: int = DEFAULT_BLOCK
    inner_dense: bool = False  # strided: every operand's innermost stride is its item size or 0
    runs: bool = False  # strided: blocks take runs of chunks (EW_RUN_CHUNKS)
    own_indexing: bool = False  # contig: raw operands (the body indexes memory itself) or state per thread: a thread per element
    per_sm: int = GRID_STRIDE_BLOCKS_PER_SM  # blocks of 256 threads per SM the grid-stride paths aim at; 0: none

    def grid(self, sm_count: int) -> int:
        if self.variant is None:
            return 0
        if self.variant.entry == "tiled":
            # one block per step of tile_span tiles (the kernel strides beyond the grid limit)
            interleaved = stacked_planes(list(self.strides.values()), len(self.extents))
            steps, _ = tiled_layout(self.variant, self.specialization.tile_span, self.extents, interleaved)
            return max(1, min(steps, MAX_GRID))
        resident = max(1, sm_count * self.per_sm * DEFAULT_BLOCK // self.block)
        if self.variant.entry == "contig" and self.own_indexing:
            # one thread per element, as CuPy launches: such bodies (a union-find's atomicCAS loops in
            # cupyx.scipy.ndimage.label) vary in length per element, and blocks that finish make room for new
            # ones, where a grid-stride loop would run a thread's elements one after another; gathers through
            # raw arrays (ndimage.zoom, map_coordinates) keep more loads in flight (H100, ncu: zoom's kernel
            # 154 us in vectors of 4 per thread, CuPy's 86 us at one element per thread)
            return max(1, min(-(-self.size // self.block), MAX_GRID))
        if self.variant.entry == "contig":
            vec = max(1, self.variant.vec)
            per_vector = -(-self.size // (vec * self.block))
            return max(1, min(per_vector, MAX_GRID if self.per_sm <= 0 else resident))
        chunks = -(-self.size // (EW_UNROLL * self.block))
        if self.inner_dense:
            # the strided entry moves a vector of the inner dim (or EW_UNROLL elements) per thread at a time where
            # the layout allows, which needs a grid that leaves each thread several elements
            return max(1, min(chunks, resident))
        # the indexed entry takes one element per thread; so do bodies that gather through raw operands or keep
        # state per thread (below: the strided entry runs no chunks on a grid of a thread per element). The chunks
        # walk a static rank or a runtime one up to 4, a 64-bit launch in 32 bits (indexer.cuh's walk_fits)
        walks = (self.variant.ndim > 0 or len(self.extents) <= 4) and (self.variant.index == "int32" or (
            self.size <= WALK_LIMIT and all(e <= WALK_WRAP_LIMIT for e in self.extents[:-1])))
        if walks and not self.specialization.indexed and not self.raw and not self.specialization.indexer.thread_state:
            # an operand strided along the inner dim (a transposed input): a block per chunk of EW_UNROLL elements a
            # thread, or per run of chunks (EW_RUN_CHUNKS), the blocks in flight over one window of the loop as with
            # one element per thread, which keeps the threads that share a memory sector running together (a grid
            # capped to the resident blocks, each thread striding over the whole loop: 0.38 of copy -> 0.11)
            run = max(1, min(EW_RUN_CHUNKS, chunks // (sm_count * RUN_MIN_BLOCKS_PER_SM))) if self.runs else 1
            return max(1, min(-(-chunks // run), MAX_GRID))
        return max(1, min(-(-self.size // self.block), MAX_GRID))


def plan_elementwise(
    spec: ElementwiseSpec,
    bound: Bound,
    specializer: Specializer,
    *,
    size: object = None,
    block_size: object = None,
    launch: bool = True,
    tuning: Tuning | None = None,
) -> ElementwisePlan:
    """The plan of an elementwise call. ``launch=False`` (``kernel.output_specs``): what the call returns and
    every error it raises, without choosing the entry point (``variant`` None past the checks), so that a
    tracer's symbolic sizes get no guards from decisions that only pick a kernel variant. ``tuning``: the
    kernel's tuned knobs by layout (kspec/kernels/planning/_entry_point.py), None for the planner's rules."""
    kernel = spec.name
    block = check_block_size(kernel, block_size) or DEFAULT_BLOCK
    params = spec.params
    looped = [p for p in params if not p.raw and p.name in bound.arrays]  # broadcast operands given
    if size is not None:
        size = as_int(kernel, "size", size)
        if looped:
            raise KspecValueError(
                "Specified 'size' can be used only if all of the ndarray are 'raw'. "
                f"kernel '{kernel}': size= is only allowed when every array argument is raw, but "
                f"{', '.join(p.name for p in looped)} is not raw (its shape decides the loop size)"
            )
        if size < 0:
            raise KspecValueError(about_kernel(kernel, f"size must be >= 0, got {size}"))
        shape: tuple[int, ...] = (int(size),)
    elif looped:
        shape = broadcast_shape(kernel, [(p.name, bound.arrays[p.name].info.shape) for p in looped])
    elif any(p.raw for p in params if p.name in bound.arrays):
        raise KspecValueError(
            f"Loop size is undecided. kernel '{kernel}': every array argument is raw, so no shape decides the "
            "loop size; pass size="
        )
    else:
        shape = ()  # scalars only: one element, as NumPy does with scalars
    allocate, raw = plan_outputs(
        spec, bound, shape, f"the loop shape is {shape} (outputs are not broadcast)"
    )
    specialization = specializer(bound)
    total = math.prod(shape)
    if total == 0:
        return ElementwisePlan(specialization, shape, 0, allocate, None, raw=raw, block=block)

    # every array operand of the loop, given or allocated, with its strides over the loop shape
    operands: dict[str, tuple[int, ...]] = {}
    for p in params:
        if p.raw or p.name in bound.scalars:
            continue
        itemsize = dtypes.BY_NAME[bound.dtypes[p.name]].itemsize
        given = bound.arrays.get(p.name)
        if given is None:
            operands[p.name] = c_strides(shape, itemsize)
        else:
            operands[p.name] = broadcast_strides(shape, given.info.shape, given.info.strides)
    itemsizes = {name: dtypes.BY_NAME[bound.dtypes[name]].itemsize for name in operands}
    names = list(operands)
    variants = specialization.variants
    indexed = specialization.indexed  # the body sees the loop's dims: CuPy's, and the indexed strided (or dense) entry
    extents: Sequence[int]
    merged: Sequence[Sequence[int]]
    in_order: tuple[Sequence[int], Sequence[Sequence[int]]] | None = None  # the merged loop before by_stride
    if indexed:
        extents, merged = cupy_loop_dims(
            shape, [operands[n] for n in names], [itemsizes[n] for n in names],
            reduce_dims=spec.reduce_dims, one_parameter=len(params) == 1,
        )  # fmt: skip
    else:
        contiguous = all(
            all(s == c for s, c, e in zip(strides, c_strides(shape, itemsizes[name]), shape) if e != 1)
            for name, strides in operands.items()
        )
        if contiguous:
            contig = next(v for v in variants if v.entry == "contig")
            chosen = contig_choice(contig, block, block_size is not None, max(itemsizes.values(), default=1), total, tuning)
            return ElementwisePlan(specialization, shape, total, allocate, contig, raw=raw, block=chosen.block,
                                   own_indexing=bool(raw) or not operands or specialization.indexer.thread_state,
                                   per_sm=chosen.per_sm)  # fmt: skip
        if spec.reduce_dims:
            extents, merged = merge_dims(shape, [operands[n] for n in names])
            if not specialization.indexer.flat:  # the body does not name `i`: any order of its elements will do
                in_order = (extents, merged)
                extents, merged = by_stride(extents, merged)
        else:
            extents, merged = list(shape), [list(operands[n]) for n in names]
    if len(extents) > MAX_NDIM:
        raise KspecValueError(
            about_kernel(kernel, f"the loop has {len(extents)} dims after merging, more than kspec's {MAX_NDIM}")
        )
    if not launch:
        return ElementwisePlan(specialization, shape, total, allocate, None, raw=raw, block=block)

    # the furthest element is the same in every order of the loop's dims
    fits32 = total + block < INT32_LIMIT and all(
        reach(extents, s) + itemsizes[n] < INT32_LIMIT for n, s in zip(names, merged)
    )

    outs = {p.name for p in spec.out_params}

    def outputs_follow(extents: Sequence[int], merged: Sequence[Sequence[int]]) -> bool:
        """Every output is C-contiguous over this order of the loop (written in the loop's order)."""
        return all(c_contiguous(extents, s, itemsizes[n]) for n, s in zip(names, merged) if n in outs)

    def entry(extents: Sequence[int], merged: Sequence[Sequence[int]], tiles: bool = True) -> tuple[EntryChoice, bool]:
        """The entry that runs this order of the loop, and whether every operand is dense along its inner dim."""
        # a static rank where the module has one (indexed modules hold 1-3 in both widths), then the runtime rank;
        # the 64-bit runtime rank, which every strided module holds, last
        if fits32:
            wanted = [VariantKey("strided", "int32", len(extents), 1), VariantKey("strided", "int32", DYNAMIC_NDIM, 1)]
        else:
            wanted = [VariantKey("strided", "int64", len(extents), 1)]
        wanted.append(VariantKey("strided", "int64", DYNAMIC_NDIM, 1))
        if (indexed and not specialization.indexer.reads_index
                and all(c_contiguous(extents, s, itemsizes[n]) for n, s in zip(names, merged))):
            # a body that reads no n-d index over operands all C-contiguous over the loop: the module's dense entry
            # addresses each by the flat index (templates/elementwise_indexed.cu.j2)
            wanted = [VariantKey("dense", v.index, v.ndim, 1) for v in wanted] + wanted
        # the indexed entry loads one element per thread at a time: one thread per element
        inner_dense = not indexed and not specialization.indexer.thread_state and all(
            s[-1] in (0, itemsizes[n]) for n, s in zip(names, merged) if s
        )
        # a transposed operand: tiles through shared memory (the tiled entry needs blocks of TILE_THREADS)
        return strided_choice(specialization, extents, merged, next(v for v in wanted if v in variants), block,
                              block_size is not None, fits32, indexed, inner_dense, max(itemsizes.values(), default=1), tuning, tiles,
                              outputs_follow(extents, merged)), inner_dense  # fmt: skip

    chosen, inner_dense = entry(extents, merged)
    items = [itemsizes[n] for n in names]
    keeps_runs = True  # the order taken lets the strided entry take runs of chunks
    if in_order is not None and len(in_order[0]) <= MAX_NDIM:
        # by_stride's order serves the tiled entry (a transposed operand's rows as loop dim 1); where the loop is
        # strided anyway or in tiles of its short inner dim, C order can do better
        better = other_order((extents, merged), chosen, in_order, entry, outputs_follow, items,
                             [n in outs for n in names])
        if better is not None:
            (extents, merged), (chosen, inner_dense), keeps_runs = better
    return ElementwisePlan(
        specialization,
        shape,
        total,
        allocate,
        chosen.variant,
        extents=tuple(reversed(extents)),
        strides={n: tuple(reversed(s)) for n, s in zip(names, merged)},
        raw=raw,
        block=chosen.block,
        inner_dense=inner_dense,
        runs=(chosen.variant.entry == "strided" and len(extents) >= 3 and keeps_runs and runs_pay(items)
              and outputs_follow(extents, merged)),
        per_sm=chosen.per_sm,
    )


def frame_values(plan: ElementwisePlan) -> dict[str, Any]:
    """The plan's part of the launch's parameter frame (kspec/kernels/callpath/_frame.py): everything that is not a
    pointer or a scalar value."""
    static: dict[str, Any] = {}
    variant = plan.variant
    assert variant is not None
    if variant.entry == "contig":
        static["_size"] = plan.size
    else:
        shape: dict[str, Any] = {"size": plan.size, "extent": plan.extents}
        if variant.ndim == 0:
            shape["ndim"] = len(plan.extents)
        static["_shape"] = shape
        for name, strides in plan.strides.items():
            static[name] = {"stride": strides}
    for name, layout in plan.raw.items():
        static[name] = raw_view_values(layout)
    return static


def raw_view_values(layout: RawLayout) -> dict[str, Any]:
    """A raw parameter's kspec::RawView fields."""
    return {
        "size_": layout.size,
        "ndim_": len(layout.shape),
        "c_contiguous_": int(layout.c_contiguous),
        "shape_": layout.shape,
        "strides_": layout.strides,
    }
