"""Call plans of ElementwiseKernel / ReductionKernel without a GPU: shapes, layouts, variants, grids, frames."""

from __future__ import annotations

import ctypes
import io
import math
import re

import numpy as np
import pytest

import kspec
from kspec.compiler import rendered_module
from kspec.kernels.planning._binding import bind, scalar_bytes
from kspec.kernels.callpath._frame import Frame
from kspec.kernels.callpath._signature import make_dispatcher
from kspec.kernels.planning._loop_order import runs_pay, sector_span, warp_sectors
from kspec.kernels.planning._plan import broadcast_strides, frame_values, merge_dims, plan_elementwise
from kspec.kernels.planning._reduction_plan import normalize_axis, plan_reduction
from kspec.kernels.planning._cols_tiles import cols_tile_width
from kspec.kernels.planning._reduction_strategy import pass_frame_values, reduction_strategy
from kspec._resources import templates_dir
from kspec.render import VariantKey, stacked_planes, tiled_layout, tiled_variant
from kspec.render._variants import SHAPED_TILE_GAIN, TILE_STACK_BYTES, tiled_step
from kspec.runtime._devicearray import DeviceArray

PTR = 0x7F0000000000
H200_SMS = 132


def fake(shape, dtype="float32", strides=None, ptr=PTR):
    return DeviceArray._wrap(ptr, tuple(shape), np.dtype(dtype), 0, None, strides=strides)


def transposed(shape, dtype="float32"):
    """A fake view of a C-contiguous array of ``shape`` reversed, transposed back (like ``x.T``)."""
    c = np.empty(tuple(reversed(shape)), dtype).strides
    return fake(shape, dtype, strides=tuple(reversed(c)))


@pytest.fixture(scope="module")
def sqd():
    return kspec.ElementwiseKernel("T x, T y", "T z", "z = (x - y) * (x - y)", "sqd")


@pytest.fixture(scope="module")
def ssq():
    return kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "ssq")


def eplan(kernel, *args, **kwargs):
    nin = kernel.nin
    bound = bind(kernel.spec, args[:nin], args[nin:] or None)
    return bound, plan_elementwise(kernel.spec, bound, kernel._specializer, **kwargs)


def rplan(kernel, *args, axis=None, keepdims=False):
    bound = bind(kernel.spec, args[: kernel.nin], args[kernel.nin :] or None)
    return bound, plan_reduction(kernel.spec, bound, kernel._specializer, axis=axis, keepdims=keepdims)


# -- helpers ---------------------------------------------------------------------------------------------


def test_merge_dims_merges_contiguous_axes_and_drops_ones():
    extents, strides = merge_dims([2, 1, 3, 4], [[48, 999, 16, 4], [0, 0, 0, 4]])
    # the extent-1 axis goes whatever its stride; operand 2 is broadcast over both outer axes, so they merge,
    # but its stride 0 then 4 keeps the inner axis apart
    assert extents == [6, 4]
    assert strides == [[16, 4], [0, 4]]
    extents, strides = merge_dims([2, 3, 4], [[48, 16, 4], [96, 32, 8]])
    assert extents == [24] and strides == [[4], [8]]


def test_broadcast_strides_zero_on_broadcast_axes():
    assert broadcast_strides((2, 3, 5), (5,), (4,)) == (0, 0, 4)
    assert broadcast_strides((2, 3, 5), (3, 1), (4, 4)) == (0, 4, 0)


@pytest.mark.parametrize(
    "axis, ndim, expected",
    [(None, 3, (0, 1, 2)), (-1, 3, (2,)), ((2, 0), 3, (0, 2)), ([1], 2, (1,)), (np.int64(1), 2, (1,)), ((), 2, ())],
)
def test_normalize_axis(axis, ndim, expected):
    assert normalize_axis("k", axis, ndim) == expected


# -- elementwise -------------------------------------------------------------------------------------------


def test_contiguous_operands_take_the_contig_variant_with_a_device_sized_grid(sqd):
    _, plan = eplan(sqd, fake((1 << 28,)), fake((1 << 28,)))
    assert plan.variant == VariantKey("contig", "int64", 0, 4)
    assert plan.grid(H200_SMS) == (1 << 28) // (4 * 256)  # a thread per vector of 4, as CuPy a thread per element
    _, small = eplan(sqd, fake((1000,)), fake((1000,)))
    assert small.grid(H200_SMS) == 1


def test_a_body_over_raw_arrays_alone_gets_one_thread_per_element():
    # cupyx.scipy.ndimage.label's union-find: raw arrays and size=, per-element work of varying length
    connect = kspec.ElementwiseKernel("raw int32 shape", "raw Y y", "if (y[i] < 0) continue; y[i] = shape[0];", "own_idx")
    n = 1 << 22
    _, plan = eplan(connect, fake((2,), "int32"), fake((n,), "int32"), size=n)
    assert plan.variant.entry == "contig" and plan.grid(H200_SMS) == n // plan.block  # not capped at 16 per SM
    # raw arrays beside array operands (ndimage.zoom, map_coordinates: gathers through a raw input): the same,
    # and no vector variant
    half = kspec.ElementwiseKernel("raw int32 shape, int32 x", "raw Y y", "y[i] = x;", "own_idx_mixed")
    _, mixed = eplan(half, fake((2,), "int32"), fake((n,), "int32"), fake((n,), "int32"))
    assert mixed.variant == VariantKey("contig", "int64", 0, 1) and mixed.grid(H200_SMS) == n // mixed.block
    plain = kspec.ElementwiseKernel("int32 x", "Y y", "y = x;", "no_raw")
    _, capped = eplan(plain, fake((n,), "int32"), fake((n,), "int32"))
    assert capped.variant.vec == 4 and capped.grid(H200_SMS) == n // (4 * capped.block)  # a thread per vector
    assert capped._replace(per_sm=16).grid(H200_SMS) == H200_SMS * 16  # a record's per_sm: a grid-stride grid


def test_broadcast_row_takes_the_2d_int32_strided_variant(sqd):
    bound, plan = eplan(sqd, fake((2, 5)), fake((5,)))
    assert plan.shape == (2, 5) and plan.allocate == (("z", "float32"),)
    assert plan.variant == VariantKey("strided", "int32", 2, 1)
    assert plan.extents == (5, 2)  # innermost first
    assert plan.strides == {"x": (4, 20), "y": (4, 0), "z": (4, 20)}
    assert plan.grid(H200_SMS) == 1


def test_transposed_operand_is_tiled_and_dims_merge_where_they_can(sqd):
    _, plan = eplan(sqd, transposed((400, 300)), fake((400, 300)))
    assert plan.variant == VariantKey("tiled", "int32", 0, 32) and plan.extents == (300, 400)
    # a 4-d call whose outer axes merge into one
    _, plan = eplan(sqd, fake((2, 3, 4, 5)), fake((4, 1)))
    assert plan.extents == (5, 4, 6) and plan.variant == VariantKey("strided", "int32", 0, 1)


def test_reduce_dims_false_keeps_every_axis(sqd):
    k = kspec.ElementwiseKernel("T x, T y", "T z", "z = x - y", "nomerge", reduce_dims=False)
    _, plan = eplan(k, fake((2, 3, 4)), fake((4,)))
    assert plan.extents == (4, 3, 2)


def test_64bit_index_when_an_operand_reaches_beyond_2_31_bytes(sqd):
    n = 1 << 28  # every other row of a (2n, 2) float32 array: its last element is 4 GiB from the first
    big = fake((n, 2), strides=(16, 4))
    _, plan = eplan(sqd, big, fake((n, 2)))
    assert plan.variant == VariantKey("strided", "int64", 0, 1)


def test_64bit_loops_take_chunks_up_to_2_32_elements(sqd):
    # a 64-bit launch walks its chunks in 32-bit coordinates (indexer.cuh's walk_fits): blocks of chunks up to 2**32
    # elements, a thread per element past them; 5 dims or more: a thread per element at any size
    for shape, chunked in (((1 << 15, 1 << 15), True), (((1 << 16) + 1, 1 << 16), False), (((1 << 16) - 1, 1 << 16), True)):
        _, plan = eplan(sqd, transposed(shape), fake(shape))
        assert plan.variant == VariantKey("strided", "int64", 0, 1), shape
        assert (plan.grid(H200_SMS) * plan.block < plan.size) == chunked, shape
    five = fake((2, 3, 1 << 10, 1 << 10, 1 << 8), strides=(1 << 30, 1 << 29, 4, 1 << 12, 1 << 22))
    _, plan = eplan(sqd, five, fake(five.shape))
    assert plan.variant.index == "int64" and len(plan.extents) == 5 and plan.grid(H200_SMS) * plan.block >= plan.size


def test_an_indexed_body_beyond_2_31_bytes_keeps_its_static_rank():
    # CuPy's ndimage kernels: `_raw_y` over the loop, reduce_dims off. A 4 GiB volume needs 64-bit offsets; with a
    # runtime rank the index and the view sit in local memory, written per element (21x slower on an H100)
    body = "const ptrdiff_t n0 = _raw_y.shape()[0]; y = x[i % n0]"
    nd = kspec.ElementwiseKernel("raw T x", "T y", body, "ndimage_like", reduce_dims=False)
    # The body reads views only: a C-contiguous output takes the dense entry (addressed by the flat index), any
    # other layout the strided one (each element's index unravelled), at the same rank and index width
    x = fake((16,))
    assert eplan(nd, x, fake((256, 1024, 1024)))[1].variant == VariantKey("dense", "int32", 3, 1)
    assert eplan(nd, x, fake((1026, 1024, 1024)))[1].variant == VariantKey("dense", "int64", 3, 1)
    assert eplan(nd, x, fake((2, 1026, 1024, 1024)))[1].variant == VariantKey("dense", "int64", 0, 1)
    assert eplan(nd, x, transposed((256, 1024, 1024)))[1].variant == VariantKey("strided", "int32", 3, 1)
    assert eplan(nd, x, transposed((1026, 1024, 1024)))[1].variant == VariantKey("strided", "int64", 3, 1)
    assert eplan(nd, x, transposed((2, 1026, 1024, 1024)))[1].variant == VariantKey("strided", "int64", 0, 1)
    # a body that reads the n-d index has no dense entry: the strided one, whatever the layout
    reads = kspec.ElementwiseKernel("raw T x", "T y", "y = x[_ind.get()[0] % 16]", "ndimage_like_index", reduce_dims=False)
    assert eplan(reads, x, fake((256, 1024, 1024)))[1].variant == VariantKey("strided", "int32", 3, 1)


def test_zero_size_plans_no_launch_but_allocates(sqd):
    _, plan = eplan(sqd, fake((0, 5)), fake((5,)))
    assert plan.variant is None and plan.shape == (0, 5) and plan.allocate == (("z", "float32"),)


def test_scalars_specialise_and_do_not_bind(sqd):
    bound, plan = eplan(sqd, fake((3,), "float64"), 2)
    assert bound.types == {"T": "float64"} and bound.scalars == {"y": np.float64(2).tobytes()}
    assert plan.specialization.scalars == frozenset({"y"})


