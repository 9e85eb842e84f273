"""What translating an expression yields: a typed C++ expression, a compile-time Python object, or a tuple.

Python literals are *weak* (``Const``): they take the type of what they meet, the way C++ literals do, so
``x * 2.0`` stays float32 for a float32 ``x`` (the literal is emitted as ``2.0f``) and ``tid + 1`` stays
uint32. A literal that becomes a value on its own (``s = 128``) is int64 / float64 / bool / complex128.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from ._types import BOOL, COMPLEX128, FLOAT64, INT32, INT64, JitType, Scalar, common_type, scalar_of

# Generic only for the checker: Value[Scalar] is what a scalar expression is known to be, so its .type needs
# no isinstance at every use. Covariant: a Value[Scalar] is a Value[JitType].
_T = TypeVar("_T", bound=JitType, covariant=True)


@dataclass(frozen=True)
class Value(Generic[_T]):
    """A C++ expression of a known type."""

    code: str
    type: _T


ScalarValue = Value[Scalar]


@dataclass(frozen=True)
class Const:
    """A Python object known at compile time: a literal, a module, a builtin, a dtype, a device function."""

    value: Any


@dataclass(frozen=True)
class TupleValue:
    items: tuple[Any, ...]  # Value | Const | TupleValue


def is_number(obj: Any) -> bool:
    return isinstance(obj, (bool, int, float, complex, np.generic)) and not isinstance(obj, np.void)


def literal_type(obj: Any) -> Scalar:
    """The type a Python number gets when it stands alone."""
    if isinstance(obj, np.generic):
        return scalar_of(obj.dtype)
    if isinstance(obj, bool):
        return BOOL
    if isinstance(obj, int):
        return INT64
    if isinstance(obj, float):
        return FLOAT64
    return COMPLEX128


def weak_int_type(value: int) -> Scalar:
    """The type C++ gives an integer literal (int, else long long)."""
    return INT32 if -(2**31) <= value < 2**31 else INT64


def literal(obj: Any, as_type: Scalar) -> str:
    """C++ spelling of a Python number converted to ``as_type``."""
    name = as_type.name
    if as_type.kind == "b":
        return "true" if obj else "false"
    if as_type.kind in "iu":
        value = int(obj)
        if name == "int64":
            return f"{value}LL" if -(2**63) < value < 2**63 else "(-9223372036854775807LL - 1)"
        if name == "uint64":
            return f"{value}ULL"
        if name == "uint32":
            return f"{value}u"
        if name == "int32":
            return str(value) if value != -(2**31) else "(-2147483647 - 1)"
        return f"(({as_type.ctype}){value})"
    if as_type.kind == "f":
        real = float(obj.real if isinstance(obj, complex) else obj)
        if not math.isfinite(real):
            return _non_finite(real, name)
        text = repr(real)
        if "e" not in text and "." not in text:
            text += ".0"
        if name == "float64":
            return text
        if name == "float32":
            return f"{text}f"
        return f"(({as_type.ctype})({text}f))"
    number = complex(obj)
    part = FLOAT64 if name == "complex128" else Scalar("float32")
    return f"{as_type.ctype}({literal(number.real, part)}, {literal(number.imag, part)})"


# NaN and infinities have no C++ literal: they are spelled as bit patterns (a quiet NaN, +inf), which every
# NVRTC mode accepts (no <math_constants.h>, no CUDART_NAN_F).
_NON_FINITE_BITS = {
    "float64": ("__longlong_as_double({}LL)", "0x7ff8000000000000", "0x7ff0000000000000"),
    "float32": ("__int_as_float({})", "0x7fc00000", "0x7f800000"),
    "float16": ("__ushort_as_half((unsigned short){}U)", "0x7e00", "0x7c00"),
    "bfloat16": ("__ushort_as_bfloat16((unsigned short){}U)", "0x7fc0", "0x7f80"),
}


def _non_finite(value: float, name: str) -> str:
    spelling, nan_bits, inf_bits = _NON_FINITE_BITS[name]
    if math.isnan(value):
        return spelling.format(nan_bits)
    code = spelling.format(inf_bits)
    return code if value > 0 else f"(-{code})"


def const_to_value(const: Const, against: JitType | None = None) -> ScalarValue:
    """A weak literal as a typed value: of ``against``'s kind when it meets one, else standing alone."""
    obj = const.value
    if isinstance(obj, np.generic):
        t = scalar_of(obj.dtype)
        return Value(literal(obj.item(), t), t)
    if isinstance(against, Scalar) and not isinstance(obj, np.generic):
        if isinstance(obj, bool):
            return Value(literal(obj, BOOL), BOOL)
        if isinstance(obj, int):
            if against.is_float or against.kind == "c":
                return Value(literal(obj, against if against.name != "float16" else scalar_of("float32")), against)
            t = weak_int_type(obj)
            return Value(literal(obj, t), t)
        if isinstance(obj, float) and against.is_float:
            t = against if against.itemsize >= 4 else scalar_of("float32")
            return Value(literal(obj, t), t)
        if isinstance(obj, float) and against.kind == "c":
            t = FLOAT64 if against.name == "complex128" else scalar_of("float32")
            return Value(literal(obj, t), t)
    t = literal_type(obj)
    return Value(literal(obj, t), t)


def operand_types(a: Value[JitType], b: Value[JitType]) -> Scalar:
    assert isinstance(a.type, Scalar) and isinstance(b.type, Scalar)
    return common_type(a.type, b.type)


def cast(value: Value[JitType], to: Scalar) -> str:
    """C++ code converting ``value`` to ``to`` (nothing when it already is)."""
    if value.type == to:
        return value.code
    src = value.type
    if isinstance(src, Scalar) and src.name == "float16" and to.name != "float32" and to.kind != "b":
        return f"static_cast<{to.ctype}>(__half2float({value.code}))"
    if isinstance(src, Scalar) and src.name == "float16" and to.kind == "b":
        return f"(__half2float({value.code}) != 0.0f)"
    if to.name == "float16" and isinstance(src, Scalar) and src.name not in ("float32",):
        return f"__float2half(static_cast<float>({value.code}))"
    return f"static_cast<{to.ctype}>({value.code})"
