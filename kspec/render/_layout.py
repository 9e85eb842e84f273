"""C layouts of kernel parameters: what each parameter type of a rendered module is, byte for byte.

A :class:`Layout` is one parameter's C type as data: its fields (:class:`Field`: offset, NumPy format, C
array length), size and alignment, by the C rules (each member at the next multiple of its alignment, the
size padded to the largest alignment), and a NumPy dtype that reproduces it. One function per C type
(``shape_layout``, ``strided_array_layout``...) builds it; :mod:`kspec.render._abi` puts them together into
each entry point's parameter list. ``tests/test_render_abi`` compiles static_asserts of every offset.

Conventions of all index structs (``templates/include/kspec/indexer.cuh``):

* dims are stored INNERMOST FIRST (``extent[0]`` is the last axis of the C-order shape), unused trailing
  entries are ignored (fill them with 0);
* strides are in BYTES, negative and zero (broadcast) allowed;
* ``IndexT`` (``index``) is int32 or int64 and types every size, extent and stride of the launch.

The C type of each slot kind (``Slot.kind`` of :mod:`kspec.render._abi`; ``Slot.name`` is the parameter's
name, or ``_<kind>`` for the others):

============== =================================================== =========================================
kind           C type                                              fields (in order)
============== =================================================== =========================================
size           ``IndexT``                                          value: the loop size
shape          ``kspec::Shape<NDIM, IndexT>``                      size, extent[N] (+ ndim: int when NDIM=0)
array          ``T*``                                              value: the data pointer
strided_array  ``kspec::StridedArray<T, NDIM, IndexT>``            ptr, stride[N]
scalar         the dtype's C type                                  value (bool: 1 byte; bfloat16: its bits)
raw_view       ``kspec::RawView<T>``, or                           ``ptr_, size_, ndim_, c_contiguous_,
               ``kspec::RankedView<T, N, C>`` where the            shape_[16], strides_[16]`` (C order,
               specialization fixed the rank N (the                bytes, int64: CuPy's raw CArray); a
               constructors' kernels)                              RankedView's arrays hold max(N, 1)
reduce_shape   ``kspec::ReduceShape<RNDIM, IndexT>``               out_size, red_size, kept_extent[16],
                                                                   red_extent[R], kept_ndim: int,
                                                                   red_ndim: int
group          ``int``                                             value: lanes per segment (rows only)
reduce_array   ``kspec::ReduceArray<T, RNDIM, IndexT>``            ptr, kept_stride[16], red_stride[R]
workspace      ``kspec::SplitWorkspace<IndexT>``                   ptr, nchunks, chunk
============== =================================================== =========================================

(N = NDIM, or 16 when NDIM is 0; R = RNDIM, or 16 when RNDIM is 0.)
"""

from __future__ import annotations


import numpy as np

from .._named_tuple import NamedTuple
from .. import dtypes
from ._record import Record, assign
from ._variants import DYNAMIC_NDIM, INDEX_C_TYPES, MAX_NDIM, IndexType

_POINTER = ("<u8", 8, 8)
_INT32 = ("<i4", 4, 4)
_INDEX_FIELDS = {"int32": _INT32, "int64": ("<i8", 8, 8)}
_PTRDIFF = ("<i8", 8, 8)

# NumPy format of a dtype's value inside a kernel parameter. bfloat16 travels as its 16 raw bits
# (ml_dtypes' bfloat16 ``.view('<u2')``); every other format is the dtype itself. C alignment == item size.
_VALUE_FORMATS = {
    "bool": "?",
    "int8": "i1",
    "int16": "<i2",
    "int32": "<i4",
    "int64": "<i8",
    "uint8": "u1",
    "uint16": "<u2",
    "uint32": "<u4",
    "uint64": "<u8",
    "float16": "<f2",
    "bfloat16": "<u2",
    "float32": "<f4",
    "float64": "<f8",
    "complex64": "<c8",
    "complex128": "<c16",
}


class Field(Record):
    """One member of a C struct: a value of NumPy ``format``, or a C array of ``count`` of them."""

    # A record, not a NamedTuple (its field ``count`` is a tuple method) nor a dataclass (import cost:
    # kspec/render/_record.py).
    __slots__ = ("name", "format", "count", "offset", "is_array")
    name: str
    format: str
    count: int  # 1 for a plain value
    offset: int
    is_array: bool  # a C array, even of length 1 (``red_extent[1]``): a NumPy subarray field

    def __init__(self, name: str, format: str, count: int, offset: int, is_array: bool = False) -> None:
        assign(self, "name", name)
        assign(self, "format", format)
        assign(self, "count", count)
        assign(self, "offset", offset)
        assign(self, "is_array", is_array)
        assign(self, "_values", (name, format, count, offset, is_array))

    @property
    def itemsize(self) -> int:
        return np.dtype(self.format).itemsize


class Layout(NamedTuple):
    """The exact bytes of one kernel parameter's C type.

    ``struct`` False: a plain value (pointer, integer, dtype value) with a single field ``value``.
    """

    c_type: str
    fields: tuple[Field, ...]
    size: int
    align: int
    struct: bool = True

    def numpy_dtype(self) -> np.dtype:
        """A NumPy structured dtype with these offsets and this size (fill it, then ``tobytes()``)."""
        return np.dtype(
            {
                "names": [f.name for f in self.fields],
                "formats": [(f.format, (f.count,)) if f.is_array else f.format for f in self.fields],
                "offsets": [f.offset for f in self.fields],
                "itemsize": self.size,
            }
        )

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)