def test_size_with_all_raw_arguments():
    k = kspec.ElementwiseKernel("raw T x", "T y", "y = x[i % x.size()]", "rawonly")
    _, plan = eplan(k, fake((7,)), size=20)
    assert plan.shape == (20,) and plan.variant.entry == "contig" and "x" in plan.raw
    assert plan.raw["x"].shape == (7,) and plan.raw["x"].c_contiguous


@pytest.mark.parametrize(
    "value, dtype, expected",
    [
        (3, "int8", np.int8(3)),
        (True, "float32", np.float32(1)),
        (2.5, "float16", np.float16(2.5)),
        (1 + 2j, "complex64", np.complex64(1 + 2j)),
        (np.float64(0.1), "float32", np.float32(0.1)),
        (2**64 - 1, "uint64", np.uint64(2**64 - 1)),
    ],
)
def test_scalar_conversion_bytes(value, dtype, expected):
    assert scalar_bytes("k", "p", value, dtype) == expected.tobytes()


def test_bfloat16_scalar_rounds_to_nearest_even():
    assert scalar_bytes("k", "p", 1.0, "bfloat16") == np.uint16(0x3F80).tobytes()
    assert scalar_bytes("k", "p", 1.00390625, "bfloat16") == np.uint16(0x3F80).tobytes()  # tie: even
    assert scalar_bytes("k", "p", 1.01171875, "bfloat16") == np.uint16(0x3F82).tobytes()  # tie: up to even


def test_frame_bytes_follow_the_abi(sqd):
    bound, plan = eplan(sqd, fake((2, 5)), fake((5,)))
    rendered = rendered_module(plan.specialization)
    abi = rendered.abi[plan.variant]
    frame = Frame(abi, frame_values(plan))
    address = frame.fill({"x": 0x1000, "y": 0x2000, "z": 0x3000}, bound.scalars)
    slots = (ctypes.c_void_p * len(abi.slots)).from_address(address)
    base = slots[0]
    raw = ctypes.string_at(base, abi.size)
    record = np.frombuffer(raw, abi.numpy_dtype())[0]
    assert record["_shape"]["size"] == 10 and list(record["_shape"]["extent"]) == [5, 2]
    assert record["x"]["ptr"] == 0x1000 and list(record["x"]["stride"]) == [4, 20]
    assert record["y"]["ptr"] == 0x2000 and list(record["y"]["stride"]) == [4, 0]
    assert [slots[i] - base for i in range(len(abi.slots))] == list(abi.offsets)


# -- reduction ---------------------------------------------------------------------------------------------


def test_reduction_axis1_of_a_short_matrix_uses_small_groups(ssq):
    _, plan = rplan(ssq, fake((2, 5)), axis=1)
    assert plan.out_shape == (2,) and plan.kept == (2,) and plan.red == (5,)
    strategy = reduction_strategy(plan, H200_SMS)
    assert strategy.kind == "rows" and strategy.passes[0].group == 1  # 2 vectors: one lane holds both
    _, plan = rplan(ssq, fake((1 << 24, 16)), axis=1)
    assert reduction_strategy(plan, H200_SMS).passes[0].group == 1  # 4 vectors of 16 bytes per lane
    _, plan = rplan(ssq, fake((1000, 100)), axis=1)
    assert reduction_strategy(plan, H200_SMS).passes[0].group == 8  # 25 vectors: 8 lanes, <= 4 each


def test_reduction_axis0_of_a_c_matrix_is_column_wise(ssq):
    _, plan = rplan(ssq, fake((1000, 333)), axis=0)
    assert plan.contiguous_cols
    strategy = reduction_strategy(plan, H200_SMS)
    assert strategy.kind == "cols split" and strategy.passes[0].block % 32 == 0 and strategy.passes[0].block <= 1024
    _, plan = rplan(ssq, fake((1 << 14, 1 << 14)), axis=0)
    first = reduction_strategy(plan, H200_SMS).passes[0]
    assert first.grid == 512 and first.block == 512  # 4 blocks of 16 warps per SM: one full wave
    assert reduction_strategy(plan, H200_SMS, block_size=128).passes[0].block == 128  # the caller's choice


def test_eight_or_more_contiguous_outputs_take_the_cols_split(ssq):
    """8 or 16 contiguous outputs of long columns: the cols entry (a tile with 8 or 16 lanes at work), its rows
    split over the device; fewer outputs take it only where each row follows the one before (warps shared between
    rows: NHWC per channel), else they keep the rows entry's split."""
    for kept, dtype in ((8, "float64"), (16, "float32"), (31, "float16"), (4, "float32")):
        _, plan = rplan(ssq, fake((2048, 1024, kept), dtype), axis=(0, 1))
        strategy = reduction_strategy(plan, H200_SMS)
        assert strategy.kind == "cols split" and strategy.passes[0].variant.entry == "cols", (kept, dtype)
    _, plan = rplan(ssq, fake((1 << 21, 4), strides=(32, 4)), axis=0)  # rows 8 elements apart: no warp shares them
    assert reduction_strategy(plan, H200_SMS).kind == "split"


def test_full_reduction_of_a_long_array_splits_in_two_passes(ssq):
    _, plan = rplan(ssq, fake((1 << 24,)))
    assert plan.out_shape == () and plan.out_size == 1 and plan.red_size == 1 << 24
    strategy = reduction_strategy(plan, H200_SMS)
    first, second = strategy.passes
    assert strategy.kind == "split" and first.nchunks > 1 and first.chunk % 4 == 0
    assert (first.nchunks - 1) * first.chunk < plan.red_size <= first.nchunks * first.chunk  # no empty chunk
    assert second.variant.entry == "split_final" and strategy.workspace_items == first.nchunks


def test_splits_over_two_reduced_dims_take_smaller_blocks(ssq):
    _, plan = rplan(ssq, fake((16, 64, 16, 1024)), axis=(1, 3))  # 256 rows of 65536: too few for the device
    first = reduction_strategy(plan, H200_SMS, slab=False).passes[0]
    assert first.variant.ndim == 0 and first.block == first.group == 128
    assert first.grid == 256 * first.nchunks and first.nchunks == 8 * H200_SMS // 256  # 8 blocks of 128 per SM
    held = reduction_strategy(plan, H200_SMS, resident=lambda variant, threads: 5, slab=False).passes[0]
    assert held.nchunks == 5 * H200_SMS // 256  # as many as its registers let an SM hold
    assert reduction_strategy(plan, H200_SMS, block_size=256, slab=False).passes[0].block == 256  # the caller's block
    _, plan = rplan(ssq, fake((1 << 24,)))  # one reduced dim: blocks of DEFAULT_BLOCK as before
    assert reduction_strategy(plan, H200_SMS, slab=False).passes[0].block == 256


def test_splits_of_fewer_rows_than_sms_over_two_reduced_dims_take_blocks_of_256(ssq):
    """NCHW statistics over (0, 2, 3) with a few channels: each row splits into many chunks, walked by 4 blocks of
    256 threads per SM rather than 8 of 128; inner pieces of a few vectors, and many rows, keep 128."""
    for shape, dtype in (((8, 32, 32, 2048), "float16"), ((64, 32, 64, 512), "float32")):
        _, plan = rplan(ssq, fake(shape, dtype), axis=(0, 2, 3))
        strategy = reduction_strategy(plan, H200_SMS, slab=False)
        first = strategy.passes[0]
        assert strategy.kind == "split" and first.block == first.group == 256, shape
        assert strategy.passes[1].dependent, shape  # split_final launches as the rows blocks begin
        assert first.nchunks == 4 * H200_SMS // 32 and first.grid == 32 * first.nchunks, shape
    _, plan = rplan(ssq, fake((1024, 256, 16, 12)), axis=(0, 1, 3))  # inner pieces of 3 vectors
    assert reduction_strategy(plan, H200_SMS, slab=False).passes[0].block == 128
    _, plan = rplan(ssq, fake((4, 256, 64, 1024)), axis=(0, 2, 3))  # 256 rows: more than the SMs
    first = reduction_strategy(plan, H200_SMS, slab=False).passes[0]
    assert first.block == 128 and first.nchunks == 8 * H200_SMS // 256


def test_rows_of_a_few_thousand_take_a_warp_each_unless_they_are_few(ssq):
    def group(shape, axis=1):
        _, plan = rplan(ssq, fake(shape), axis=axis)
        return reduction_strategy(plan, H200_SMS).passes[0].group

    assert group((1 << 18, 1000)) == 32  # many rows: a warp each, 2 rounds of 4 loads per lane
    # fewer rows than SMs x rounds: a block each reads its row in one round
    assert group((4096,), None) == 256 and group((528, 4096)) == 256 and group((132, 1024)) == 256
    assert group((1056, 4096)) == 32 and group((264, 1024)) == 32


def test_long_rows_with_many_outputs_take_a_block_per_row(ssq):
    _, plan = rplan(ssq, fake((1000, 100000)), axis=1)
    strategy = reduction_strategy(plan, H200_SMS)
    assert strategy.kind == "rows" and strategy.passes[0].group == strategy.passes[0].block


def test_reduction_over_axes_1_and_3_of_4d(ssq):
    _, plan = rplan(ssq, fake((2, 3, 4, 5)), axis=(1, 3), keepdims=True)
    assert plan.out_shape == (2, 1, 4, 1)
    assert plan.kept == (4, 2) and plan.red == (5, 3) and plan.rndim == 0
    assert plan.in_strides["x"] == ((20, 240), (4, 80))
    assert plan.out_strides["y"] == (4, 16)


def test_reduced_axes_merge_into_one_when_contiguous(ssq):
    _, plan = rplan(ssq, fake((6, 7, 8)), axis=(1, 2))
    assert plan.red == (56,) and plan.rndim == 1 and plan.kept == (6,)


def test_zero_size_reductions(ssq):
    _, plan = rplan(ssq, fake((0, 5)), axis=0)
    assert plan.out_shape == (5,) and plan.red_size == 0 and plan.red == (0,)
    assert reduction_strategy(plan, H200_SMS).passes[0].chunk == 0
    _, plan = rplan(ssq, fake((0, 5)), axis=1)
    assert plan.out_size == 0 and reduction_strategy(plan, H200_SMS).passes == ()


def test_reduction_inputs_broadcast_together():
    k = kspec.ReductionKernel("T x, T w", "T y", "x * w", "a + b", "y = a", "0", "dot_rows")
    _, plan = rplan(k, fake((4, 6)), fake((1, 6)), axis=1)
    assert plan.in_strides["w"] == ((0,), (4,)) and plan.out_shape == (4,)


# -- repeated calls (kspec/kernels/callpath/_signature.py, _prepared.py) ----------------------------------------------


def signature(args, several_devices=False):
    """(table key, pointers, producers) of a call as the call path reads it, or None where it always plans."""
    dispatcher = make_dispatcher(tuple(type(a) for a in args), several_devices, [0], lambda: None)
    read = None if dispatcher is None else dispatcher.read(args)
    return None if read is None else ((type(args[-1]), *read[0]), read[1], read[2])


