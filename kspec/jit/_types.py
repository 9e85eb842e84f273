"""Types of kernel values and of a call's arguments.

A kernel is specialised on its *signature*: one type per argument. Device arrays of any library are typed
views (dtype + ndim); Python ``int`` -> int64, ``float`` -> float64, ``bool`` -> bool, ``complex`` ->
complex128; NumPy scalars keep their dtype. NumPy arrays stand in for device arrays where nothing runs
(``cuda_source``, ``spec``, ``signatures=``).

Arithmetic between typed values follows C++'s usual arithmetic conversions (so ``tid + s`` with ``tid``
uint32 and ``s`` int64 is int64, as CUDA computes it), not NumPy's promotion.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import dtypes
from .._errors import KspecTypeError


@dataclass(frozen=True)
class Scalar:
    """A scalar of one of kspec's dtypes (``Scalar('float32')``)."""

    name: str

    @property
    def info(self) -> dtypes.DType:
        return dtypes.BY_NAME[self.name]

    @property
    def ctype(self) -> str:
        return self.info.c_type

    @property
    def kind(self) -> str:
        return self.info.kind

    @property
    def itemsize(self) -> int:
        return self.info.itemsize

    @property
    def is_int(self) -> bool:
        return self.kind in "iu"

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Array:
    """A strided view of device memory: element type and number of dimensions."""

    dtype: Scalar
    ndim: int

    @property
    def ctype(self) -> str:
        return f"kspec_jit::array<{self.dtype.ctype}, {self.ndim}>"

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(':' * self.ndim) if self.ndim else '()'}]"


@dataclass(frozen=True)
class Shared:
    """A shared-memory array (contiguous, one dimension): a pointer in C++."""

    dtype: Scalar

    @property
    def ctype(self) -> str:
        return f"{self.dtype.ctype}*"

    def __str__(self) -> str:
        return f"shared {self.dtype}[]"


@dataclass(frozen=True)
class Group:
    """A cooperative group: ``'thread_block'`` or ``'grid_group'``."""

    kind: str

    @property
    def ctype(self) -> str:
        return f"cooperative_groups::{self.kind}"

    def __str__(self) -> str:
        return self.kind


@dataclass(frozen=True)
class Dim3Type:
    """A CUDA ``dim3`` (what ``group_index()``, ``dim_blocks()``... return): ``.x``, ``.y``, ``.z`` are uint32."""

    ctype = "dim3"

    def __str__(self) -> str:
        return "dim3"


@dataclass(frozen=True)
class Void:
    ctype = "void"

    def __str__(self) -> str:
        return "None"


JitType = Scalar | Array | Shared | Group | Dim3Type | Void

BOOL, INT32, UINT32, INT64, UINT64 = Scalar("bool"), Scalar("int32"), Scalar("uint32"), Scalar("int64"), Scalar("uint64")
FLOAT16, FLOAT32, FLOAT64 = Scalar("float16"), Scalar("float32"), Scalar("float64")
COMPLEX128 = Scalar("complex128")


def scalar_of(dtype: Any) -> Scalar:
    """The Scalar for a NumPy dtype, scalar type or name; KspecTypeError for one kspec lacks."""
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = str(dtype)
    if name not in dtypes.BY_NAME:
        raise KspecTypeError(f"dtype {dtype!r} is not supported in kernels (supported: {', '.join(dtypes.NAMES)})")
    return Scalar(name)


# -- C++'s usual arithmetic conversions -------------------------------------------------------------------

_INT_RANK = {1: 1, 2: 2, 4: 3, 8: 4}  # signed char/short/int/long long (and their unsigned twins)


def _promote_int(t: Scalar) -> Scalar:
    """Integral promotion: bool and types narrower than int become int."""
    if t.kind == "b" or (t.is_int and t.itemsize < 4):
        return INT32
    return t


