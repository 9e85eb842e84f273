"""The single table of dtypes kspec knows: name <-> C type <-> NumPy, and the headers a type needs.

Everything else (spec validation, templates, argument packing, codegen) asks this module; no other module
spells a C type or an item size.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

import numpy as np

from ._named_tuple import NamedTuple

Kind = Literal["b", "i", "u", "f", "c", "V"]
Header = Literal["fp16", "bf16", "complex", "void"]


class DType(NamedTuple):
    """One row of the table (a NamedTuple, not a dataclass: defining one costs a tenth at import)."""

    name: str  # canonical NumPy name, used in specs
    c_type: str  # spelling inside generated CUDA C++
    kind: Kind  # NumPy kind letter
    itemsize: int
    header: Header | None = None  # device header the type needs (heavy ones only when needed)

    @property
    def numpy(self) -> np.dtype | None:
        """The NumPy dtype, or None for bfloat16 when ``ml_dtypes`` is not installed."""
        return _numpy_dtype(self.name)

    @property
    def python_type(self) -> type:
        """The Python scalar type a value of this dtype reads back as (for type hints)."""
        return {"b": bool, "i": int, "u": int, "f": float, "c": complex, "V": bytes}[self.kind]


_TABLE: tuple[DType, ...] = (
    DType("bool", "bool", "b", 1),
    DType("int8", "signed char", "i", 1),
    DType("int16", "short", "i", 2),
    DType("int32", "int", "i", 4),
    DType("int64", "long long", "i", 8),
    DType("uint8", "unsigned char", "u", 1),
    DType("uint16", "unsigned short", "u", 2),
    DType("uint32", "unsigned int", "u", 4),
    DType("uint64", "unsigned long long", "u", 8),
    DType("float16", "__half", "f", 2, "fp16"),
    DType("bfloat16", "__nv_bfloat16", "f", 2, "bf16"),
    DType("float32", "float", "f", 4),
    DType("float64", "double", "f", 8),
    DType("complex64", "complex<float>", "c", 8, "complex"),
    DType("complex128", "complex<double>", "c", 16, "complex"),
)

_VOID = re.compile(r"void([1-9][0-9]*)")


def _void_size(name: object) -> int | None:
    """The byte size of an unstructured void dtype's name (NumPy's ``V3`` is named ``void24``: a blob of bytes),
    else None."""
    match = _VOID.fullmatch(name) if isinstance(name, str) else None
    return int(match.group(1)) // 8 if match is not None and int(match.group(1)) % 8 == 0 else None


def _structured(dt: np.dtype) -> bool:
    """A void dtype with fields or a subarray: not a kernel type in kspec (only unstructured ones are)."""
    return dt.kind == "V" and (dt.fields is not None or dt.subdtype is not None)


class _Table(dict[str, DType]):
    """The table by name; an unstructured void dtype's row is made on first use (any size is one), as CuPy gives
    it to kernels: ``cupy::UnstructuredVoid<N>`` (cupy/unstructured_void.cuh)."""

    def __missing__(self, name: str) -> DType:
        size = _void_size(name)
        if size is None:
            raise KeyError(name)
        row = self[name] = DType(name, f"cupy::UnstructuredVoid<{size}>", "V", size, "void")
        return row

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or _void_size(name) is not None


BY_NAME: dict[str, DType] = _Table({d.name: d for d in _TABLE})
BY_C_TYPE: dict[str, DType] = {d.c_type: d for d in _TABLE}
NAMES: tuple[str, ...] = tuple(d.name for d in _TABLE)


def _numpy_dtype(name: str) -> np.dtype | None:
    if name == "bfloat16":
        try:
            import ml_dtypes  # optional: NumPy has no bfloat16 of its own
        except ImportError:
            return None
        bfloat16: np.dtype = np.dtype(ml_dtypes.bfloat16)
        return bfloat16
    return np.dtype(name)


def is_placeholder(type_name: str) -> bool:
    """CuPy's rule: a one-character type specifier is a placeholder (``T``, ``U``, ...)."""
    return len(type_name) == 1


def canonical_name(type_name: str) -> str | None:
    """The table name for a dtype name or NumPy alias (``float`` -> ``float64``, ``f4`` -> ``float32``).

    Returns None when the name is not a dtype kspec supports. One-character names are placeholders and
    never dtypes (CuPy's rule), so this returns None for them.
    """
    if type_name in BY_NAME:
        return type_name
    if is_placeholder(type_name):
        return None
    try:
        dt = np.dtype(type_name)
    except (TypeError, ValueError, SyntaxError):  # "thrust::pair<float, int>" reads as a struct format
        return None
    if _structured(dt):  # "float, int" parses as one
        return None
    return dt.name if dt.name in BY_NAME else None


def lookup(type_name: str) -> DType:
    """The row for a dtype name or alias; ``KeyError`` if there is none (callers turn it into a spec error)."""
    name = canonical_name(type_name)
    if name is None:
        raise KeyError(type_name)
    return BY_NAME[name]


def from_numpy(dtype: object) -> DType:
    """The row for a NumPy dtype (or anything ``np.dtype`` accepts); ``KeyError`` if unsupported (a structured
    dtype among them: its fields are not a kernel type here)."""
    dt = np.dtype(dtype)  # type: ignore[call-overload]
    if dt.name == "bfloat16":
        return BY_NAME["bfloat16"]
    if _structured(dt):
        raise KeyError(str(dt))
    return lookup(dt.name)


def suggest(type_name: str) -> list[str]:
    """Close table names for an unknown type name, for error messages."""
    import difflib

    return difflib.get_close_matches(type_name, NAMES, n=3, cutoff=0.6)


def headers_for(names: "list[str] | tuple[str, ...] | set[str]") -> set[Header]:
    """The device headers a set of dtype names needs (only the heavy ones; the rest need nothing)."""
    out: set[Header] = set()
    for n in names:
        h = BY_NAME[n].header
        if h is not None:
            out.add(h)
    return out


def c_strides(shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    """C-contiguous strides in bytes (an extent of 0 counts as 1, as NumPy does)."""
    strides = []
    step = itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= max(extent, 1)
    return tuple(reversed(strides))
