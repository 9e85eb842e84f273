"""Call plans of ElementwiseKernel and ReductionKernel: shapes, layouts, launch variant, grid and block.

Pure Python and driver-free (tested in CI without a GPU): a plan is computed from the bound arguments
(:mod:`kspec.kernels._bind`) and, for the grid, the device's SM count. Layout conventions are those of the
launch ABI (:mod:`kspec.render._abi`): dims innermost first, strides in bytes.

Elementwise (REFERENCE.md): non-raw inputs and outputs broadcast together; missing outputs are allocated
C-contiguous with the broadcast shape; ``size=`` only when every array argument is raw; size 0 launches
nothing. ``reduce_dims`` drops extent-1 axes and merges axes that are contiguous in every operand.

Reduction: the non-raw inputs broadcast together; ``axis`` (None, int, tuple; negatives normalised) picks
the reduced axes; kept axes stay in order, reduced axes are ordered by stride (largest outer: which
element is reduced first does not matter) and merged. Raw inputs only when the reduced axes lead.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .. import dtypes
from .._errors import AxisError, KspecNotImplementedError, KspecTypeError, KspecValueError
from ..render import DYNAMIC_NDIM, MAX_NDIM, Specialization, VariantKey
from ..render._abi import COLS_MAX_WARPS, COLS_WIDE_ACC, COLS_WIDE_WARPS
from ..spec import ElementwiseSpec, ReductionSpec
from ._bind import ArrayArg, Bound

INT32_LIMIT = 2**31
MAX_BLOCK = 1024
DEFAULT_BLOCK = 256
# Grid of the contiguous elementwise path: blocks per SM (measured on the H200, see kspec/render/_abi.py).
CONTIG_BLOCKS_PER_SM = 16
EW_UNROLL = 4  # KSPEC_EW_UNROLL of indexer.cuh
MAX_GRID = 2**31 - 1

Specializer = Callable[[dict[str, str], frozenset[str]], Specialization]


def c_strides(shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    strides = []
    step = itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= max(extent, 1)
    return tuple(reversed(strides))


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


def reach(extents: Sequence[int], strides: Sequence[int]) -> int:
    """Largest byte offset from the base pointer any element reaches (for the index width)."""
    return sum((e - 1) * abs(s) for e, s in zip(extents, strides))


@dataclass(frozen=True)
class RawLayout:
    """A raw parameter's view (kspec::RawView): shape and byte strides in C order."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    size: int
    c_contiguous: bool


def raw_layout(kernel: str, arg: ArrayArg) -> RawLayout:
    info = arg.info
    if len(info.shape) > MAX_NDIM:
        raise KspecValueError(f"kernel '{kernel}': raw parameter {arg.param.name} has {len(info.shape)} dims (at most {MAX_NDIM})")
    return RawLayout(info.shape, info.strides, info.size, info.is_c_contiguous)