def round_up(value: int, align: int) -> int:
    """``value`` rounded up to a multiple of ``align``: where a member (or a slot) of that alignment goes."""
    return (value + align - 1) // align * align


def _struct(c_type: str, members: list[tuple[str, tuple[str, int, int], int | None]]) -> Layout:
    """C layout rules: each member at the next multiple of its alignment, size padded to the max alignment.

    A member's count is None for a plain value, else the length of a C array.
    """
    fields = []
    offset = 0
    align = 1
    for name, (fmt, itemsize, member_align), array_len in members:
        count = 1 if array_len is None else array_len
        offset = round_up(offset, member_align)
        fields.append(Field(name, fmt, count, offset, is_array=array_len is not None))
        offset += itemsize * count
        align = max(align, member_align)
    return Layout(c_type, tuple(fields), round_up(offset, align), align)


def _value(c_type: str, spec: tuple[str, int, int]) -> Layout:
    fmt, itemsize, align = spec
    return Layout(c_type, (Field("value", fmt, 1, 0),), itemsize, align, struct=False)


def _value_spec(dtype: str) -> tuple[str, int, int]:
    size = dtypes.BY_NAME[dtype].itemsize
    return (_VALUE_FORMATS[dtype], size, size)


def _capacity(ndim: int) -> int:
    return MAX_NDIM if ndim == DYNAMIC_NDIM else ndim


def int_layout() -> Layout:
    """A C ``int`` (the ``group`` slot)."""
    return _value("int", _INT32)


def index_layout(index: IndexType) -> Layout:
    return _value(INDEX_C_TYPES[index], _INDEX_FIELDS[index])


def pointer_layout(c_type: str) -> Layout:
    return _value(f"{c_type}*", _POINTER)


def scalar_layout(dtype: str) -> Layout:
    return _value(dtypes.BY_NAME[dtype].c_type, _value_spec(dtype))


def shape_layout(ndim: int, index: IndexType) -> Layout:
    it = _INDEX_FIELDS[index]
    members = [("size", it, None), ("extent", it, _capacity(ndim))]
    if ndim == DYNAMIC_NDIM:
        members.append(("ndim", _INT32, None))
    return _struct(f"kspec::Shape<{ndim}, {INDEX_C_TYPES[index]}>", members)


def strided_array_layout(c_type: str, ndim: int, index: IndexType) -> Layout:
    it = _INDEX_FIELDS[index]
    return _struct(
        f"kspec::StridedArray<{c_type}, {ndim}, {INDEX_C_TYPES[index]}>",
        [("ptr", _POINTER, None), ("stride", it, _capacity(ndim))],
    )


def raw_view_layout(c_type: str, ndim: int = -1, c_contiguous: bool = False) -> Layout:
    """A raw parameter's view: ``kspec::RawView<T>`` (``ndim`` -1: any rank), or ``kspec::RankedView<T, N, C>``
    whose shape and strides hold N entries (at least one) where the specialization fixed the rank."""
    if ndim < 0:
        c_name, capacity = f"kspec::RawView<{c_type}>", MAX_NDIM
    else:
        c_name, capacity = f"kspec::RankedView<{c_type}, {ndim}, {'true' if c_contiguous else 'false'}>", max(ndim, 1)
    return _struct(
        c_name,
        [
            ("ptr_", _POINTER, None),
            ("size_", _PTRDIFF, None),
            ("ndim_", _INT32, None),  # read by kernels as `a.ndim` or `a.ndim()` (kspec::DynamicRank over it)
            ("c_contiguous_", _INT32, None),
            ("shape_", _PTRDIFF, capacity),
            ("strides_", _PTRDIFF, capacity),
        ],
    )


def reduce_shape_layout(rndim: int, index: IndexType) -> Layout:
    it = _INDEX_FIELDS[index]
    return _struct(
        f"kspec::ReduceShape<{rndim}, {INDEX_C_TYPES[index]}>",
        [
            ("out_size", it, None),
            ("red_size", it, None),
            ("kept_extent", it, MAX_NDIM),
            ("red_extent", it, _capacity(rndim)),
            ("kept_ndim", _INT32, None),
            ("red_ndim", _INT32, None),
        ],
    )


def reduce_array_layout(c_type: str, rndim: int, index: IndexType) -> Layout:
    it = _INDEX_FIELDS[index]
    return _struct(
        f"kspec::ReduceArray<{c_type}, {rndim}, {INDEX_C_TYPES[index]}>",
        [("ptr", _POINTER, None), ("kept_stride", it, MAX_NDIM), ("red_stride", it, _capacity(rndim))],
    )


def workspace_layout(index: IndexType) -> Layout:
    it = _INDEX_FIELDS[index]
    return _struct(
        f"kspec::SplitWorkspace<{INDEX_C_TYPES[index]}>",
        [("ptr", _POINTER, None), ("nchunks", it, None), ("chunk", it, None)],
    )