def test_signature_reads_shapes_strides_dtypes_devices_and_scalar_types():
    a, b = fake((2, 3), ptr=0x1000), fake((2, 3), ptr=0x2000)
    key_a, pointers, producers = signature((a, 2.0))
    key_b, _, _ = signature((b, 3.0))
    assert key_a == key_b and pointers == (0x1000, 0)  # values and pointers are not part of it
    assert producers == []  # no __cuda_array_interface__ producer stream to order
    assert signature((fake((3, 2)), 2.0))[0] != key_a
    assert signature((fake((2, 3), strides=(4, 8)), 2.0))[0] != key_a
    assert signature((fake((2, 3), dtype="float64"), 2.0))[0] != key_a
    assert signature((a, 2))[0] != key_a  # an int scalar converts differently (a table per argument types)
    assert signature((a, object())) is None  # anything else is planned on every call
    several = signature((a, 2.0), several_devices=True)[0]
    assert several != key_a and a.device.id in several  # several devices: the device is part of it


def test_scalar_packers_fall_back_to_the_full_conversion():
    from kspec.kernels.callpath._prepared import scalar_packer

    to_int8 = scalar_packer("k", "coef", "int8", int)
    assert to_int8(-5) == np.int8(-5).tobytes()
    with pytest.raises(kspec.KspecOverflowError, match="coef"):
        to_int8(300)
    to_f32 = scalar_packer("k", "coef", "float32", float)
    assert to_f32(0.1) == np.float32(0.1).tobytes()
    assert to_f32(1e300) == np.float32(np.inf).tobytes()  # as NumPy converts it
    with pytest.raises(kspec.KspecTypeError, match="coef"):
        scalar_packer("k", "coef", "int32", float)(2.5)
    assert scalar_packer("k", "coef", "float16", float)(1e6) == np.float16(np.inf).tobytes()