def as_int(kernel: str, what: str, value: object, expected: str = "an int") -> int:
    """An int (or NumPy integer, not a bool) argument; a KspecTypeError naming ``what`` otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, bool) and hasattr(type(value), "__index__"):
        return operator.index(value)  # type: ignore[arg-type]  # NumPy integers
    raise KspecTypeError(f"kernel '{kernel}': {what} must be {expected}, got {value!r} ({type(value).__name__})")


def check_block_size(kernel: str, block_size: object) -> int | None:
    if block_size is None:
        return None
    block_size = as_int(kernel, "block_size", block_size)
    if block_size <= 0:
        raise KspecValueError(f"block_size must be greater than zero: kernel '{kernel}' got block_size={block_size}")
    if not 1 <= block_size <= MAX_BLOCK:
        raise KspecValueError(f"kernel '{kernel}': block_size must be between 1 and {MAX_BLOCK}, got {block_size}")
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


@dataclass(frozen=True)
class ElementwisePlan:
    """Everything about an elementwise call except pointer and scalar values, and the grid."""

    specialization: Specialization
    shape: tuple[int, ...]  # loop shape; allocated outputs get it
    size: int
    allocate: tuple[tuple[str, str], ...]  # (output parameter, dtype) to allocate C-contiguous
    variant: VariantKey | None  # None: nothing to launch (size 0)
    extents: tuple[int, ...] = ()  # loop dims innermost first (strided variants)
    strides: dict[str, tuple[int, ...]] = field(default_factory=dict)  # array operand -> innermost first
    raw: dict[str, RawLayout] = field(default_factory=dict)
    block: int = DEFAULT_BLOCK
    inner_dense: bool = False  # strided: every operand's innermost stride is its item size or 0

    def grid(self, sm_count: int) -> int:
        if self.variant is None:
            return 0
        resident = sm_count * CONTIG_BLOCKS_PER_SM * DEFAULT_BLOCK // self.block
        if self.variant.entry == "contig":
            vec = max(1, self.variant.vec)
            return max(1, min(-(-self.size // (vec * self.block)), resident))
        if self.variant.ndim > 0 and self.inner_dense:
            # the static-rank strided entry loads EW_UNROLL elements per thread at a time (when the body
            # allows it), which needs a grid that leaves each thread several elements. Not when an operand
            # is strided along the inner dim (a transposed input): there, one element per thread keeps the
            # threads that share a memory sector running together (measured: 0.38 of copy -> 0.11 when capped)
            return max(1, min(-(-self.size // (EW_UNROLL * self.block)), resident))
        return max(1, min(-(-self.size // self.block), MAX_GRID))


def plan_elementwise(
    spec: ElementwiseSpec,
    bound: Bound,
    specializer: Specializer,
    *,
    size: object = None,
    block_size: object = None,
) -> ElementwisePlan:
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
            raise KspecValueError(f"kernel '{kernel}': size must be >= 0, got {size}")
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
    specialization = specializer(bound.types, frozenset(bound.scalars))
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

    contiguous = all(
        all(s == c for s, c, e in zip(strides, c_strides(shape, itemsizes[name]), shape) if e != 1)
        for name, strides in operands.items()
    )
    variants = specialization.variants
    if contiguous:
        variant = next(v for v in variants if v.entry == "contig")
        return ElementwisePlan(specialization, shape, total, allocate, variant, raw=raw, block=block)

    names = list(operands)
    if spec.reduce_dims:
        extents, merged = merge_dims(shape, [operands[n] for n in names])
    else:
        extents, merged = list(shape), [list(operands[n]) for n in names]
    if len(extents) > MAX_NDIM:
        raise KspecValueError(
            f"kernel '{kernel}': the loop has {len(extents)} dims after merging, more than kspec's {MAX_NDIM}"
        )
    fits32 = total + block < INT32_LIMIT and all(
        reach(extents, s) + itemsizes[n] < INT32_LIMIT for n, s in zip(names, merged)
    )
    wanted = [VariantKey("strided", "int32", len(extents), 1), VariantKey("strided", "int32", DYNAMIC_NDIM, 1)]
    if not fits32:
        wanted = []
    wanted.append(VariantKey("strided", "int64", DYNAMIC_NDIM, 1))
    variant = next(v for v in wanted if v in variants)
    return ElementwisePlan(
        specialization,
        shape,
        total,
        allocate,
        variant,
        extents=tuple(reversed(extents)),
        strides={n: tuple(reversed(s)) for n, s in zip(names, merged)},
        raw=raw,
        block=block,
        inner_dense=all(s[-1] in (0, itemsizes[n]) for n, s in zip(names, merged) if s),
    )


# -- reduction -------------------------------------------------------------------------------------------


def normalize_axis(kernel: str, axis: object, ndim: int) -> tuple[int, ...]:
    """``axis`` (None, an int, or a tuple/list of ints) -> sorted non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    items = list(axis) if isinstance(axis, (tuple, list)) else [axis]
    result = []
    for item in items:
        item = as_int(kernel, "axis", item, "None, an int or a tuple of ints")
        if not -ndim <= item < ndim:
            raise AxisError(f"axis {item} is out of bounds for array of dimension {ndim}: kernel '{kernel}'")
        result.append(item % ndim if ndim else item)
    if len(set(result)) != len(result):
        raise KspecValueError(f"duplicate value in 'axis': kernel '{kernel}' got axis={axis!r}")
    return tuple(sorted(result))


@dataclass(frozen=True)
class ReductionPlan:
    """Everything about a reduction call except pointer and scalar values and the strategy."""

    specialization: Specialization
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]  # as returned (keepdims applied)
    allocate: tuple[tuple[str, str], ...]
    out_size: int
    red_size: int
    kept: tuple[int, ...]  # kept extents, innermost first (merged)
    red: tuple[int, ...]  # reduced extents, innermost first (merged; (extent,) when rndim is 1)
    in_strides: dict[str, tuple[tuple[int, ...], tuple[int, ...]]]  # input -> (kept, reduced) strides
    out_strides: dict[str, tuple[int, ...]]  # output -> kept strides
    raw: dict[str, RawLayout]
    rndim: int  # 1: one reduced dim; 0 (DYNAMIC_NDIM): several
    contiguous_cols: bool  # the innermost kept dim is contiguous in every array input: the cols layout fits


