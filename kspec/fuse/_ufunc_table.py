"""Which NumPy ufuncs kspec.fuse supports, and the C++ expression each computes one loop with.

The expressions call the device functions of ``templates/include/kspec/ufunc.cuh`` (``kspec::uf::name``),
which carry NumPy's semantics per loop type; where a plain C++ operator already has them (float32/float64
arithmetic, comparisons of same-typed integers and floats) the operator is used, so that generated code
reads like the Python it came from.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType

from ..dtypes import BY_NAME

# NumPy ufunc __name__ -> (nin, nout). Every elementwise math ufunc of NumPy 2 except the datetime one
# (isnat) and the gufuncs with core dimensions (matmul, vecdot, matvec, vecmat): not elementwise.
SUPPORTED: MappingProxyType[str, tuple[int, int]] = MappingProxyType({
    # arithmetic
    "add": (2, 1), "subtract": (2, 1), "multiply": (2, 1), "divide": (2, 1), "floor_divide": (2, 1),
    "remainder": (2, 1), "fmod": (2, 1), "divmod": (2, 2), "power": (2, 1), "float_power": (2, 1),
    "negative": (1, 1), "positive": (1, 1), "absolute": (1, 1), "fabs": (1, 1), "sign": (1, 1),
    "square": (1, 1), "reciprocal": (1, 1), "conjugate": (1, 1), "heaviside": (2, 1),
    "gcd": (2, 1), "lcm": (2, 1),
    # exponents and logarithms
    "exp": (1, 1), "exp2": (1, 1), "expm1": (1, 1), "log": (1, 1), "log2": (1, 1), "log10": (1, 1),
    "log1p": (1, 1), "logaddexp": (2, 1), "logaddexp2": (2, 1), "sqrt": (1, 1), "cbrt": (1, 1),
    # trigonometric and hyperbolic
    "sin": (1, 1), "cos": (1, 1), "tan": (1, 1), "arcsin": (1, 1), "arccos": (1, 1), "arctan": (1, 1),
    "arctan2": (2, 1), "hypot": (2, 1), "sinh": (1, 1), "cosh": (1, 1), "tanh": (1, 1),
    "arcsinh": (1, 1), "arccosh": (1, 1), "arctanh": (1, 1),
    "deg2rad": (1, 1), "rad2deg": (1, 1), "degrees": (1, 1), "radians": (1, 1),
    # rounding and floating-point functions
    "rint": (1, 1), "floor": (1, 1), "ceil": (1, 1), "trunc": (1, 1), "modf": (1, 2), "frexp": (1, 2),
    "ldexp": (2, 1), "copysign": (2, 1), "nextafter": (2, 1), "spacing": (1, 1), "signbit": (1, 1),
    "isnan": (1, 1), "isinf": (1, 1), "isfinite": (1, 1),
    "maximum": (2, 1), "minimum": (2, 1), "fmax": (2, 1), "fmin": (2, 1),
    # comparisons and logic
    "equal": (2, 1), "not_equal": (2, 1), "less": (2, 1), "less_equal": (2, 1), "greater": (2, 1),
    "greater_equal": (2, 1), "logical_and": (2, 1), "logical_or": (2, 1), "logical_xor": (2, 1),
    "logical_not": (1, 1),
    # bits
    "bitwise_and": (2, 1), "bitwise_or": (2, 1), "bitwise_xor": (2, 1), "invert": (1, 1),
    "left_shift": (2, 1), "right_shift": (2, 1), "bitwise_count": (1, 1),
})

# NumPy ufuncs that exist but are not elementwise math, with the reason (for error messages).
NOT_SUPPORTED: MappingProxyType[str, str] = MappingProxyType({
    "matmul": "it contracts core dimensions, not elementwise",
    "vecdot": "it contracts core dimensions, not elementwise",
    "matvec": "it contracts core dimensions, not elementwise",
    "vecmat": "it contracts core dimensions, not elementwise",
    "isnat": "kspec has no datetime dtypes",
})

# Ufuncs that are another one under a second name, and the two-output ufuncs as pairs of functions.
_SAME_AS = {"degrees": "rad2deg", "radians": "deg2rad"}
_PAIRS = {
    "divmod": ("floor_divide", "remainder"),
    "modf": ("modf_fraction", "modf_integral"),
    "frexp": ("frexp_mantissa", "frexp_exponent"),
}
_ARITHMETIC = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/"}
_COMPARISON = {"equal": "==", "not_equal": "!=", "less": "<", "less_equal": "<=", "greater": ">", "greater_equal": ">="}
_BOOL_LOGIC = {"logical_and": "&&", "logical_or": "||", "logical_xor": "!="}
# Ufuncs whose integer/bool loops return the operand itself, and the constant answers for integers.
_INT_IDENTITY = frozenset({"floor", "ceil", "trunc", "conjugate", "positive"})
_INT_CONSTANT = {"isnan": "false", "isinf": "false", "isfinite": "true"}

_NATIVE_FLOAT = frozenset({"float32", "float64"})


def _kind(dtype: str) -> str:
    return BY_NAME[dtype].kind


def _call(function: str, args: Sequence[str]) -> str:
    return f"kspec::uf::{function}({', '.join(args)})"


def emit_loop(name: str, loop_in: Sequence[str], args: Sequence[str]) -> tuple[str, ...]:
    """The expressions of one loop of ufunc ``name`` (already checked to be a loop NumPy has)."""
    if name in _PAIRS:
        return tuple(_call(function, args) for function in _PAIRS[name])
    return (_single(_SAME_AS.get(name, name), loop_in, args),)


def _single(name: str, loop_in: Sequence[str], args: Sequence[str]) -> str:
    first = loop_in[0]
    kind = _kind(first)
    same = all(d == first for d in loop_in)
    if name == "positive" or (name in _INT_IDENTITY and kind in "biu") or (name == "conjugate" and kind == "f"):
        return f"({args[0]})"
    if name in _INT_CONSTANT and kind in "biu":
        return _INT_CONSTANT[name]
    # Plain operators where C++ already means what NumPy means.
    native = first in _NATIVE_FLOAT
    if name in _ARITHMETIC and same and (native or (kind == "c" and name in ("add", "subtract"))):
        return f"({args[0]} {_ARITHMETIC[name]} {args[1]})"
    if name == "negative" and native:
        return f"(-{args[0]})"
    if name in _COMPARISON and same and (native or kind in "biu"):
        return f"({args[0]} {_COMPARISON[name]} {args[1]})"
    if kind == "b" and name in _BOOL_LOGIC:
        return f"({args[0]} {_BOOL_LOGIC[name]} {args[1]})"
    if kind == "b" and name == "logical_not":
        return f"(!{args[0]})"
    return _call(name, args)