def test_strided_grid_unrolls_only_when_inner_strides_are_dense(sqd):
    """A broadcast row vector keeps unit inner strides: fewer threads, four elements each in flight. A
    transposed input does not: a block per chunk of four elements a thread, the blocks in flight over one
    window of the loop (see ElementwisePlan.grid); a runtime rank above 4 keeps one element per thread."""
    n = 1 << 14
    _, broadcast = eplan(sqd, fake((n, n)), fake((n,)))
    assert broadcast.variant.entry == "strided" and broadcast.inner_dense
    assert broadcast.grid(H200_SMS) == H200_SMS * 16
    # a transposed input takes the tiled entry; with a block size it cannot have, the strided one
    _, across = eplan(sqd, transposed((n, n)), fake((n, n)), block_size=128)
    assert across.variant.entry == "strided" and not across.inner_dense
    assert across.grid(H200_SMS) == n * n // (4 * 128)
    _, ragged = eplan(sqd, transposed((3, 1000, 7)), fake((3, 1000, 7)))  # rank 3 at run time: chunks too
    assert ragged.variant == VariantKey("strided", "int32", 0, 1)
    assert ragged.grid(H200_SMS) == -(-3 * 1000 * 7 // (4 * 256))
    gather = kspec.ElementwiseKernel("T x, raw T t", "T y", "y = x + t[0]", "gather_plan")
    _, raw = eplan(gather, transposed((3, 1000, 7)), fake((4,)), fake((3, 1000, 7)))  # gathers: a thread each
    assert raw.variant.entry == "strided" and raw.grid(H200_SMS) == -(-3 * 1000 * 7 // 256)
    five = (3, 4, 5, 6, 7)
    _, scattered = eplan(sqd, transposed(five), fake(five))
    assert scattered.variant == VariantKey("strided", "int32", 0, 1) and len(scattered.extents) == 5
    assert scattered.grid(H200_SMS) == -(-int(np.prod(five)) // 256)


def test_loop_dims_go_inner_the_smaller_their_strides_unless_the_body_names_i(sqd):
    """x stored as (8192, 256, 8) read reversed: its unit stride is on the loop's outermost dim. The loop puts
    that dim second, a row of the output apart rather than a plane (NumPy's nditer orders dims so too); z's
    rows stay innermost. A body that names `i`, itself or through a preamble macro, keeps C order. (C order's
    tiles would read each of x's sectors in all 8 planes, 64 MB apart: see the test below.)"""
    shape = (8, 256, 8192)
    x = fake(shape, strides=np.empty(shape[::-1], np.float32).transpose(2, 1, 0).strides)
    _, plan = eplan(sqd, x, fake(shape))
    assert plan.variant.entry == "strided"
    assert plan.extents == (8192, 8, 256)  # innermost first: z's rows, then x's unit stride, then the rest
    assert plan.strides["x"] == (8192, 4, 32)
    assert plan.strides["z"] == (4, 8388608, 32768)
    indexed = kspec.ElementwiseKernel("T x, T y", "T z", "z = (x - y) * (x - y) + i", "sqd_i")
    assert eplan(indexed, x, fake(shape))[1].extents == (8192, 256, 8)
    in_preamble = kspec.ElementwiseKernel("T x, T y", "T z", "z = F(x, y)", "sqd_m", preamble="#define F(a, b) (a - b + i)")
    assert eplan(in_preamble, x, fake(shape))[1].extents == (8192, 256, 8)
    # a full reversal: x's unit stride second, its next stride third
    assert eplan(sqd, transposed((64, 32, 16)), fake((64, 32, 16)))[1].extents == (16, 64, 32)
    # a broadcast over a middle axis keeps C order (ties keep it; zero strides do not count)
    assert eplan(sqd, fake((64, 32, 16)), fake((64, 1, 16)))[1].extents == (16, 32, 64)


# -- issue 17: the tiled elementwise entry and the two-pass reduction over unmerged reduced dims -------------

TILED = VariantKey("tiled", "int32", 0, 32)


def test_a_transposed_input_or_output_takes_the_tiled_entry_with_a_block_per_tile(sqd):
    n = 1 << 14
    _, plan = eplan(sqd, transposed((n, n)), fake((n, n)))  # (x.T - y)^2: one staged input, one direct
    assert plan.variant == TILED and plan.block == 256 and plan.extents == (n, n)
    assert plan.grid(H200_SMS) == (n // 32) * (n // 64)  # float32: steps of two 32 x 32 tiles along dim 0
    _, plan = eplan(sqd, fake((1000, 777)), fake((1000, 777)), transposed((1000, 777)))  # a transposed output
    assert plan.variant == TILED and plan.grid(H200_SMS) == 13 * 32  # odd sizes: partial steps count
    _, plan = eplan(sqd, transposed((300, 300)), transposed((300, 300)), transposed((300, 300)))
    assert plan.variant == TILED  # every operand column-major


def permuted(shape, perm, dtype="float32"):
    """A fake view of a C array, permuted by ``perm`` into ``shape`` (the layout sweep's operands)."""
    inverse = tuple(sorted(range(len(perm)), key=lambda a: perm[a]))
    stored = np.empty(tuple(shape[a] for a in inverse), dtype).strides
    return fake(shape, dtype, strides=tuple(stored[a] for a in perm))


def test_warp_sectors_count_an_outputs_sectors_twice():
    # 32 float32 elements: contiguous, 4 sectors; 8 bytes apart, 8; a row of 2 every 64 bytes, 16 (a store: 32)
    assert warp_sectors([32], [[4]], [False]) == 4
    assert warp_sectors([64], [[8]], [False]) == 8
    assert warp_sectors([16, 2], [[64, 4]], [True]) == 32
    assert warp_sectors([4, 8], [[0, 0]], [False]) == 1  # a broadcast scalar


def test_strided_loops_with_a_short_inner_dim_keep_c_order(sqd):
    # by_stride would put x's rows (the 1,024) next to the 2 inner elements: stores of 16 sectors a warp; C order
    # keeps z's and y's 2 x 8 elements together (x's rows are not tiled: dim 1 has 8; float16's would be, with the
    # rows of 2 outside the tiles: test_a_short_inner_dim_moves_outward...)
    shape = (2048, 1024, 8, 2)
    _, plan = eplan(sqd, permuted(shape, (0, 3, 2, 1)), fake(shape))
    assert plan.variant.entry == "strided" and plan.extents == (2, 8, 1024, 2048)
    assert plan.strides["z"] == (4, 8, 64, 65536)
    # C order keeps the strided entry where its own rows would tile (x's rows of 8 along dim 1, 16 bytes apart)
    shape = (2048, 8, 1024, 4)
    _, plan = eplan(sqd, permuted(shape, (0, 3, 2, 1), "float16"), fake(shape, "float16"))
    assert plan.variant.entry == "strided" and plan.extents == (4, 1024, 8, 2048) and plan.runs
    # where by_stride's order goes to the tiled entry, it stays
    _, plan = eplan(sqd, permuted((2048, 2048, 6), (2, 1, 0)), fake((2048, 2048, 6)))
    assert plan.variant.entry == "tiled" and plan.extents == (6, 2048, 2048)


def test_strided_blocks_take_runs_of_chunks_where_outputs_follow_the_loop(sqd):
    chunks = lambda plan: plan.size // (4 * plan.block)  # noqa: E731
    shape = (2048, 1024, 16, 4)  # outputs in the loop's order, 3 dims: runs of 8 chunks (2^17 chunks)
    _, plan = eplan(sqd, permuted(shape, (0, 1, 3, 2), "float16"), fake(shape, "float16"))
    assert plan.variant.entry == "strided" and plan.runs and plan.grid(H200_SMS) == chunks(plan) // 8
    small = (64, 1024, 16, 4)  # runs shorten to keep 16 blocks an SM: 4,096 chunks, 1 each
    _, plan = eplan(sqd, permuted(small, (0, 1, 3, 2), "float16"), fake(small, "float16"))
    assert plan.runs and plan.grid(H200_SMS) == chunks(plan) == 4096
    # outputs written across the loop's rows: a block per chunk (float64: float32's x is read tiled in another order)
    shape = (512, 128, 64, 3)
    _, plan = eplan(sqd, permuted(shape, (0, 3, 2, 1), "float64"), fake(shape, "float64"))
    assert plan.variant.entry == "strided" and not plan.runs and plan.grid(H200_SMS) == chunks(plan)
    # a 2-dim loop (every other column): a block per chunk
    x = fake((4096, 4096), strides=(8 * 4096, 8))
    _, plan = eplan(sqd, x, fake((4096, 4096)))
    assert plan.variant.entry == "strided" and not plan.runs and plan.grid(H200_SMS) == chunks(plan)


@pytest.mark.parametrize(
    "dtype, span, grid",
    [("int8", 4, 7 * 32), ("float16", 4, 7 * 32), ("float32", 2, 13 * 32), ("float64", 1, 25 * 32),
     ("complex64", 1, 25 * 32)],
)
def test_narrow_operands_take_more_tiles_per_block_step(sqd, dtype, span, grid):
    # a block takes four 32 x 32 tiles along dim 0 per step for 1- and 2-byte operands, two up to 4 bytes (a
    # step's fixed cost over more elements); the grid counts steps (777 x 1000: 128, 64 or 32 x 32), partial ones
    _, plan = eplan(sqd, transposed((1000, 777), dtype), fake((1000, 777), dtype))
    assert plan.variant == TILED and plan.specialization.tile_span == span
    assert plan.grid(H200_SMS) == grid
    src = rendered_module(plan.specialization).source
    assert f"constexpr int _SPAN = {span};" in src


@pytest.mark.parametrize(
    "shape, width, grid",
    [((4096, 16), 16, 4096 // 128),  # dim 0 of 16: tiles 16 wide, 64 high, two per step along dim 1
     ((16, 4096), 64, 4096 // 128),  # dim 1 of 16: tiles 64 wide, 16 high, two per step along dim 0
     ((3, 16, 70), 64, 3),  # 70 x 16 per plane: one step of two 64 x 16 tiles (70 of 128 columns used)
     ((3, 40, 16), 16, 2),  # 16 x 40 planes fit one 16 x 64 tile: steps of two planes (3 planes: 2 steps)
     ((3, 16, 40), 64, 2),  # and 40 x 16 planes one 64 x 16 tile
     ((1000, 700), 32, 11 * 32), ((300, 24), 16, 2 * 3)],  # 24 x 300: steps of 16 x 128 (24 of 32, 300 of 384)
)
def test_short_dims_take_tiles_shaped_to_them(sqd, shape, width, grid):
    # the tile width that leaves the fewest slots idle; the grid counts steps of two tiles (float32)
    perm = (*range(len(shape) - 2), len(shape) - 1, len(shape) - 2)
    base = fake(tuple(shape[p] for p in perm))
    x = fake(shape, strides=tuple(base.strides[p] for p in perm))
    _, plan = eplan(sqd, x, fake(shape))
    assert plan.variant == VariantKey("tiled", "int32", 0, width) and plan.grid(H200_SMS) == grid


def test_planes_that_leave_most_of_a_step_idle_take_the_strided_entry(sqd):
    # 16 x 16 (one plane, or planes of a quarter tile): under TILED_MIN_FILL of a step's slots hold elements
    for shape in ((16, 16), (17, 16), (64, 16, 16)):
        perm = (*range(len(shape) - 2), len(shape) - 1, len(shape) - 2)
        base = fake(tuple(shape[p] for p in perm))
        x = fake(shape, strides=tuple(base.strides[p] for p in perm))
        assert eplan(sqd, x, fake(shape))[1].variant.entry == "strided"
    base = fake((64, 32, 32))  # planes of a whole tile, two a step
    x = fake((64, 32, 32), strides=(base.strides[0], base.strides[2], base.strides[1]))
    _, plan = eplan(sqd, x, fake((64, 32, 32)))
    assert plan.variant == TILED and plan.grid(H200_SMS) == 32


def test_wide_or_many_operands_take_one_tile_per_step(sqd):
    mixed = kspec.ElementwiseKernel("float16 x, float64 y", "float16 z", "z = x + y", "mixed_sizes")
    _, plan = eplan(mixed, transposed((256, 256), "float16"), fake((256, 256), "float64"))
    assert plan.variant == TILED and plan.specialization.tile_span == 1 and plan.grid(H200_SMS) == 64
    # six float32 operands: two tiles each would pass the shared-memory limit, one each fits
    many = kspec.ElementwiseKernel("T a, T b, T c, T d, T e", "T z", "z = a + b + c + d + e", "many_operands")
    args = [transposed((256, 256))] + [fake((256, 256))] * 5
    _, plan = eplan(many, *args)
    assert plan.variant == TILED and plan.specialization.tile_span == 1


def test_layouts_without_a_staged_operand_keep_their_entries(sqd):
    n = 1 << 10
    assert eplan(sqd, fake((n, n)), fake((n, n)))[1].variant.entry == "contig"
    assert eplan(sqd, fake((n, n)), fake((n,)))[1].variant == VariantKey("strided", "int32", 2, 1)  # row vector
    assert eplan(sqd, fake((n, n)), fake((n, 1)))[1].variant == VariantKey("strided", "int32", 2, 1)  # column
    assert eplan(sqd, fake((n, n), strides=(8 * n, 8)), fake((n, n)))[1].variant.entry == "strided"  # x[:, ::2]
    # a transposed operand over a thin inner dim: rows of at most 8 in tiles 8 or 4 wide where they fill them
    # (H200: 0.67 -> 0.88 of a copy for float32 (512, 128, 64, 8) permuted (0, 3, 2, 1)); rows that fill part of
    # a tile where the output is written in the loop's order (here), and rows of 9-15, the strided entry
    for thin, width in ((8, 8), (4, 4)):
        assert eplan(sqd, transposed((n, thin)), fake((n, thin)))[1].variant == VariantKey("tiled", "int32", 0, width)
    for thin in (6, 5, 3):
        assert eplan(sqd, transposed((n, thin)), fake((n, thin)))[1].variant.entry == "strided"
    for shape in ((n, 2), (n, 12), (100, 4)):  # half a tile, no narrow tile, a dim 1 that fills a fifth of a step
        assert eplan(sqd, transposed(shape), fake(shape))[1].variant.entry == "strided"
    # an explicit block size the tiled entry cannot use
    assert eplan(sqd, transposed((n, n)), fake((n, n)), block_size=512)[1].variant.entry == "strided"


def test_narrow_tiles_short_of_full_rows_keep_to_outputs_written_across_the_loop(sqd):
    # rows of 3 or 6 fill 3/4 of a narrow tile: where the output follows the loop's order the strided entry's runs
    # of chunks move more (H200, fractions of a copy: float32 (256, 256, 512, 3) permuted (0, 1, 3, 2) 0.758 ->
    # 0.934, float16 (1024, 512, 16, 6) permuted (0, 2, 3, 1) 0.504 -> 0.659); written across the loop (permuted
    # (0, 3, 2, 1): the output's rows of 6 a plane apart in the loop) the tiles stay (float32 (64, 128, 512, 6)
    # 0.648; float16's rows of 12 bytes go outside whole tiles instead, test_a_short_inner_dim_moves_outward...), and
    # so do full rows (float32 (2048, 2048, 4) permuted (0, 2, 1) 0.962 against 0.850)
    for dtype, shape, perm in (("float32", (256, 256, 512, 3), (0, 1, 3, 2)), ("float16", (1024, 512, 16, 6), (0, 2, 3, 1)),
                               ("float32", (2048, 2048, 6), (1, 2, 0))):  # fmt: skip
        _, plan = eplan(sqd, permuted(shape, perm, dtype), fake(shape, dtype))
        assert plan.variant.entry == "strided", (dtype, shape, perm)
    for dtype, shape, perm, width in (("float32", (64, 128, 512, 6), (0, 3, 2, 1), 8), ("float32", (2048, 2048, 4), (0, 2, 1), 4),
                                      ("float32", (128, 64, 512, 8), (0, 1, 3, 2), 8)):  # fmt: skip
        _, plan = eplan(sqd, permuted(shape, perm, dtype), fake(shape, dtype))
        assert plan.variant == VariantKey("tiled", "int32", 0, width), (dtype, shape, perm)


def test_c_order_takes_whole_tiles_where_by_strides_order_has_none(sqd):
    # x (64, 8, 1024, 64) permuted (0, 3, 2, 1): by_stride puts x's rows of 8 next to the inner dim, too short for
    # tiles; in C order x is staged over the (1024, 64) planes, which whole tiles take (H200, fractions of a copy:
    # float16 0.320 -> 0.568, float32 0.637 -> 0.752), x's rows of 8 across 8 planes, which steps stack (float16
    # four to a step, 32-wide: 0.566 -> 0.630; float32 0.755 -> 0.869)
    for dtype, width in (("float16", 32), ("float32", 32)):
        shape = (64, 8, 1024, 64)
        _, plan = eplan(sqd, permuted(shape, (0, 3, 2, 1), dtype), fake(shape, dtype))
        assert plan.variant == VariantKey("tiled", "int32", 0, width)
        assert plan.extents == (64, 1024, 8, 64)  # C order, innermost first
    # fully reversed views whose unit stride is a short outer dim: C order's tiles where the 8 planes that share each
    # of x's sectors find it in the L2 (a plane's sectors span 4 MB for (8, 64, 2048) float32, 32 MB for (8, 256,
    # 8192) float16: 0.218 -> 0.464 of a copy), or where 4 planes or fewer share them (float32 (4, 1024, 4096), 64
    # MB: 0.372 -> 0.531); not for float32 (8, 256, 8192) (64 MB, 8 planes: 0.367 strided, 0.319 tiled)
    for dtype, shape, entry in (("float32", (8, 64, 2048), "tiled"), ("float16", (8, 256, 8192), "tiled"),
                                ("float32", (4, 1024, 4096), "tiled"), ("float32", (8, 256, 8192), "strided"),
                                ("float32", (12, 1024, 1024), "strided")):  # fmt: skip
        _, plan = eplan(sqd, permuted(shape, (2, 1, 0), dtype), fake(shape, dtype))
        assert plan.variant.entry == entry, (dtype, shape)


def test_a_short_inner_dim_moves_outward_where_rows_of_a_transposed_operand_lie_beyond_it(sqd):
    # z (32, 256, 1024, 2) from x stored (32, 2, 1024, 256): x's rows run along C order's dim 2, two dims from z's
    # rows of 2; tiles over (1024, 256) with the rows of 2 outside them (H200, fractions of a copy: float32 0.344 ->
    # 0.763, float16 0.208 -> 0.666)
    shape = (32, 256, 1024, 2)
    for dtype in ("float16", "float32", "int8"):
        _, plan = eplan(sqd, permuted(shape, (0, 3, 2, 1), dtype), fake(shape, dtype))
        assert plan.variant == VariantKey("tiled", "int32", 0, 32), dtype
        itemsize = np.dtype(dtype).itemsize
        assert plan.extents == (1024, 256, 2, 32)  # innermost first
        assert plan.strides["z"] == tuple(itemsize * s for s in (2, 2048, 1, 524288))
        assert plan.strides["x"] == tuple(itemsize * s for s in (256, 1, 262144, 524288))
    # rows of 16 bytes or more stay innermost (float32 rows of 4 and float16 rows of 8 lost moved), but for rows of
    # two 8-byte items (float64 (16, 1024, 2048, 2) 0.414 -> 0.972 of a copy, benchmarks/NOTES.md v75)
    for dtype, rows in (("float32", 4), ("float16", 8), ("float64", 3)):
        other = (32, 256, 1024, rows)
        _, plan = eplan(sqd, permuted(other, (0, 3, 2, 1), dtype), fake(other, dtype))
        assert plan.extents[0] == rows, dtype
    _, plan = eplan(sqd, permuted((32, 256, 1024, 2), (0, 3, 2, 1), "float64"), fake((32, 256, 1024, 2), "float64"))
    assert plan.variant == VariantKey("tiled", "int32", 0, 32) and plan.extents == (1024, 256, 2, 32)
    # ... unless x's sectors lie within 2,048 elements of C order's loop: the strided entry in C order, CuPy's
    # (float64 (2048, 512, 32, 2): 256 elements, 0.631 -> 1.272; (1024, 128, 128, 2): 1,024, 0.789 -> 1.027)
    for shape in ((2048, 512, 32, 2), (1024, 128, 128, 2)):
        _, plan = eplan(sqd, permuted(shape, (0, 3, 2, 1), "float64"), fake(shape, "float64"))
        assert plan.variant.entry == "strided" and plan.extents == shape[::-1], shape
    # a sector of x within 128 elements of C order's loop (float32 rows of 2 x 8: 8 x 16): the strided entry's warps
    # share it (0.876 of a copy strided, 0.756 tiled); float16's sector spans 256 elements: tiled (0.535 -> 0.629)
    _, plan = eplan(sqd, permuted((2048, 1024, 8, 2), (0, 3, 2, 1)), fake((2048, 1024, 8, 2)))
    assert plan.variant.entry == "strided" and plan.runs and plan.extents == (2, 8, 1024, 2048)
    _, plan = eplan(sqd, permuted((2048, 2048, 8, 2), (0, 3, 2, 1), "float16"), fake((2048, 2048, 8, 2), "float16"))
    assert plan.variant.entry == "tiled" and plan.extents == (8, 2048, 2, 2048)
    # planes whose share of z spans more than the L2 too: 4096 x 4096 x 2 float16 (64 MB), 0.194 -> 0.442 of a copy
    big = (2, 4096, 4096, 2)
    _, plan = eplan(sqd, permuted(big, (0, 3, 2, 1), "float16"), fake(big, "float16"))
    assert plan.variant.entry == "tiled" and plan.extents == (4096, 4096, 2, 2)
    # from by_stride's narrow tiles too: z (2048, 2048, 4) fully reversed, float16 0.236 -> 0.493 of a copy; int8
    # (8, 1024, 1024, 4) permuted (0, 3, 2, 1) 0.147 -> 0.367 (rows of 4 stacked, a step's four tiles at one position)
    for dtype, shape, perm, moved in (("float16", (2048, 2048, 4), (2, 1, 0), (2048, 2048, 4)),
                                      ("int8", (8, 1024, 1024, 4), (0, 3, 2, 1), (1024, 1024, 4, 8))):  # fmt: skip
        _, plan = eplan(sqd, permuted(shape, perm, dtype), fake(shape, dtype))
        assert plan.variant == VariantKey("tiled", "int32", 0, 32) and plan.extents == moved, dtype
        item = np.dtype(dtype).itemsize  # z's rows of 4 along dim 2
        assert plan.strides["z"][:3] == (4 * item, 4 * moved[0] * item, item)
        assert plan.grid(H200_SMS) == math.prod(shape) // (4 * 1024)  # a step: 4 planes' tiles of 32 x 32
    _, plan = eplan(sqd, permuted((2048, 2048, 4), (2, 1, 0)), fake((2048, 2048, 4)))
    assert plan.variant.vec == 4  # float32's rows of 16 bytes keep by_stride's narrow tiles


def test_narrow_rows_written_across_the_tiles_run_strided_in_c_order(sqd):
    # by_stride's narrow tiles write z's rows across the loop (a transpose (0, 3, 2, 1)); for 4- and 8-byte items whose
    # x sectors lie within STRIDED_SHARED_SPAN elements of C order's loop the strided entry in C order, without runs,
    # beats them (H200, fractions of a copy: float64 rows of 3 0.62 -> 0.96, float32 rows of 4 0.52 -> 0.64)
    for dtype, shape in (("float64", (2048, 1024, 8, 3)), ("float64", (128, 1024, 32, 4)), ("float32", (512, 512, 16, 4)),
                         ("float32", (1024, 128, 32, 5)), ("float64", (128, 512, 256, 3))):  # fmt: skip
        _, plan = eplan(sqd, permuted(shape, (0, 3, 2, 1), dtype), fake(shape, dtype))
        assert plan.variant.entry == "strided" and not plan.runs, (dtype, shape)
        assert plan.extents == tuple(reversed(shape))  # C order
        assert sector_span(list(shape), [list(reversed(s)) for s in plan.strides.values()], [False, False, True]) == (
            shape[2] * shape[3] * 32 // np.dtype(dtype).itemsize
        )
    # ... but not beyond the span (float32 rows of 4 over 4,096 elements: 0.613 tiled, 0.394 strided), not where the
    # rows fill an 8-wide tile (float64 rows of 8: 1.009 tiled, 0.928 strided), nor for 2-byte items (issue-bound
    # strided: float16 rows of 8, 0.483 tiled, 0.337 strided)
    for dtype, shape in (("float32", (256, 256, 128, 4)), ("float64", (256, 1024, 16, 8)), ("float32", (512, 256, 16, 8)),
                         ("float16", (128, 1024, 16, 8))):  # fmt: skip
        _, plan = eplan(sqd, permuted(shape, (0, 3, 2, 1), dtype), fake(shape, dtype))
        assert plan.variant.entry == "tiled" and plan.variant.vec <= 8 and plan.extents[0] == shape[-1], (dtype, shape)


def test_strided_loops_of_eight_byte_items_take_a_block_per_chunk(sqd):
    # runs of chunks save narrow items their divisions (float32 (1024, 32, 512, 3) permuted (0, 1, 3, 2): 0.925 of a
    # copy in runs, 0.761 without); float64 lost in runs on all 40 layouts measured ((256, 512, 256, 3), same
    # permutation: 0.949 -> 1.018)
    shape = (1024, 32, 512, 3)
    _, plan = eplan(sqd, permuted(shape, (0, 1, 3, 2)), fake(shape))
    assert plan.variant.entry == "strided" and plan.runs
    assert plan.grid(H200_SMS) == math.prod(shape) // (4 * 256 * 8)  # runs of 8 chunks
    shape = (256, 512, 256, 3)
    _, plan = eplan(sqd, permuted(shape, (0, 1, 3, 2), "float64"), fake(shape, "float64"))
    assert plan.variant.entry == "strided" and not plan.runs
    assert plan.grid(H200_SMS) == math.prod(shape) // (4 * 256)  # a block per chunk
    assert runs_pay([4, 4]) and runs_pay([2, 1, 4]) and not runs_pay([4, 8])


def test_steps_stack_the_planes_an_operand_interleaves():
    # a dim 2 of span planes or more that some operand interleaves (stride under a sector): a step takes the tiles at
    # one position of span planes; without such an operand, span tiles of one plane side by side
    w32 = VariantKey("tiled", "int32", 0, 32)
    z = [4 * 2, 4 * 2 * 1024, 4, 4 * 2 * 1024 * 256]  # float32 rows of 2 along dim 2, innermost first
    x = [4 * 256, 4, 4 * 1024 * 256, 4 * 2 * 1024 * 256]
    assert stacked_planes([x, z], 4) and not stacked_planes([x], 4) and not stacked_planes([z[:2]], 2)
    extents = (1000, 250, 2, 3)
    assert tiled_layout(w32, 2, extents, interleaved=True) == (3 * 1 * 32 * 8, 1000 * 250 / (1024 * 256))
    assert tiled_layout(w32, 2, extents)[0] == 3 * 2 * 16 * 8  # steps of 64 x 32
    assert tiled_layout(w32, 4, extents, interleaved=True)[0] == 3 * 2 * 8 * 8  # fewer planes than a step's tiles
    # any depth: 9 planes in groups of 2, the last group half idle
    assert tiled_layout(w32, 2, (1000, 250, 9, 3), interleaved=True) == (3 * 5 * 32 * 8, 1000 * 250 / (1024 * 256) * 9 / 10)
    assert tiled_layout(w32, 2, (1000, 250, 2048, 3), interleaved=True)[0] == 3 * 1024 * 32 * 8
    # the kernel decides the same way, from its own copy of the numbers
    tile_cuh = templates_dir() / "include" / "kspec" / "tile.cuh"
    text = tile_cuh.read_text()
    assert f"#define KSPEC_TILE_STACK_BYTES {TILE_STACK_BYTES}\n" in text



def test_steps_turn_where_that_pads_the_plane_less():
    # a step's tiles sit along dim 0 (32 and 64 wide) or dim 1 (narrower), the other way where the default pads the
    # plane SHAPED_TILE_GAIN times as much; the kernel's kspec::step_along_dim1 decides the same way
    w32, w16 = VariantKey("tiled", "int32", 0, 32), VariantKey("tiled", "int32", 0, 16)
    assert tiled_step(w32, 2, (32, 64, 100)) == (32, 64)  # dim 0 one tile wide: along dim 1
    assert tiled_step(w32, 2, (32, 64, 100), turn=False) == (64, 32)
    assert tiled_step(w32, 4, (520, 100)) == (128, 32)  # 640 x 128 padded, against 544 x 128: not a quarter more
    assert tiled_step(w32, 2, (64, 64)) == (64, 32)  # a tie
    assert tiled_step(w16, 4, (64, 64, 9)) == (64, 64)  # 16-wide tiles along dim 0: a 64 x 64 plane fills a step
    assert tiled_step(w16, 4, (16, 256)) == (16, 256)
    assert tiled_layout(w32, 2, (32, 64, 100)) == (100, 1.0)
    # widths are chosen with 32- and 64-wide tiles unturned (turned where 16-wide ones fill as well, they ran float32
    # 1.5% slower: benchmarks/NOTES.md v75); 16-wide tiles turned along dim 0 fill (64, 64) planes
    assert tiled_variant((32, 64, 100), 2).vec == 16
    assert tiled_variant((64, 64, 100), 4).vec == 16
    tile_cuh = (templates_dir() / "include" / "kspec" / "tile.cuh").read_text()
    assert SHAPED_TILE_GAIN == 5 / 4 and "return W < 32 ? 4 * along1 <= 5 * along0 : 4 * along0 > 5 * along1;" in tile_cuh

def test_tiled_entry_needs_32bit_offsets_and_a_module_that_holds_it(sqd):
    n = 1 << 16  # a transposed (2^16, 2^16) float32 view reaches 16 GiB: the 64-bit strided entry
    _, plan = eplan(sqd, transposed((n, n)), fake((n, n)))
    assert plan.variant == VariantKey("strided", "int64", 0, 1)
    nc = kspec.ElementwiseKernel("T x, _non_const T y", "T z", "z = x; y = x", "writes_input")
    assert TILED not in nc.specialization(np.zeros(4, np.float32), np.zeros(4, np.float32)).variants
    _, plan = eplan(nc, transposed((64, 64)), fake((64, 64)))
    assert plan.variant.entry == "strided"


def test_batched_transposes_tile_the_two_inner_dims(sqd):
    base = fake((6, 70, 45))
    x = fake((6, 45, 70), strides=(base.strides[0], base.strides[2], base.strides[1]))  # transpose(0, 2, 1)
    _, plan = eplan(sqd, x, fake((6, 45, 70)))
    # 70 x 45 per plane: steps of two 64 x 16 tiles leave fewer slots idle than two 32 x 32 (0.51 to 0.38 used)
    assert plan.variant == VariantKey("tiled", "int32", 0, 64) and plan.extents == (70, 45, 6)
    assert plan.grid(H200_SMS) == 6 * 3  # per plane: 1 step along dim 0 (128 of 70), 3 along dim 1 (16 of 45)


def test_staged_rule():
    from kspec.kernels.planning._entry_point import staged

    assert staged([4, 4000])  # outermost first: stride 4 along dim 1, 4000 along dim 0 (a transposed view)
    assert not staged([4000, 4])  # C order
    assert not staged([0, 4])  # a row vector broadcast along dim 1
    assert not staged([4, 0])  # a column broadcast along dim 0: every lane reads one address
    assert staged([-4, 4000])  # reversed rows of a transposed view
    assert not staged([4])


def test_reductions_over_two_unmerged_axes_take_one_pass(ssq):
    # axes (1, 3): the innermost reduced axis contiguous; one rows pass of runtime rank, vectorised
    _, plan = rplan(ssq, fake((64, 256, 64, 256)), axis=(1, 3))
    assert plan.rndim == 0 and plan.red == (256, 256) and not plan.inner_rows and not plan.contiguous_cols
    strategy = reduction_strategy(plan, H200_SMS, slab=False)
    (only,) = strategy.passes
    assert strategy.kind == "rows" and only.variant == VariantKey("rows", "int64", 0, 4) and only.chunk == 65536
    # few outputs with long rows: the split, its pass 1 the same entry
    _, plan = rplan(ssq, fake((16, 1024, 16, 1024)), axis=(1, 3))
    strategy = reduction_strategy(plan, H200_SMS, slab=False)
    first, second = strategy.passes
    assert strategy.kind == "split" and first.variant == VariantKey("rows", "int64", 0, 4)
    assert first.chunk % 4 == 0 and (first.nchunks - 1) * first.chunk < 1 << 20 <= first.nchunks * first.chunk
    assert second.variant.entry == "split_final" and strategy.workspace_items == 256 * first.nchunks
    # axes (0, 2): the innermost KEPT axis contiguous: cols, adjacent outputs in adjacent lanes
    _, plan = rplan(ssq, fake((64, 256, 64, 256)), axis=(0, 2))
    assert plan.rndim == 0 and plan.contiguous_cols
    strategy = reduction_strategy(plan, H200_SMS, slab=False)
    # 65536 outputs: 512 vectorised tiles, more than half the 528 blocks of 16 warps an H200 holds: no split,
    # so vectorised lanes
    assert strategy.kind == "cols" and strategy.passes[0].variant == VariantKey("cols", "int32", 0, 4)  # offsets fit
    assert strategy.passes[0].grid == 512 and strategy.passes[0].chunk == 64 * 64 and strategy.passes[0].nchunks == 1


def test_a_rows_split_makes_at_most_one_wave(ssq):
    # 100 rows of 65536: chunks for BLOCKS_PER_SM blocks per SM rounded down (500 blocks on 528 slots, not 600),
    # fewer where the entry's registers let an SM hold fewer
    _, plan = rplan(ssq, fake((100, 1 << 16)), axis=1)
    for held, nchunks in ((None, 5), (8, 5), (4, 5), (3, 3), (1, 2)):
        resident = None if held is None else (lambda variant, threads, held=held: held)
        strategy = reduction_strategy(plan, H200_SMS, resident=resident, slab=False)
        first = strategy.passes[0]
        assert strategy.kind == "split" and first.nchunks == nchunks and first.grid == 100 * nchunks, held
    # axes (1, 3) of (16, 1024, 16, 64): 256 rows, 512 blocks (768, a wave and a half, ran at 0.66 of copy)
    _, plan = rplan(ssq, fake((16, 1024, 16, 64)), axis=(1, 3))
    strategy = reduction_strategy(plan, H200_SMS, resident=lambda variant, threads: 4, slab=False)
    assert strategy.kind == "split" and strategy.passes[0].grid == 512 and strategy.passes[0].nchunks == 2


def test_rows_many_enough_per_sm_and_not_very_long_take_a_block_each(ssq):
    """One reduced dim: with at least three rows per SM and rows shorter than 2^17, a block per row, not two chunks
    per row and split_final (512 rows of 32768 on an H200: 0.76 -> 0.88 of copy); fewer rows, or longer ones,
    keep the split."""
    for shape in ((512, 1024, 32), (448, 256, 256), (400, 256, 128)):
        _, plan = rplan(ssq, fake(shape), axis=(1, 2))
        strategy = reduction_strategy(plan, H200_SMS, slab=False)
        assert strategy.kind == "rows" and len(strategy.passes) == 1 and strategy.workspace_items == 0, shape
        assert strategy.passes[0].grid == shape[0] and strategy.passes[0].chunk == plan.red_size, shape
    for shape in ((300, 256, 256), (384, 512, 256), (128, 1024, 32)):  # under 3 rows per SM, or rows of 2^17
        _, plan = rplan(ssq, fake(shape), axis=(1, 2))
        assert reduction_strategy(plan, H200_SMS, slab=False).kind == "split", shape
    # rows per SM: 300 rows on a 90-SM device are over three per SM (and under its 360-block wave)
    _, plan = rplan(ssq, fake((300, 256, 256)), axis=(1, 2))
    assert reduction_strategy(plan, 90, slab=False).kind == "rows"
    # a tuning record's blocks per SM choose for themselves: the tuner times the split against the rules' launch
    _, plan = rplan(ssq, fake((512, 1024, 32)), axis=(1, 2))
    strategy = reduction_strategy(plan, H200_SMS, slab=False, knobs={"per_sm": 8})
    assert strategy.kind == "split" and strategy.passes[0].nchunks == 2


def test_split_final_merges_few_partials_of_many_outputs_in_a_thread_else_with_a_group_of_lanes(ssq):
    from kspec.kernels.planning._reduction_passes import final_group

    many = 1 << 16
    assert [final_group(n, many) for n in (1, 2, 3, 5, 8, 9, 16, 32, 33, 528)] == [1, 1, 1, 1, 1, 16, 16, 32, 0, 0]
    assert [final_group(n, many - 1) for n in (1, 2, 3, 5, 8, 9)] == [1, 2, 4, 8, 8, 16]
    # 256 rows split in two: 256 outputs * 2 lanes / 256 threads = 2 blocks (a block per output: 256)
    _, plan = rplan(ssq, fake((16, 1024, 16, 64)), axis=(1, 3))
    second = reduction_strategy(plan, H200_SMS, resident=lambda variant, threads: 4, slab=False).passes[1]
    assert second.variant.entry == "split_final" and (second.nchunks, second.grid, second.block) == (2, 2, 256)
    # a fold of pieces of 3 over 2^17 outputs: 512 blocks of a thread per output (groups of 4 lanes: 2,048)
    _, plan = rplan(ssq, fake((256, 128, 512, 3), "float16"), axis=(1, 3))
    second = reduction_strategy(plan, H200_SMS, slab=False).passes[1]
    assert (second.nchunks, second.grid, second.block) == (3, 512, 256)
    # a cols split of 1024 outputs in 33 chunks: more than a group takes, a block per output, 64 threads
    _, plan = rplan(ssq, fake((1024, 16, 64, 16)), axis=(0, 2))
    first, second = reduction_strategy(plan, H200_SMS, resident=lambda variant, threads: 4, slab=False).passes
    assert first.nchunks == second.nchunks == 33 and (second.grid, second.block) == (256, 64)
    # a full reduction's 528 partials: one block of 256 threads
    _, plan = rplan(ssq, fake((1 << 24,)))
    second = reduction_strategy(plan, H200_SMS, slab=False).passes[1]
    assert (second.grid, second.block) == (1, 256) and second.nchunks > 32


def test_a_cols_split_fills_one_wave_of_resident_blocks(ssq):
    # axes (0, 2) of (128, 32, 1024, 32): 32 tiles of 32 outputs, rows of 2^17. Blocks an SM holds (the loaded
    # function's occupancy) decide the chunks: as many segments as fit at once, never a second partial wave
    _, plan = rplan(ssq, fake((128, 32, 1024, 32)), axis=(0, 2))
    for per_sm in (2, 3, 4):
        strategy = reduction_strategy(plan, H200_SMS, resident=lambda variant, threads, n=per_sm: n, slab=False)
        first, second = strategy.passes
        assert strategy.kind == "cols split" and first.block == 512
        segments = 32 * first.nchunks
        assert segments <= per_sm * H200_SMS < segments + 32  # one wave, no room for another tile's chunks
        assert (first.nchunks - 1) * first.chunk < plan.red_size <= first.nchunks * first.chunk
        assert second.variant.entry == "split_final" and strategy.workspace_items == plan.out_size * first.nchunks
        assert second.dependent and not first.dependent  # split_final launches as the cols blocks begin
    # enough tiles for half the resident blocks: one pass (vectorised lanes: tiles of 128 outputs)
    _, plan = rplan(ssq, fake((64, 256, 16, 1024)), axis=(0, 2))
    strategy = reduction_strategy(plan, H200_SMS, resident=lambda variant, threads: 4, slab=False)
    assert strategy.kind == "cols" and strategy.passes[0].variant == VariantKey("cols", "int32", 0, 4)
    # short rows over several reduced dims: fewer warps, each walking at least 16 rounds of loads
    _, plan = rplan(ssq, fake((16, 1024, 16, 256)), axis=(0, 2))
    assert reduction_strategy(plan, H200_SMS, slab=False).passes[0].block == 128


def test_short_inner_rows_get_a_group_of_their_length(ssq):
    # (1, 3) of (1024, 16, 256, 16): rows of 16 elements = 4 vectors; 4 lanes per output walk the 16 rows, so a
    # warp reads 8 adjacent outputs' rows, 512 contiguous bytes
    _, plan = rplan(ssq, fake((1024, 16, 256, 16)), axis=(1, 3))
    assert reduction_strategy(plan, H200_SMS, slab=False).passes[0].group == 4
    # too few outputs to fill the device with 4 lanes each: a block per row, of 64 threads (its inner pieces are
    # 4 vectors long), 128 with longer pieces, the caller's block where given
    _, plan = rplan(ssq, fake((16, 1024, 256, 16)), axis=(1, 3))
    first = reduction_strategy(plan, H200_SMS, slab=False).passes[0]
    assert first.group == first.block == 64
    assert reduction_strategy(plan, H200_SMS, block_size=256, slab=False).passes[0].group == 256
    _, plan = rplan(ssq, fake((64, 1024, 16, 64)), axis=(1, 3))
    first = reduction_strategy(plan, H200_SMS, slab=False).passes[0]
    assert first.group == first.block == 128
    # an inner row that is not a power-of-two number of vectors
    _, plan = rplan(ssq, fake((1024, 16, 256, 12)), axis=(1, 3))
    assert reduction_strategy(plan, H200_SMS, slab=False).passes[0].group == 16


def test_cols_rank_and_block(ssq):
    _, plan = rplan(ssq, fake((1 << 14, 1 << 14)), axis=0)
    assert reduction_strategy(plan, H200_SMS, slab=False).passes[0].variant == VariantKey("cols", "int64", 1, 1)
    _, plan = rplan(ssq, fake((64, 8, 32, 16)), axis=(0, 2))
    first = reduction_strategy(plan, H200_SMS, slab=False).passes[0]
    assert first.variant == VariantKey("cols", "int64", 0, 1) and first.block <= 512  # registers: at most 16 warps
    # a loaded entry whose registers allow fewer threads caps the block
    _, plan = rplan(ssq, fake((1000, 333)), axis=0)
    asked = []
    strategy = reduction_strategy(plan, H200_SMS, max_threads=lambda v: asked.append(v) or 256, slab=False)
    assert strategy.passes[0].block == 256 and asked == [VariantKey("cols", "int64", 1, 1)]


def test_cols_split_when_the_tiles_are_few(ssq):
    # axes (0, 2) of (1024, 16, 32, 16): 256 outputs = 8 tiles of 32, rows of 32768 elements
    _, plan = rplan(ssq, fake((1024, 16, 32, 16)), axis=(0, 2))
    strategy = reduction_strategy(plan, H200_SMS, slab=False)
    first, second = strategy.passes
    assert strategy.kind == "cols split" and first.variant.entry == "cols" and first.nchunks > 1
    assert (first.nchunks - 1) * first.chunk < 32768 <= first.nchunks * first.chunk  # every chunk non-empty
    # the innermost kept extent (16) is below a warp and the reduced C sits right outside it: tiles of 16
    # outputs, each warp taking 2 reduced positions of each (32 adjacent elements per load); vectorised lanes
    # would make the same tiles of 4 lanes of 4 adjacent outputs, but 16 tiles do not fill the device
    assert first.variant == VariantKey("cols", "int64", 0, 1)
    assert cols_tile_width(plan, 1) == cols_tile_width(plan, 4) == 16
    # the split fills at least half of what the runtime-rank entry's launch bounds let an SM hold (32 warps)
    assert first.grid == 16 * first.nchunks and first.grid * first.block // 32 >= 32 * H200_SMS // 2
    assert second.variant.entry == "split_final" and second.nchunks == first.nchunks
    _, rows_of_256 = rplan(ssq, fake((64, 256, 64, 256)), axis=(0, 2))
    assert cols_tile_width(rows_of_256, 4) == 128 and cols_tile_width(rows_of_256, 1) == 32  # whole warps of vectors
    assert cols_tile_width(rplan(ssq, fake((64, 256, 64, 254)), axis=(0, 2))[1], 4) == 32  # 254 not a multiple of 4: scalar lanes
    assert cols_tile_width(rplan(ssq, fake((1 << 10, 16)), axis=0)[1], 4) == 32  # one reduced dim: unchanged
    assert strategy.workspace_items == 256 * first.nchunks
    frame = pass_frame_values(plan, first)
    assert frame["_workspace"] == {"nchunks": first.nchunks, "chunk": first.chunk}
    assert frame["_reduce_shape"]["red_extent"] == (32, 1024) and frame["_reduce_shape"]["red_ndim"] == 2
    # enough tiles: one pass
    _, plan = rplan(ssq, fake((16, 1024, 32, 1024)), axis=(0, 2))
    assert reduction_strategy(plan, H200_SMS, slab=False).kind == "cols"


@pytest.mark.parametrize(
    ("shape", "strides", "vec", "width"),
    [
        # many outputs: 2048 tiles of 128 (32 lanes of 4 adjacent outputs) run unsplit
        ((64, 256, 16, 1024), None, 4, 128),
        ((16, 512, 64, 512), None, 4, 128),
        # 512 tiles of 16 warps (rows of 1024) for 528 resident blocks: unsplit too (0.78 -> 0.87 of copy)
        ((16, 256, 64, 256), None, 4, 128),
        # few outputs: 512 tiles of 4 warps or 128 tiles for ~2000 resident blocks would split; scalar tiles
        # of 32 (measured 0.61 -> 0.24 and 0.63 -> 0.43 of copy when these took the vectorised lanes)
        ((16, 256, 16, 256), None, 1, 32),
        ((64, 32, 16, 512), None, 1, 32),
        # many outputs, but lanes of 4 outputs cannot load: the kept row is not a multiple of 4 long, or the
        # rows (a 1025-element pitch) are not 16-byte aligned
        ((64, 256, 16, 1022), None, 1, 32),
        ((64, 256, 16, 1024), (256 * 16 * 1025 * 4, 16 * 1025 * 4, 1025 * 4, 4), 1, 32),
    ],
)
def test_cols_takes_vectorised_lanes_only_where_they_run_unsplit(ssq, shape, strides, vec, width):
    _, plan = rplan(ssq, fake(shape, strides=strides), axis=(0, 2))
    assert plan.rndim == 0 and plan.contiguous_cols
    # ~2000 resident blocks of 128 threads, 528 of 512, as on an H200
    asked = []
    strategy = reduction_strategy(plan, H200_SMS, resident=lambda variant, threads: asked.append(variant) or 2048 // threads, slab=False)
    first = strategy.passes[0]
    sized = VariantKey("cols", "int64", 0, vec)
    assert first.variant == (VariantKey("cols", "int32", 0, vec) if vec > 1 else sized)  # unsplit vectors narrow
    # the grid counts the tiles of the entry that runs: its own width
    assert cols_tile_width(plan, first.variant.vec) == width
    tiles = -(-plan.out_size // width)
    assert first.grid == tiles * first.nchunks
    assert asked[-1] == sized  # the slots that sized the grid are the chosen entry's (its 64-bit form's)
    if vec > 1:
        # unsplit: at least one tile for every two resident blocks
        assert strategy.kind == "cols" and first.nchunks == 1 and 2 * tiles > H200_SMS * 2048 // first.block


def test_cols_vectorised_lanes_follow_the_resident_blocks(ssq):
    # 512 vectorised tiles of 4 warps: fewer than half the blocks an H200 holds of 128 threads (a split), more
    # than half of a device holding one block per SM
    _, plan = rplan(ssq, fake((16, 256, 16, 256)), axis=(0, 2))
    assert reduction_strategy(plan, H200_SMS, resident=lambda variant, threads: 16, slab=False).passes[0].variant.vec == 1
    assert reduction_strategy(plan, H200_SMS, resident=lambda variant, threads: 1, slab=False).passes[0].variant.vec == 4
    # a module of scalar loads only (vec 1: float64 complex) has one runtime-rank cols entry
    _, plan = rplan(ssq, fake((64, 256, 16, 1024), dtype="complex128"), axis=(0, 2))
    assert plan.specialization.vec == 1
    assert reduction_strategy(plan, H200_SMS, slab=False).passes[0].variant == VariantKey("cols", "int64", 0, 1)


def test_two_pass_reduction_over_three_unmerged_axes(ssq):
    _, plan = rplan(ssq, fake((4, 8, 4, 8, 4, 64)), axis=(1, 3, 5))
    assert plan.rndim == 0 and plan.red == (64, 8, 8) and plan.inner_rows
    strategy = reduction_strategy(plan, H200_SMS)
    first, second = strategy.passes
    assert strategy.kind == "inner" and strategy.workspace_items == 64 * 64
    assert first.variant == VariantKey("rows", "int64", 1, 4) and first.nchunks == 1 and first.chunk == 64
    shape = first.shape
    assert shape.out_size == 64 * 64 and shape.red_size == 64 and shape.red == (64,)
    assert shape.kept == (8, 8, 4, 4, 4)  # the outer reduced dims innermost: partial o * 64 + s
    assert second.variant.entry == "split_final" and second.nchunks == 64 and second.shape is None


def test_two_pass_reduction_frames(ssq):
    _, plan = rplan(ssq, fake((3, 4, 5, 6, 2, 48)), axis=(1, 3, 5), keepdims=True)
    first, second = reduction_strategy(plan, H200_SMS).passes
    v1, v2 = pass_frame_values(plan, first), pass_frame_values(plan, second)
    assert v1["_reduce_shape"]["out_size"] == 30 * 24 and v1["_reduce_shape"]["kept_extent"] == (6, 4, 2, 5, 3)
    assert v1["_reduce_shape"]["red_extent"] == (48,) and v1["_reduce_shape"]["red_ndim"] == 1
    assert v2["_reduce_shape"]["out_size"] == 30 and v2["_reduce_shape"]["kept_extent"] == (2, 5, 3)
    assert v2["_workspace"] == {"nchunks": 24, "chunk": 48}


def test_unmerged_reductions_that_keep_one_pass(ssq):
    # two reduced dims: one pass, whichever is contiguous
    _, plan = rplan(ssq, fake((6, 40, 5, 48)), axis=(0, 2))
    assert plan.rndim == 0 and not plan.inner_rows and reduction_strategy(plan, H200_SMS).kind.startswith("cols")
    # a short innermost reduced axis
    _, plan = rplan(ssq, fake((4, 8, 4, 64, 4, 8)), axis=(1, 3, 5))
    assert not plan.inner_rows
    # map_expr reads the index within the reduced row
    k = kspec.ReductionKernel("T x", "T y", "x * _J", "a + b", "y = a", "0", "uses_j")
    _, plan = rplan(k, fake((4, 8, 4, 8, 4, 32)), axis=(1, 3, 5))
    assert not plan.inner_rows
    # merged reduced axes stay one pass
    _, plan = rplan(ssq, fake((6, 40, 5, 48)), axis=(1, 2, 3))
    assert plan.rndim == 1 and not plan.inner_rows


def test_few_adjacent_outputs_of_one_reduced_dim_share_each_warp_between_rows(ssq):
    """NHWC statistics, (N, H, W, 8) over (0, 1, 2): one reduced dim after merging, 8 adjacent outputs. The
    runtime-rank cols entry takes it as (R, 1), so that a warp load spans several rows, not one row of 8: with
    vector lanes (16 bytes of 4 outputs) where the inputs are 4 bytes wide or less, split over the device;
    8-byte inputs keep the scalar lanes."""
    for shape, axes, kept in (((128, 128, 512, 8), (0, 1, 2), 8), ((2048, 1024, 16), (0, 1), 16)):
        for dtype, vec in (("float32", 4), ("float64", 1)):
            _, plan = rplan(ssq, fake(shape, dtype), axis=axes)
            assert plan.rndim == 1 and plan.kept == (kept,)
            strategy = reduction_strategy(plan, H200_SMS, slab=False)
            first, second = strategy.passes
            assert strategy.kind == "cols split" and first.variant == VariantKey("cols", "int64", 0, vec), (shape, dtype)
            assert first.shape is not None and first.shape.red == (plan.red_size, 1) and first.shape.kept == (kept,)
            assert first.nchunks > 1 and (first.nchunks - 1) * first.chunk < plan.red_size <= first.nchunks * first.chunk
            assert second.variant.entry == "split_final" and second.nchunks == first.nchunks


def test_a_few_outputs_over_many_rows_split_their_vector_tiles(ssq):
    """32-4096 contiguous float16 outputs over 10^4-10^6 rows (one vectorised tile or a few): the vectorised
    lanes (8 outputs a 16-byte load) split over the device, each lane walking at least FEW_TILES_MIN_ROWS rows.
    float32 (scalar warp loads of 128 bytes) and float64 keep the one-dim entry, every lane its own output. Up to
    FEW_TILES_PER_SM tiles per SM count as few (a 16384-wide matrix's 64 tiles of 256 outputs split too)."""
    from kspec.kernels.planning._reduction_cols import FEW_TILES_MIN_ROWS

    for shape, axes in (((4096, 512, 32), (0, 1)), ((8192, 4096), (0,)), ((256, 256, 1024), (0, 1)), ((1 << 14, 1 << 14), (0,))):
        _, plan = rplan(ssq, fake(shape, "float16"), axis=axes)
        first, second = reduction_strategy(plan, H200_SMS, slab=False).passes
        assert first.variant == VariantKey("cols", "int64", 0, 8) and first.shape.red == (plan.red_size, 1), shape
        lanes = min(plan.kept[0] // 8, 32)
        assert first.chunk >= FEW_TILES_MIN_ROWS * (first.block // 32) * (32 // lanes)
        assert second.variant.entry == "split_final" and second.nchunks == first.nchunks > 1
        for dtype in ("float32", "float64"):
            _, plan = rplan(ssq, fake(shape, dtype), axis=axes)
            assert reduction_strategy(plan, H200_SMS, slab=False).passes[0].shape is None, (shape, dtype)


@pytest.mark.parametrize("dtype", ["int8", "float16"])
def test_vectorised_cols_entries_fit_static_shared_memory_with_wide_sums(dtype):
    """The vectorised cols lanes keep several of their VEC outputs in shared memory at once: with 1-byte inputs
    (16 outputs a lane) and double sums that was 64 KB, past the 48 KB a static allocation may take, and ptxas
    refused the module. The groups are sized to KSPEC_COLS_VEC_SMEM: every entry compiles (NVRTC, no GPU)."""
    dot = kspec.ReductionKernel("T x, T w", "float64 y", "double(x) * double(w)", "a + b", "y = a", "0", "wide_dot")
    z = np.zeros((64, 8, 16, 64), dtype)
    dot.compile(z, z, arch="sm_90")


def _spilled_bytes(kernel, dtype):
    """(entry, bytes of spill stores) of every entry of ``kernel``'s module for a ``dtype`` input: ptxas's report
    through NVRTC (the kernel made with ``--ptxas-options=-v``), no GPU."""
    log = io.StringIO()
    kernel.compile(np.zeros((4, 4), dtype), arch="sm_90", log_stream=log)
    spills = re.findall(r"Function properties for (\S+)\s+ptxas\s+\.\s+\d+ bytes stack frame, (\d+) bytes spill stores",
                        log.getvalue())
    return [(entry, int(stored)) for entry, stored in spills]


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex64"])
def test_reduction_entries_keep_their_registers(dtype):
    """No entry of a sum-of-squares module spills (ptxas's report through NVRTC, no GPU). The vectorised cols
    lanes sit at their 64-register bound: a packed-rows branch added there once spilled 8 bytes of the float16
    entry, and its rows ran 10-15% slower (H200, NOTES v61). (1-byte inputs: the next test.)"""
    kernel = kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "spill_l2",
                                   options=("--ptxas-options=-v",))
    spills = _spilled_bytes(kernel, dtype)
    assert len(spills) >= 6, spills  # every entry reported
    assert [name for name, stored in spills if stored] == []


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_one_byte_inputs_load_as_words(dtype):
    """1-byte inputs' vectors stay 32-bit words until each byte is used (kspec::ReadVec): as arrays of bytes,
    a float32 sum of squares spilled 260-728 bytes in the vectorised cols entry, a uint8 max 300 (ptxas through
    NVRTC, no GPU). What is left is held under 64 bytes an entry."""
    for name, out, body, reduce in (("byte_ssq", "float32 y", "float(x) * x", "a + b"), ("byte_max", "T y", "x", "max(a, b)")):
        kernel = kspec.ReductionKernel("T x", out, body, reduce, "y = a", "0", name, options=("--ptxas-options=-v",))
        spills = _spilled_bytes(kernel, dtype)
        assert len(spills) >= 6 and [(entry, n) for entry, n in spills if n >= 64] == []


def test_a_non_const_input_compiles_in_every_entry():
    """A ``_non_const`` input binds ``T&`` into the walks' loaded vectors: they are mutable there (the cols and slab
    entries declared them const, and NVRTC refused the module)."""
    clamp = kspec.ReductionKernel("_non_const T x", "T y", "x", "max(a, b)", "y = a", "0", "non_const_max")
    for dtype in ("uint8", "float32"):
        clamp.compile(np.zeros((4, 4), dtype), arch="sm_90")


def test_four_byte_inputs_take_vectorised_cols_lanes_where_their_tiles_fill_the_device(ssq):
    # (128, 64, 128, 128) over axis 2: one reduced dim of 128, 2^20 adjacent outputs: 16-byte loads of 4 outputs
    _, plan = rplan(ssq, fake((128, 64, 128, 128)), axis=2)
    first = reduction_strategy(plan, H200_SMS, slab=False).passes[0]
    assert first.variant == VariantKey("cols", "int32", 0, 4) and first.shape.red == (128, 1) and first.nchunks == 1
    # rows of 64 on 2048 tiles: one warp a tile would leave most of the device idle; two, of 32 rows each,
    # fill the 32 warps per SM the entry holds
    _, plan = rplan(ssq, fake((8, 64, 64, 512)), axis=1)
    first = reduction_strategy(plan, H200_SMS, slab=False).passes[0]
    assert first.variant == VariantKey("cols", "int32", 0, 4) and first.block == 64 and first.grid == 2048
    # axis 0 of a square matrix: 128 vectorised tiles would be too few; the warps alone say so, and the
    # vectorised entry is never asked (asking loads it)
    _, plan = rplan(ssq, fake((1 << 14, 1 << 14)), axis=0)
    asked = []
    first = reduction_strategy(plan, H200_SMS, max_threads=lambda v: asked.append(v) or 1024, slab=False).passes[0]
    assert first.variant == VariantKey("cols", "int64", 1, 1) and all(v.vec == 1 for v in asked)


def test_unsplit_vectorised_cols_launches_narrow_to_32_bits_where_their_offsets_fit(ssq):
    """The vectorised cols entry's 32-bit twin serves an unsplit launch whose every byte offset and element count is
    under 2**31; a layout of 2**31 bytes, a split, or a map expression naming the loop's indexers keeps 64 bits."""
    def first_pass(kernel, shape, axis, dtype="float32"):
        _, plan = rplan(kernel, fake(shape, dtype), axis=axis)
        return reduction_strategy(plan, H200_SMS, slab=False).passes[0]

    assert first_pass(ssq, (256, 256, 512), 0).variant == VariantKey("cols", "int32", 0, 4)
    assert first_pass(ssq, (8, 128, 16, 1024), 1).variant == VariantKey("cols", "int32", 0, 4)
    big = first_pass(ssq, (2048, 64, 4096), 1)  # 2**31 bytes: its furthest vector ends past 2**31
    assert big.variant == VariantKey("cols", "int64", 0, 4) and big.nchunks == 1
    assert first_pass(ssq, (2047, 64, 4096), 1).variant == VariantKey("cols", "int32", 0, 4)  # 2**31 - 2**20 bytes
    split = first_pass(ssq, (1 << 14, 64, 64), (0, 1))  # 64 outputs of long columns: split over the device
    assert split.nchunks > 1 and split.variant.index == "int64"
    rows = kspec.ReductionKernel("T x", "T y", "x * (_J + 1)", "a + b", "y = a", "0", "row_weighted")
    assert first_pass(rows, (256, 256, 512), 0).variant == VariantKey("cols", "int64", 0, 4)


def test_nchw_statistics_over_the_channels_take_vectorised_tiles_of_whole_batches_of_rows(ssq):
    """One reduced dim in the runtime-rank cols entry (NCHW over axis 1), planned before the entry is loaded:
    its launch bounds hold 32 warps per SM (blocks of 512 x 2), not the SM's 64, and each warp walks 32 rows at
    least (two batches of its 16 vector loads)."""
    from kspec.kernels.planning._reduction_cols import MAX_BLOCKS_PER_SM, _bounded_blocks

    # 4096 vectorised tiles of rows of 64: they fill the device unsplit (a guess of 64 warps per SM had said
    # they were too few and sent the layout to the scalar lanes), two warps a tile
    for shape in ((4096, 64, 128), (32, 64, 32, 1024)):
        _, plan = rplan(ssq, fake(shape), axis=1)
        strategy = reduction_strategy(plan, H200_SMS, slab=False)
        (first,) = strategy.passes
        assert first.variant == VariantKey("cols", "int32", 0, 4) and first.block == 64, shape
        assert first.nchunks == 1 and first.grid == plan.out_size // 128
    # 512 tiles of rows of 256: eight warps a tile fill one wave of the 32 warps an SM holds (16 made two)
    _, plan = rplan(ssq, fake((32, 256, 256, 8)), axis=1)
    (first,) = reduction_strategy(plan, H200_SMS, slab=False).passes
    assert first.variant == VariantKey("cols", "int32", 0, 4) and first.block == 256 and first.grid == 512
    # the estimate: launch bounds over warps, at most 32 blocks; wider sums hold half the threads
    cols = first.variant
    assert [_bounded_blocks(plan, cols, w) for w in (1, 2, 8, 16)] == [MAX_BLOCKS_PER_SM, 16, 4, 2]
    _, wide = rplan(ssq, fake((32, 256, 256, 8), "float64"), axis=1)
    assert _bounded_blocks(wide, VariantKey("cols", "int64", 0, 1), 8) == 2


def test_vectorised_cols_tiles_take_the_warps_of_one_wave(ssq):
    """Vectorised tiles that one wave of the entry's 32 warps per SM holds at 2-7 warps each take that many, not
    the default block's 8 (which made 2-4 waves); not one warp a tile, rows of 128, or tiles each one run of memory."""
    def first(shape, axis, dtype="float32"):
        _, plan = rplan(ssq, fake(shape, dtype), axis=axis)
        (step,) = reduction_strategy(plan, H200_SMS, slab=False).passes
        assert step.variant.entry == "cols" and step.variant.vec > 1 and step.nchunks == 1
        return step

    # 1,024 tiles of 128 float32 outputs: 8 a SM, 4 warps each fill its 32; 2,048 tiles: 2 warps each
    assert (first((512, 128, 1024), 0).grid, first((512, 128, 1024), 0).block) == (1024, 128)
    assert (first((512, 256, 512), 1).grid, first((512, 256, 512), 1).block) == (2048, 64)
    assert first((512, 256, 512), 1, "float16").block == 128  # 1,024 tiles of 256 float16 outputs
    # 4,096 tiles would take one warp each: the default block's rule holds
    assert first((16, 256, 16, 2048), 1).block == 256
    # each tile one run of memory (the whole kept row is the tile, the rows adjacent)
    assert first((2048, 256, 256), 1, "float16").block == 256
    # rows of 128
    assert first((1024, 128, 8, 64), 1, "float16").block == 128