def plan_reduction(
    spec: ReductionSpec,
    bound: Bound,
    specializer: Specializer,
    *,
    axis: object = None,
    keepdims: bool = False,
) -> ReductionPlan:
    kernel = spec.name
    inputs = [p for p in spec.in_params if not p.raw and p.name in bound.arrays]
    if not inputs:
        raise KspecValueError(
            f"kernel '{kernel}': a reduction needs at least one non-raw array input (its shape is reduced)"
        )
    in_shape = broadcast_shape(kernel, [(p.name, bound.arrays[p.name].info.shape) for p in inputs])
    ndim = len(in_shape)
    reduced = normalize_axis(kernel, axis, ndim)
    kept_axes = [a for a in range(ndim) if a not in reduced]
    if any(p.raw for p in spec.params) and reduced != tuple(range(len(reduced))):
        raise KspecNotImplementedError(
            f"Illegal conditions: kernel '{kernel}': raw parameters need the reduced axes to be the leading ones (axis=0, (0, 1), "
            f"...), got axis={axis!r} on a {ndim}-d input"
        )
    kept_shape = tuple(in_shape[a] for a in kept_axes)
    out_shape = tuple(1 if a in reduced else in_shape[a] for a in range(ndim)) if keepdims else kept_shape
    allocate, raw = plan_outputs(
        spec, bound, out_shape, f"the reduction's output shape is {out_shape} (axis={axis!r}, keepdims={bool(keepdims)})"
    )
    specialization = specializer(bound.types, frozenset(bound.scalars))

    out_size = math.prod(kept_shape)
    red_size = math.prod(in_shape[a] for a in reduced)
    if red_size == 0 and out_size and spec.identity is None:
        raise KspecValueError(
            f"zero-size array to reduction operation {kernel} which has no identity: kernel '{kernel}' cannot "
            f"reduce an empty selection (input shape {in_shape}, axis={axis!r})"
        )

    # strides of every non-raw array operand: inputs over the input shape, outputs over the kept shape
    in_full = {p.name: broadcast_strides(in_shape, bound.arrays[p.name].info.shape, bound.arrays[p.name].info.strides) for p in inputs}
    outs: dict[str, tuple[int, ...]] = {}
    for p in spec.out_params:
        if p.raw:
            continue
        given = bound.arrays.get(p.name)
        itemsize = dtypes.BY_NAME[bound.dtypes[p.name]].itemsize
        if given is None:
            outs[p.name] = c_strides(kept_shape, itemsize)
        elif keepdims:
            outs[p.name] = tuple(given.info.strides[a] for a in kept_axes)
        else:
            outs[p.name] = given.info.strides
    in_names, out_names = list(in_full), list(outs)

    kept_ext, kept_str = merge_dims(
        kept_shape, [[in_full[n][a] for a in kept_axes] for n in in_names] + [list(outs[n]) for n in out_names]
    )
    if len(kept_ext) > MAX_NDIM:
        raise KspecValueError(f"kernel '{kernel}': {len(kept_ext)} kept dims after merging, more than {MAX_NDIM}")
    # reduced axes ordered by the first input's stride, largest outer, then merged
    first = in_names[0]
    red_axes = sorted(reduced, key=lambda a: -abs(in_full[first][a]))
    red_ext, red_str = merge_dims([in_shape[a] for a in red_axes], [[in_full[n][a] for a in red_axes] for n in in_names])
    if red_size == 0 or not red_ext:
        red_ext, red_str = [red_size], [[0] for _ in in_names]
    rndim = 1 if len(red_ext) == 1 else DYNAMIC_NDIM
    if len(red_ext) > MAX_NDIM:
        raise KspecValueError(f"kernel '{kernel}': {len(red_ext)} reduced dims after merging, more than {MAX_NDIM}")

    n_in = len(in_names)
    in_strides = {
        n: (tuple(reversed(kept_str[i])), tuple(reversed(red_str[i]))) for i, n in enumerate(in_names)
    }
    out_strides = {n: tuple(reversed(kept_str[n_in + j])) for j, n in enumerate(out_names)}
    contiguous_cols = bool(kept_ext) and rndim == 1 and all(
        in_strides[n][0][0] == dtypes.BY_NAME[bound.dtypes[n]].itemsize
        and abs(in_strides[n][1][0]) > in_strides[n][0][0]
        for n in in_names
    )
    return ReductionPlan(
        specialization,
        in_shape,
        out_shape,
        allocate,
        out_size,
        red_size,
        tuple(reversed(kept_ext)),
        tuple(reversed(red_ext)),
        in_strides,
        out_strides,
        raw,
        rndim,
        contiguous_cols,
    )


@dataclass(frozen=True)
class Pass:
    """One kernel launch of a reduction."""

    variant: VariantKey
    grid: int
    block: int
    group: int = 0  # rows: lanes per segment
    nchunks: int = 1
    chunk: int = 0  # rows / split_final: elements per segment (the row length when nchunks is 1)


