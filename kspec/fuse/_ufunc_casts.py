"""C++ text for NumPy's ``astype`` conversions and for Python constants, per kspec dtype.

Half-precision values are built from exact float literals (the constant is rounded to the 16-bit format
here, in Python, so no double rounding happens on the device); infinities and NaN are bit patterns.
"""

from __future__ import annotations

import math

import numpy as np

from .._errors import KspecOverflowError, KspecTypeError
from ..dtypes import BY_NAME

_HALF = {"float16": ("__half2float", "__float2half_rn", "__double2half"),
         "bfloat16": ("__bfloat162float", "__float2bfloat16_rn", "__double2bfloat16")}
_COMPLEX_PART = {"complex64": "float32", "complex128": "float64"}
_WIDE_INTS = frozenset({"int32", "int64", "uint32", "uint64"})  # not exact in float: convert via double


def cast(expr: str, from_dtype: str, to_dtype: str) -> str:
    """``expr`` (of ``from_dtype``'s C type) converted to ``to_dtype`` with NumPy's astype semantics."""
    src, dst = _check(from_dtype, "from_dtype"), _check(to_dtype, "to_dtype")
    if src.name == dst.name:
        return expr
    if dst.kind == "b":
        if src.kind == "c" or src.name in _HALF:
            return f"kspec::uf::nonzero({expr})"
        return f"({expr} != 0)"
    if dst.kind == "c":
        if src.kind == "c":
            return f"{dst.c_type}({expr})"
        part = _COMPLEX_PART[dst.name]
        return f"{dst.c_type}({cast(expr, src.name, part)}, 0)"
    if src.kind == "c":  # complex -> real: the real part, as NumPy (which warns)
        return cast(f"({expr}).real()", _COMPLEX_PART[src.name], dst.name)
    if src.name in _HALF:
        return cast(f"{_HALF[src.name][0]}({expr})", "float32", dst.name)
    if dst.name in _HALF:
        _, from_float, from_double = _HALF[dst.name]
        if src.name == "float64" or src.name in _WIDE_INTS:
            return f"{from_double}((double)({expr}))"
        return f"{from_float}((float)({expr}))"
    if dst.kind in "iu" and src.kind == "f":
        return f"kspec::uf::float_to_int<{dst.c_type}>({expr})"
    return f"(({dst.c_type})({expr}))"


def literal(value: bool | int | float | complex, dtype: str) -> str:
    """A C++ expression of ``dtype``'s C type holding the Python constant ``value``."""
    d = _check(dtype, "dtype")
    if isinstance(value, (np.generic,)):
        value = value.item()
    if not isinstance(value, (bool, int, float, complex)):
        raise KspecTypeError(f"literal: value {value!r} is not a Python bool, int, float or complex")
    if d.kind == "b":
        return "true" if value else "false"
    if d.kind in "iu":
        if isinstance(value, (float, complex)):
            raise KspecTypeError(f"literal: {value!r} is not an integer, so it cannot be a {dtype} constant")
        return _int_literal(int(value), dtype)
    if d.kind == "f":
        if isinstance(value, complex):
            raise KspecTypeError(f"literal: complex {value!r} cannot be a {dtype} constant")
        return _float_literal(_to_float(value, dtype), dtype)
    part = _COMPLEX_PART[dtype]
    z = complex(value)
    return f"{d.c_type}({_float_literal(z.real, part)}, {_float_literal(z.imag, part)})"


def _check(dtype: str, what: str):  # type: ignore[no-untyped-def]
    row = BY_NAME.get(dtype) if isinstance(dtype, str) else None
    if row is None:
        raise KspecTypeError(f"{what}: {dtype!r} is not a kspec dtype name")
    return row


_INT_FORMS = {
    "int8": "((signed char){})", "int16": "((short){})", "int32": "{}", "int64": "{}LL",
    "uint8": "((unsigned char){}U)", "uint16": "((unsigned short){}U)", "uint32": "{}U", "uint64": "{}ULL",
}


def _int_literal(value: int, dtype: str) -> str:
    info = np.iinfo(dtype)
    if not info.min <= value <= info.max:
        raise KspecOverflowError(f"Python integer {value} out of bounds for {dtype}")
    if value == info.min and info.min < 0 and dtype in ("int32", "int64"):
        # -2147483648 is unary minus applied to a literal that does not fit int: spell it as MIN + 1 - 1.
        suffix = "LL" if dtype == "int64" else ""
        return f"({value + 1}{suffix} - 1{suffix})"
    text = _INT_FORMS[dtype].format(value)
    return f"({text})" if value < 0 and not text.startswith("((") else text


def _to_float(value: bool | int | float, dtype: str) -> float:
    try:
        return float(value)
    except OverflowError:
        raise KspecOverflowError(f"Python integer {value} is too large to convert to {dtype}") from None


def _float_literal(x: float, dtype: str) -> str:
    if dtype == "float64":
        if math.isfinite(x):
            return repr(x)
        return _special(x, "__longlong_as_double(0x7ff8000000000000LL)", "__longlong_as_double(0x7ff0000000000000LL)")
    if dtype == "float32":
        with np.errstate(over="ignore"):
            f = np.float32(x)
        if np.isfinite(f):
            return _f32(float(f))
        return _special(float(f), "__int_as_float(0x7fc00000)", "__int_as_float(0x7f800000)")
    # float16 / bfloat16: round here once, then build from an exactly representable float literal.
    rounded = _round_bfloat16(x) if dtype == "bfloat16" else float(_f16(x))
    to_half = _HALF[dtype][1]
    if math.isfinite(rounded):
        return f"{to_half}({_f32(rounded)})"
    nan, inf, neg_inf = {"float16": (0x7E00, 0x7C00, 0xFC00), "bfloat16": (0x7FC0, 0x7F80, 0xFF80)}[dtype]
    make = "__ushort_as_half" if dtype == "float16" else "__ushort_as_bfloat16"
    bits = nan if math.isnan(rounded) else (inf if rounded > 0 else neg_inf)
    return f"{make}((unsigned short){bits:#x}U)"


def _special(x: float, nan: str, inf: str) -> str:
    if math.isnan(x):
        return nan
    return inf if x > 0 else f"(-{inf})"


def _f32(x: float) -> str:
    """Shortest literal that reads back as the float32 ``x`` (which must be exactly representable)."""
    text = str(np.float32(x))
    if not any(c in text for c in ".en"):
        text += ".0"
    return text + "f"


def _f16(x: float) -> np.float16:
    with np.errstate(over="ignore"):
        return np.float16(x)


_BF16_MAX = float.fromhex("0x1.fe00000000000p+127")


def _round_bfloat16(x: float) -> float:
    """``x`` rounded to bfloat16 (8 significant bits, float32's exponent range), half to even."""
    if not math.isfinite(x) or x == 0:
        return x
    _, e = math.frexp(x)  # |x| = m * 2**e with m in [0.5, 1)
    quantum_exp = max(e - 8, -133)  # 2**-133 is the smallest bfloat16 subnormal
    q = round(math.ldexp(x, -quantum_exp))  # exact scaling; round() is half to even
    r = math.ldexp(q, quantum_exp)
    if abs(r) > _BF16_MAX:
        return math.copysign(math.inf, x)
    return r
