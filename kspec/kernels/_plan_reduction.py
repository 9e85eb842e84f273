"""Call plans of ReductionKernel: reduced axes, merged layouts, and the strategy (entry points, grid, block).

Pure Python and driver-free, like :mod:`kspec.kernels._plan` (which holds the shared layout helpers and the
elementwise planner; see its docstring for the conventions). The non-raw inputs broadcast together;
``axis`` (None, int, tuple; negatives normalised) picks the reduced axes; kept axes stay in order, reduced
axes are ordered by stride (largest outer: which element is reduced first does not matter) and merged. Raw
inputs only when the reduced axes lead.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, NamedTuple

from .. import dtypes
from .._errors import AxisError, KspecNotImplementedError, KspecValueError, about_kernel
from ..render import COLS_MAX_WARPS, COLS_WIDE_ACC, COLS_WIDE_WARPS, DYNAMIC_NDIM, MAX_NDIM, Specialization, VariantKey
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: plans serve plain specs too, without the Pydantic models
    from ..spec import ReductionSpec
from ._bind import Bound
from ._plan import (
    DEFAULT_BLOCK,
    MAX_GRID,
    RawLayout,
    Specializer,
    as_int,
    broadcast_shape,
    broadcast_strides,
    c_strides,
    merge_dims,
    plan_outputs,
    raw_view_values,
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
            raise AxisError(f"axis {item} is out of bounds for array of dimension {ndim}: kernel '{kernel}'", axis=item, ndim=ndim)
        result.append(item % ndim if ndim else item)
    if len(set(result)) != len(result):
        raise KspecValueError(f"duplicate value in 'axis': kernel '{kernel}' got axis={axis!r}")
    return tuple(sorted(result))


class ReductionPlan(NamedTuple):
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
    contiguous_cols: bool  # the innermost kept dim is contiguous in every array input, the reduced dims outer
    inner_rows: bool = False  # several reduced dims, the innermost contiguous: two passes fit (see below)


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
            about_kernel(kernel, "a reduction needs at least one non-raw array input (its shape is reduced)")
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
        raise KspecValueError(about_kernel(kernel, f"{len(kept_ext)} kept dims after merging, more than {MAX_NDIM}"))
    # reduced axes ordered by the first input's stride, largest outer, then merged
    first = in_names[0]
    red_axes = sorted(reduced, key=lambda a: -abs(in_full[first][a]))
    red_ext, red_str = merge_dims([in_shape[a] for a in red_axes], [[in_full[n][a] for a in red_axes] for n in in_names])
    if red_size == 0 or not red_ext:
        red_ext, red_str = [red_size], [[0] for _ in in_names]
    rndim = 1 if len(red_ext) == 1 else DYNAMIC_NDIM
    if len(red_ext) > MAX_NDIM:
        raise KspecValueError(about_kernel(kernel, f"{len(red_ext)} reduced dims after merging, more than {MAX_NDIM}"))

    n_in = len(in_names)
    in_strides = {
        n: (tuple(reversed(kept_str[i])), tuple(reversed(red_str[i]))) for i, n in enumerate(in_names)
    }
    out_strides = {n: tuple(reversed(kept_str[n_in + j])) for j, n in enumerate(out_names)}
    # the innermost kept dim contiguous and every reduced dim outside it, in every input: the cols layout
    contiguous_cols = bool(kept_ext) and all(
        in_strides[n][0][0] == dtypes.BY_NAME[bound.dtypes[n]].itemsize
        and all(abs(r) > in_strides[n][0][0] for r in in_strides[n][1])
        for n in in_names
    )
    # Three or more reduced dims that do not merge, the innermost contiguous in every input and long enough
    # to be worth a pass of its own: reduction_strategy's "inner" strategy (two reduced dims run in one
    # pass: the templates split their index with a multiply-shift). Not when map_expr can see the row index
    # (_J) or the output count (_out_ind), which pass 1 would change, nor with raw parameters.
    inner_rows = (
        len(red_ext) > 2
        and red_size > 0
        and red_ext[-1] >= INNER_MIN_ROW
        and len(kept_ext) + len(red_ext) - 1 <= MAX_NDIM
        and not raw
        and not any(p.raw for p in spec.params)
        and _ROW_NAMES.search(spec.map_expr) is None
        and all(abs(red_str[i][-1]) == dtypes.BY_NAME[bound.dtypes[n]].itemsize for i, n in enumerate(in_names))
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
        inner_rows,
    )


class PassShape(NamedTuple):
    """The iteration shape of a pass that differs from its plan's (pass 1 of the "inner" strategy): the
    ReductionPlan fields of the same names, innermost first."""

    out_size: int
    red_size: int
    kept: tuple[int, ...]
    red: tuple[int, ...]
    in_strides: dict[str, tuple[tuple[int, ...], tuple[int, ...]]]
    out_strides: dict[str, tuple[int, ...]]


class Pass(NamedTuple):
    """One kernel launch of a reduction."""

    variant: VariantKey
    grid: int
    block: int
    group: int = 0  # rows: lanes per segment
    nchunks: int = 1
    chunk: int = 0  # rows / split_final: elements per segment (the row length when nchunks is 1)
    shape: PassShape | None = None  # None: the plan's shape


class Strategy(NamedTuple):
    """How a reduction runs: one or two passes, and the workspace the split needs (in reduce items)."""

    passes: tuple[Pass, ...]
    workspace_items: int = 0
    kind: str = "rows"  # "rows", "cols", "cols split", "split", "inner", or "none"


# Shape classes (kspec/render/_abi.py describes the entries):
SHORT_ROW = 32  # rows of at most this many vectors: a power-of-two group of lanes (<= a warp) per row
SPLIT_MIN_ROW = 16384  # rows at least this long are split over several blocks when the outputs are few
BLOCKS_PER_SM = 4  # the grid a reduction aims at, in resident blocks per SM
REDUCE_UNROLL = 4  # loads a lane issues before using them (KSPEC_REDUCE_UNROLL of reduce.cuh)
WARPS_PER_SM = 64  # resident warps per SM on sm_80..sm_90 (2048 threads): what the cols grid aims to fill
INNER_MIN_ROW = 16  # the "inner" strategy needs an innermost reduced extent of at least this many elements
_ROW_NAMES = re.compile(r"\b(_J|_out_ind)\b")


def reduction_strategy(plan: ReductionPlan, sm_count: int, block_size: int | None = None,
                       max_threads: Callable[[VariantKey], int] | None = None) -> Strategy:
    """Pick the entry points, grid and block for ``plan`` on a device with ``sm_count`` SMs; ``max_threads``
    tells a loaded entry's largest block (its registers decide), for the entries that may launch more than
    256 threads."""
    if plan.out_size == 0:
        return Strategy((), kind="none")
    variants = plan.specialization.variants
    vec = plan.specialization.vec
    rows_variant = next(v for v in variants if v.entry == "rows" and v.ndim == plan.rndim)
    block = block_size or DEFAULT_BLOCK
    block = max(32, block // 32 * 32)
    target_blocks = sm_count * BLOCKS_PER_SM
    red = plan.red_size

    if plan.inner_rows:
        return _inner(plan, sm_count, block, rows_variant=next(v for v in variants if v.entry == "rows" and v.ndim == 1))
    group = _row_group(plan, vec, sm_count)

    if plan.contiguous_cols and plan.out_size >= 32 and red >= 2:
        return _cols(plan, sm_count, block, block_size is not None, max_threads)

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

    return Strategy((_rows_pass(rows_variant, plan.out_size, red, vec, block, sm_count, group=group),), kind="rows")


def _row_group(plan: ReductionPlan, vec: int, sm_count: int) -> int | None:
    """Two reduced dims whose inner one is at most 32 vectors long (axes (1, 3) of (1024, 16, 256, 16)),
    with outputs enough to fill the device that way: a group of exactly that many lanes, each lane walking
    the outer reduced dim at one position of the inner row, so that a warp reads the rows of adjacent
    outputs, adjacent in memory, whole instead of 64-byte pieces of rows far apart (see
    benchmarks/layouts.py --sweep); None: :func:`_rows_pass` sizes the group by the row length."""
    if len(plan.red) != 2 or plan.red[0] % vec:
        return None
    lanes = plan.red[0] // vec
    if lanes > 32 or lanes & (lanes - 1) or plan.out_size * lanes < sm_count * ROW_GROUP_MIN_WARPS * 32:
        return None
    return lanes


def _rows_pass(variant: VariantKey, out_size: int, red: int, vec: int, block: int, sm_count: int,
               group: int | None = None, **extra: object) -> Pass:
    """A ``rows`` launch over ``out_size`` rows of ``red`` elements: the group size for the row length,
    unless ``group`` is given."""
    if group is None:
        group = _group_for_row(red, vec, block)
    per_block = block // group
    grid = max(1, min(-(-out_size // per_block), sm_count * 32, MAX_GRID))
    return Pass(variant, grid, block, group=group, chunk=red, **extra)  # type: ignore[arg-type]


def _group_for_row(red: int, vec: int, block: int) -> int:
    vectors = -(-max(red, 1) // vec)
    if vectors <= SHORT_ROW * REDUCE_UNROLL:
        # a group small enough that each lane has REDUCE_UNROLL vectors in flight (rows of 16 float32: one
        # lane per row, four 16-byte loads; adjacent lanes read adjacent rows, so warps stay coalesced;
        # rows of 256 float32: 16 lanes, four loads each)
        group = 1
        while group * REDUCE_UNROLL < vectors:
            group *= 2
        return group
    return 32 if red <= 4096 else block


ROW_GROUP_MIN_WARPS = 12  # warps per SM a group of the inner row's length must give: ~25 KB of loads in flight
COLS_MIN_CHUNK = 16  # reduced elements per warp of a cols split block, at least: 4 rounds of 4 loads each
# the runtime-rank cols entry's block, at most, in warps: its registers do not allow 1024 threads everywhere
COLS_RUNTIME_RANK_WARPS = 16


def _cols(plan: ReductionPlan, sm_count: int, block: int, block_given: bool,
          max_threads: Callable[[VariantKey], int] | None) -> Strategy:
    """32 adjacent outputs per block, the warps of a block splitting their rows; when the tiles of 32
    outputs are too few to fill the device with warps, the rows split over several blocks too (a workspace
    of partials and ``split_final``): axes (0, 2) of a (1024, 16, 32, 16) array has 8 tiles of 32k elements."""
    variants = plan.specialization.variants
    cols = next(v for v in variants if v.entry == "cols" and v.ndim == plan.rndim)
    red = plan.red_size
    tiles = -(-plan.out_size // cols_tile_width(plan))
    cap = COLS_MAX_WARPS if _acc_bytes_at_most(plan) <= COLS_WIDE_ACC else COLS_WIDE_WARPS
    if plan.rndim != 1:
        cap = min(cap, COLS_RUNTIME_RANK_WARPS)
    if max_threads is not None and (most := max_threads(cols)) > 0:
        cap = min(cap, max(1, most // 32))
    if block_given:
        warps = block // 32
    else:
        # 32 outputs per block: with few outputs, more warps per block split each row so that one wave
        # fills the device (axis=0 of a 16384^2 matrix: 512 blocks of 8 warps fill half of an H200; of
        # 16 warps, 4 per SM, all of it)
        warps = max(block // 32, WARPS_PER_SM // -(-min(tiles, MAX_GRID) // sm_count))
    warps = max(1, min(cap, warps, -(-red // (2 * REDUCE_UNROLL))))
    wanted = WARPS_PER_SM * sm_count  # warps that fill the device
    if tiles * warps < wanted // 2:
        nchunks = -(-wanted // (tiles * warps))
        chunk = max(-(-red // nchunks), COLS_MIN_CHUNK * warps)
        nchunks = -(-red // chunk)
        if nchunks > 1:
            final = next(v for v in variants if v.entry == "split_final")
            first = Pass(cols, min(tiles * nchunks, MAX_GRID), 32 * warps, nchunks=nchunks, chunk=chunk)
            second = Pass(final, min(plan.out_size, MAX_GRID), _final_block(block, nchunks), nchunks=nchunks, chunk=chunk)
            return Strategy((first, second), workspace_items=plan.out_size * nchunks, kind="cols split")
    return Strategy((Pass(cols, min(tiles, MAX_GRID), 32 * warps, chunk=red),), kind="cols")


def cols_tile_width(plan: ReductionPlan) -> int:
    """Outputs per cols tile: 32, or (runtime rank) the innermost kept extent when it is a power of two below
    32 and the innermost reduced dim lies right outside it in every input: the templates' cols entry
    applies the same rule and shares each warp between that many outputs and 32 / width reduced positions."""
    width = plan.kept[0] if plan.kept else 32
    if plan.rndim == 1 or width >= 32 or width & (width - 1):
        return 32
    if all(red[0] == width * kept[0] for kept, red in plan.in_strides.values()):
        return width
    return 32


def _final_block(block: int, nchunks: int) -> int:
    """split_final's block: a thread per partial, in whole warps, at most ``block``."""
    return min(block, max(32, -(-nchunks // 32) * 32))


def _inner(plan: ReductionPlan, sm_count: int, block: int, rows_variant: VariantKey) -> Strategy:
    """Reduced dims that do not merge (axes (1, 3) of a 4-d array), in two passes without per-element index
    arithmetic (the runtime-rank rows entry unravels every element with 64-bit divisions: 0.23 of copy).

    Pass 1 is ``rows`` with one reduced dim, the innermost (contiguous: vector loads): its "outputs" are the
    rows of that dim, with the outer reduced dims as the innermost kept dims, so that row ``o * R + s``
    (output o, s over the R outer reduced positions) writes partial ``o * R + s``: the split workspace layout
    with nchunks = R. Pass 2 is ``split_final``, which merges each output's R partials and applies post_map.
    """
    outer = plan.red[1:]  # the outer reduced extents, innermost first
    nchunks = math.prod(outer)
    pass1_shape = PassShape(
        out_size=plan.out_size * nchunks,
        red_size=plan.red[0],
        kept=outer + plan.kept,
        red=plan.red[:1],
        in_strides={n: (red[1:] + kept, red[:1]) for n, (kept, red) in plan.in_strides.items()},
        # outputs are not written by pass 1, but its kept offsets cover them: zero along the reduced dims
        out_strides={n: (0,) * len(outer) + kept for n, kept in plan.out_strides.items()},
    )
    vec = plan.specialization.vec
    first = _rows_pass(rows_variant, pass1_shape.out_size, plan.red[0], vec, block, sm_count, shape=pass1_shape)
    final = next(v for v in plan.specialization.variants if v.entry == "split_final")
    second = Pass(final, min(plan.out_size, MAX_GRID), _final_block(block, nchunks), nchunks=nchunks, chunk=plan.red[0])
    return Strategy((first, second), workspace_items=pass1_shape.out_size, kind="inner")


def _acc_bytes_at_most(plan: ReductionPlan) -> float:
    """An upper bound of sizeof(kspec::Acc) in the templates: the reduce type, plus a has-value flag padded to
    the type's alignment (at most its size) without an identity; unbounded for an opaque C type."""
    reduce_type = plan.specialization.reduce_type
    item = reduce_type.itemsize if reduce_type is not None else None
    if item is None:
        return float("inf")
    spec = plan.specialization.spec
    return item if spec.KIND == "reduction" and spec.identity is not None else 2 * item


def pass_frame_values(plan: ReductionPlan, step: Pass) -> dict[str, Any]:
    """One pass's part of its launch's parameter frame (kspec/kernels/_frame.py): everything that is not a
    pointer or a scalar value."""
    final = step.variant.entry == "split_final"
    shape = step.shape or plan  # pass 1 of the "inner" strategy has a shape of its own
    static: dict[str, Any] = {
        "_reduce_shape": {
            "out_size": shape.out_size,
            "red_size": shape.red_size,
            "kept_extent": shape.kept,
            "red_extent": shape.red if not final else (shape.red_size,),
            "kept_ndim": len(shape.kept),
            "red_ndim": len(shape.red) if not final else 1,
        },
        "_group": step.group,
        "_workspace": {"nchunks": step.nchunks, "chunk": step.chunk},
    }
    for name, (kept, red) in shape.in_strides.items():
        static[name] = {"kept_stride": kept, "red_stride": red}
    for name, kept in shape.out_strides.items():
        static[name] = {"stride": kept}
    for name, layout in plan.raw.items():
        static[name] = raw_view_values(layout)
    return static