@dataclass(frozen=True)
class Strategy:
    """How a reduction runs: one or two passes, and the workspace the split needs (in reduce items)."""

    passes: tuple[Pass, ...]
    workspace_items: int = 0
    kind: str = "rows"  # "rows", "cols", "split", or "none"


# Shape classes (kspec/render/_abi.py describes the entries):
SHORT_ROW = 32  # rows of at most this many vectors: a power-of-two group of lanes (<= a warp) per row
SPLIT_MIN_ROW = 16384  # rows at least this long are split over several blocks when the outputs are few
BLOCKS_PER_SM = 4  # the grid a reduction aims at, in resident blocks per SM
REDUCE_UNROLL = 4  # loads a lane issues before using them (KSPEC_REDUCE_UNROLL of reduce.cuh)
WARPS_PER_SM = 64  # resident warps per SM on sm_80..sm_90 (2048 threads): what the cols grid aims to fill


def reduction_strategy(plan: ReductionPlan, sm_count: int, block_size: int | None = None) -> Strategy:
    """Pick the entry points, grid and block for ``plan`` on a device with ``sm_count`` SMs."""
    if plan.out_size == 0:
        return Strategy((), kind="none")
    variants = plan.specialization.variants
    vec = plan.specialization.vec
    rows_variant = next(v for v in variants if v.entry == "rows" and v.ndim == plan.rndim)
    block = block_size or DEFAULT_BLOCK
    block = max(32, block // 32 * 32)
    target_blocks = sm_count * BLOCKS_PER_SM
    red = plan.red_size

    if plan.contiguous_cols and plan.out_size >= 32 and red >= 2:
        cols = next(v for v in variants if v.entry == "cols")
        grid = min(-(-plan.out_size // 32), MAX_GRID)
        cap = COLS_MAX_WARPS if _acc_bytes_at_most(plan) <= COLS_WIDE_ACC else COLS_WIDE_WARPS
        if block_size is not None:
            warps = block // 32
        else:
            # 32 outputs per block: with few outputs, more warps per block split each row so that one wave
            # fills the device (axis=0 of a 16384^2 matrix: 512 blocks of 8 warps fill half of an H200; of
            # 16 warps, 4 per SM, all of it)
            warps = max(block // 32, WARPS_PER_SM // -(-grid // sm_count))
        warps = max(1, min(cap, warps, -(-red // (2 * REDUCE_UNROLL))))
        return Strategy((Pass(cols, grid, 32 * warps),), kind="cols")

    if red >= SPLIT_MIN_ROW and plan.out_size < target_blocks:
        nchunks_wanted = max(2, -(-target_blocks // plan.out_size))
        chunk = -(-red // nchunks_wanted)
        chunk = max(chunk, block * vec)  # at least one full block-wide vector sweep per chunk
        chunk = -(-chunk // vec) * vec
        nchunks = -(-red // chunk)
        if nchunks > 1:
            final = next(v for v in variants if v.entry == "split_final")
            segments = plan.out_size * nchunks
            first = Pass(rows_variant, min(segments, MAX_GRID), block, group=block, nchunks=nchunks, chunk=chunk)
            second = Pass(final, min(plan.out_size, MAX_GRID), block, nchunks=nchunks, chunk=chunk)
            return Strategy((first, second), workspace_items=segments, kind="split")

    vectors = -(-max(red, 1) // vec)
    if vectors <= SHORT_ROW:
        # a group small enough that each lane has REDUCE_UNROLL vectors in flight (rows of 16 float32: one
        # lane per row, four 16-byte loads; adjacent lanes read adjacent rows, so warps stay coalesced)
        group = 1
        while group * REDUCE_UNROLL < vectors:
            group *= 2
    elif red <= 4096:
        group = 32
    else:
        group = block
    per_block = block // group
    grid = max(1, min(-(-plan.out_size // per_block), sm_count * 32, MAX_GRID))
    return Strategy((Pass(rows_variant, grid, block, group=group, nchunks=1, chunk=red),), kind="rows")


def _acc_bytes_at_most(plan: ReductionPlan) -> float:
    """An upper bound of sizeof(kspec::Acc) in the templates: the reduce type, plus a has-value flag padded to
    the type's alignment (at most its size) without an identity; unbounded for an opaque C type."""
    reduce_type = plan.specialization.reduce_type
    item = reduce_type.itemsize if reduce_type is not None else None
    if item is None:
        return float("inf")
    spec = plan.specialization.spec
    return item if isinstance(spec, ReductionSpec) and spec.identity is not None else 2 * item