def common_type(a: Scalar, b: Scalar) -> Scalar:
    """The type C++ computes ``a OP b`` in (complex and float16 folded in the way kspec emits them)."""
    if a.kind == "c" or b.kind == "c":
        double = {a.name, b.name} & {"complex128", "float64"}
        return COMPLEX128 if double else Scalar("complex64")
    if a.is_float or b.is_float:
        floats = [t for t in (a, b) if t.is_float]
        if all(t.name == "float16" for t in (a, b)):
            return FLOAT16
        widest = max(floats, key=lambda t: t.itemsize)
        return FLOAT32 if widest.itemsize <= 4 else FLOAT64  # half/bf16 mixed with others compute in float
    a, b = _promote_int(a), _promote_int(b)
    if a == b:
        return a
    if (a.kind == "u") == (b.kind == "u"):
        return a if a.itemsize >= b.itemsize else b
    unsigned, signed = (a, b) if a.kind == "u" else (b, a)
    if unsigned.itemsize >= signed.itemsize:
        return unsigned
    return signed  # the signed type is wider, so it holds every value of the unsigned one


def can_hold(target: Scalar, value: Scalar) -> bool:
    """Every value of ``value`` converts to ``target`` without loss (NumPy's 'safe' casting)."""
    if target.name == "float16" or value.name == "float16":
        return target == value or (value.kind == "b")
    return bool(np.can_cast(np.dtype(value.name), np.dtype(target.name), "safe"))


# -- arguments ----------------------------------------------------------------------------------------------

_PY_SCALARS: dict[type, Scalar] = {bool: BOOL, int: INT64, float: FLOAT64, complex: COMPLEX128}


def type_of_argument(obj: Any, position: int, kernel: str) -> JitType:
    """The kernel type of one argument of a call (or of a stand-in for ``cuda_source``/``spec``)."""
    tp = type(obj)
    if tp in _PY_SCALARS:
        return _PY_SCALARS[tp]
    if isinstance(obj, np.generic):
        return scalar_of(obj.dtype)
    from ..runtime import array_dtype_ndim  # noqa: PLC0415  (the runtime only once a call is typed)

    found = array_dtype_ndim(obj)
    if found is not None:
        return Array(scalar_of(found[0]), found[1])
    raise KspecTypeError(
        f"kernel {kernel!r}: args[{position}] is a {tp.__module__}.{tp.__qualname__}; jit kernels take device "
        "arrays (CuPy, PyTorch, kspec, __cuda_array_interface__ / __dlpack__), Python bool/int/float/complex "
        "and NumPy scalars"
    )


_SIG_ITEM = re.compile(r"\s*([A-Za-z_]\w*)\s*(\[\s*(\(\s*\)|:?(\s*,\s*:)*)\s*\])?\s*")


def parse_signature(signature: Any, kernel: str) -> tuple[JitType, ...]:
    """A ``signatures=`` entry -> types. Accepts ``"float32[:], float32[:, :], uint32"`` or a sequence whose
    items are such strings, NumPy dtypes / scalar types, Python scalar types, or NumPy arrays and scalars."""
    if isinstance(signature, str):
        items: list[Any] = [s for s in _split_top(signature)] if signature.strip() else []
    else:
        items = list(signature)
    types: list[JitType] = []
    for position, item in enumerate(items):
        if isinstance(item, str):
            match = _SIG_ITEM.fullmatch(item)
            if match is None:
                raise KspecTypeError(
                    f"kernel {kernel!r}: signature item {item!r}: expected 'dtype' or 'dtype[:]', 'dtype[:, :]'..."
                )
            dtype = scalar_of(match.group(1))
            brackets = match.group(3)
            if match.group(2) is None:
                types.append(dtype)
            else:
                ndim = 0 if brackets.startswith("(") else brackets.count(":")
                types.append(Array(dtype, ndim))
        elif isinstance(item, type) and item in _PY_SCALARS:
            types.append(_PY_SCALARS[item])
        elif isinstance(item, (np.dtype, type)):
            types.append(scalar_of(item))
        else:
            types.append(type_of_argument(item, position, kernel))
    return tuple(types)


def _split_top(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += ch in "[("
        depth -= ch in "])"
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return parts


def signature_tag(types: tuple[JitType, ...]) -> str:
    """A C-identifier-safe tag naming a signature (spec names of ahead-of-time builds, device functions)."""
    parts = []
    for t in types:
        if isinstance(t, Array):
            parts.append(f"{t.dtype.name}_{t.ndim}d")
        elif isinstance(t, Shared):
            parts.append(f"shared_{t.dtype.name}")
        else:
            parts.append(str(t))
    return "_".join(parts) or "noargs"


def module_loaded(name: str) -> bool:
    return name in sys.modules
