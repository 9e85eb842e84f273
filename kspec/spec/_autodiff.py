"""``grad = "auto"``: the backward operation of straight-line elementwise code, derived in reverse mode.

The operation is read as statements ``[type] name = expr;`` (kspec/spec/_cexpr.py), each name assigned once.
The backward recomputes the forward's locals, then walks the statements backwards: every name ``v`` has an
adjoint (``grad_<output>`` to start with for an output, 0 for a local) and a statement ``v = e`` adds
``adjoint(v) * de/du`` to the adjoint of each input or name ``u`` that ``e`` reads. Comparisons, ``!`` and the
rounding functions are piecewise constant (no gradient); ``c ? a : b`` differentiates the branch taken.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .. import dtypes
from .._errors import SpecError
from ._cexpr import CExprError, Node, parse_statements
from ._params import Param

_ADJ = "_kspec_adj_"
_GRAD = "_kspec_grad_"
_LN2, _LN10, _TWO_OVER_SQRT_PI = "0.6931471805599453", "2.302585092994046", "1.1283791670955126"

# function -> partial derivative per argument, as C text over the arguments' text
_UNARY: dict[str, Callable[[str], str | None]] = {
    "sin": lambda a: f"cos({a})", "cos": lambda a: f"(-sin({a}))", "tan": lambda a: f"(1 + tan({a}) * tan({a}))",
    "exp": lambda a: f"exp({a})", "exp2": lambda a: f"(exp2({a}) * {_LN2})", "expm1": lambda a: f"exp({a})",
    "log": lambda a: f"(1 / ({a}))", "log2": lambda a: f"(1 / (({a}) * {_LN2}))",
    "log10": lambda a: f"(1 / (({a}) * {_LN10}))", "log1p": lambda a: f"(1 / (1 + ({a})))",
    "sqrt": lambda a: f"(0.5 / sqrt({a}))", "rsqrt": lambda a: f"(-0.5 * rsqrt({a}) / ({a}))",
    "cbrt": lambda a: f"(cbrt({a}) / (3 * ({a})))", "tanh": lambda a: f"(1 - tanh({a}) * tanh({a}))",
    "sinh": lambda a: f"cosh({a})", "cosh": lambda a: f"sinh({a})", "asin": lambda a: f"rsqrt(1 - ({a}) * ({a}))",
    "acos": lambda a: f"(-rsqrt(1 - ({a}) * ({a})))", "atan": lambda a: f"(1 / (1 + ({a}) * ({a})))",
    "erf": lambda a: f"({_TWO_OVER_SQRT_PI} * exp(-({a}) * ({a})))",
    "erfc": lambda a: f"(-{_TWO_OVER_SQRT_PI} * exp(-({a}) * ({a})))",
    "fabs": lambda a: f"(({a}) < 0 ? -1 : 1)", "abs": lambda a: f"(({a}) < 0 ? -1 : 1)",
    **dict.fromkeys(("floor", "ceil", "round", "trunc", "rint", "nearbyint"), lambda a: None),
}
_BINARY: dict[str, Callable[[str, str], tuple[str | None, str | None]]] = {
    "pow": lambda a, b: (f"(({b}) * pow({a}, ({b}) - 1))", f"(pow({a}, {b}) * log({a}))"),
    "fmin": lambda a, b: (f"(({a}) <= ({b}) ? 1 : 0)", f"(({a}) <= ({b}) ? 0 : 1)"),
    "min": lambda a, b: (f"(({a}) <= ({b}) ? 1 : 0)", f"(({a}) <= ({b}) ? 0 : 1)"),
    "fmax": lambda a, b: (f"(({a}) >= ({b}) ? 1 : 0)", f"(({a}) >= ({b}) ? 0 : 1)"),
    "max": lambda a, b: (f"(({a}) >= ({b}) ? 1 : 0)", f"(({a}) >= ({b}) ? 0 : 1)"),
    "atan2": lambda a, b: (f"(({b}) / (({a}) * ({a}) + ({b}) * ({b})))", f"(-({a}) / (({a}) * ({a}) + ({b}) * ({b})))"),
    "hypot": lambda a, b: (f"(({a}) / hypot({a}, {b}))", f"(({b}) / hypot({a}, {b}))"),
}


# function -> its derivative as C text over its value: where a local holds f(a), the backward reads it rather than
# evaluating f again (a fused GELU's tanh: once per element, not three times; the backward is compute-bound then)
_BY_VALUE: dict[str, Callable[[str], str]] = {
    "tanh": lambda v: f"(1 - {v} * {v})", "exp": lambda v: v, "expm1": lambda v: f"(1 + {v})",
    "exp2": lambda v: f"({v} * {_LN2})", "sqrt": lambda v: f"(0.5 / {v})",
}


# kspec::uf:: (kspec/ufunc.cuh: NumPy's ufuncs, what kspec.fuse's kernels call) -> the rule of the same function
_UF_ALIASES = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arctan2": "atan2", "absolute": "fabs",
               "maximum": "fmax", "minimum": "fmin", "power": "pow", "float_power": "pow", "divide": "true_divide"}  # fmt: skip
_UF_UNARY: dict[str, Callable[[str], str | None]] = {
    "negative": lambda a: "(-1)", "square": lambda a: f"(2 * ({a}))", "reciprocal": lambda a: f"(-1 / (({a}) * ({a})))",
    "arcsinh": lambda a: f"rsqrt(({a}) * ({a}) + 1)", "arccosh": lambda a: f"rsqrt(({a}) * ({a}) - 1)",
    "arctanh": lambda a: f"(1 / (1 - ({a}) * ({a})))",
    **dict.fromkeys(("sign", "signbit", "isnan", "isinf", "isfinite", "logical_not", "invert", "nonzero", "iabs",
                     "uabs", "float_to_int"), lambda a: None),
}  # fmt: skip
_UF_BINARY: dict[str, Callable[[str, str], tuple[str | None, str | None]]] = {
    "add": lambda a, b: ("1", "1"), "subtract": lambda a, b: ("1", "(-1)"),
    "multiply": lambda a, b: (b, a), "true_divide": lambda a, b: (f"(1 / ({b}))", f"(-({a}) / (({b}) * ({b})))"),
    "logaddexp": lambda a, b: (f"(1 / (1 + exp(({b}) - ({a}))))", f"(1 / (1 + exp(({a}) - ({b}))))"),
    "fmod": lambda a, b: ("1", f"(-trunc(({a}) / ({b})))"),
    **dict.fromkeys(("equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and",
                     "logical_or", "logical_xor", "floor_divide", "heaviside", "bitwise_and", "bitwise_or",
                     "bitwise_xor", "left_shift", "right_shift", "gcd", "lcm", "nextafter"),
                    lambda a, b: (None, None)),
}  # fmt: skip
_UF = "kspec::uf::"


def known_functions() -> list[str]:
    return sorted({*_UNARY, *_BINARY, "fma"})


def _rules(name: str) -> tuple[Callable[[str], str | None] | None, Callable[[str, str], tuple[str | None, str | None]] | None]:
    """(unary rule, binary rule) of a called function (C's, with or without an f suffix, or kspec::uf's)."""
    if name.startswith(_UF):
        base = name[len(_UF):].partition("<")[0]  # float_to_int<int>: the rule of float_to_int
        base = _UF_ALIASES.get(base, base)
        return _UF_UNARY.get(base) or _UNARY.get(base), _UF_BINARY.get(base) or _BINARY.get(base)
    base = name[:-1] if name.endswith("f") and (name[:-1] in _UNARY or name[:-1] in _BINARY) else name
    return _UNARY.get(base), _BINARY.get(base)


def derive_backward(operation: str, in_params: Sequence[Param], out_params: Sequence[Param],
                    placeholders: Sequence[str], seeds: Mapping[str, str] | None = None) -> tuple[tuple[str, ...], str]:  # fmt: skip
    """(the inputs that get a gradient, in parameter order; the backward operation writing ``grad_<input>``).
    ``seeds`` replaces an output's incoming gradient ``grad_<output>`` by an expression (a min/max reduction's
    gradient reaches only the elements equal to the result). A :class:`SpecError` on field ``grad`` names
    what cannot be differentiated."""
    key = (operation, _params_key(in_params), _params_key(out_params), tuple(placeholders), tuple(sorted((seeds or {}).items())))
    found = _derived.get(key)
    if found is not None:  # kspec.grad asks per call; the derivation parses the code
        return found
    try:
        found = _derive(operation, in_params, out_params, placeholders, dict(seeds or {}))
    except CExprError as exc:
        raise SpecError(f"'auto' cannot differentiate this operation: {exc}", field="grad") from None
    if len(_derived) >= _DERIVED_KEPT:
        del _derived[next(iter(_derived))]
    _derived[key] = found
    return found


_DERIVED_KEPT = 1024
_derived: dict[tuple[object, ...], tuple[tuple[str, ...], str]] = {}


def _params_key(params: Sequence[Param]) -> tuple[tuple[str, str, bool], ...]:
    return tuple((p.name, p.type, p.raw) for p in params)


def _derive(operation: str, in_params: Sequence[Param], out_params: Sequence[Param],
            placeholders: Sequence[str], seeds: dict[str, str]) -> tuple[tuple[str, ...], str]:  # fmt: skip
    statements = parse_statements(operation, set(placeholders))
    outputs = {p.name: p for p in out_params}
    inputs = {p.name: p for p in in_params}
    assigned: set[str] = set()
    for st in statements:
        if st.target in assigned:
            raise CExprError(f"{st.target!r} is assigned twice ('auto' differentiates code that assigns each name once)")
        if st.target in inputs:
            raise CExprError(f"input {st.target!r} is assigned")
        if st.declared is None and st.target not in outputs:
            raise CExprError(f"{st.target!r} is assigned but is neither an output nor a local declared here")
        if st.declared is not None and st.declared.split()[-1] == "auto":
            raise CExprError(f"local {st.target!r} is declared 'auto'; give its type")
        assigned.add(st.target)
    differentiable = [p.name for p in in_params if not p.raw and (p.is_placeholder or dtypes.lookup(p.type).kind in "fc")]
    lines = [f"{st.declared} {st.target} = {_emit(st.expr)};" for st in statements if st.declared is not None]
    types: dict[str, str] = {}  # every adjoint's and gradient's C type: each sum is cast to it (T * int is
    # ambiguous for __half, and a float adjoint added to a half gradient needs the conversion spelled out)
    for st in statements:  # every assigned name's adjoint; an output's starts as its incoming gradient
        start = seeds.get(st.target, f"grad_{st.target}") if st.target in outputs else "0"
        types[f"{_ADJ}{st.target}"] = _value_type(st, outputs)
        lines.append(f"{types[f'{_ADJ}{st.target}']} {_ADJ}{st.target} = {start};")
    for name in differentiable:
        types[f"{_GRAD}{name}"] = _c_type(inputs[name])
        lines.append(f"{types[f'{_GRAD}{name}']} {_GRAD}{name} = 0;")
    got: list[str] = []
    for st in reversed(statements):
        for name in _names(st.expr):
            target = f"{_ADJ}{name}" if name in assigned else f"{_GRAD}{name}" if name in differentiable else None
            partial = _d_statement(st, name) if target is not None else None
            if target is None or partial is None:
                continue
            adjoint = f"{_ADJ}{st.target}"
            lines.append(f"{target} += ({types[target]})({adjoint} * ({types[adjoint]})({partial}));")
            if name in differentiable and name not in got:
                got.append(name)
    names = tuple(n for n in differentiable if n in got)
    lines += [f"grad_{name} = {_GRAD}{name};" for name in names]
    return names, "\n".join(lines)


def _d_statement(st: Any, u: str) -> str | None:
    """d (the statement's value) / d u; a local holding a call of a :data:`_BY_VALUE` function gives its
    derivative through the local (recomputed in the backward)."""
    expr = st.expr
    if st.declared is not None and expr.kind == "call" and len(expr.args) == 1:
        name = expr.text[len(_UF):] if expr.text.startswith(_UF) else expr.text
        name = name[:-1] if name.endswith("f") and name[:-1] in _BY_VALUE else name
        rule = _BY_VALUE.get(name)
        if rule is not None:
            inner = _d(expr.args[0], u)
            return None if inner is None else _mul(rule(st.target), inner)
    return _d(expr, u)


def _value_type(st: object, outputs: dict[str, Param]) -> str:
    target, declared = st.target, st.declared  # type: ignore[attr-defined]
    if declared is not None:
        return " ".join(w for w in declared.split() if w != "const")
    return _c_type(outputs[target])


def _c_type(param: Param) -> str:
    return param.type if param.is_placeholder else dtypes.lookup(param.type).c_type


def _names(node: Node) -> list[str]:
    found: list[str] = []

    def walk(n: Node) -> None:
        if n.kind == "var" and n.text not in found:
            found.append(n.text)
        for a in n.args:
            walk(a)

    walk(node)
    return found


def _emit(node: Node) -> str:
    k, t, a = node.kind, node.text, node.args
    if k in ("num", "var"):
        return t
    if k == "unary":
        return f"({t}{_emit(a[0])})"
    if k == "bin":
        return f"({_emit(a[0])} {t} {_emit(a[1])})"
    if k == "cast":
        return f"(({t})({_emit(a[0])}))"
    if k == "cond":
        return f"({_emit(a[0])} ? {_emit(a[1])} : {_emit(a[2])})"
    return f"{t}({', '.join(_emit(x) for x in a)})"


def _mul(a: str | None, b: str | None) -> str | None:
    if a is None or b is None:
        return None
    return b if a == "1" else a if b == "1" else f"({a} * {b})"


def _add(a: str | None, b: str | None) -> str | None:
    return b if a is None else a if b is None else f"({a} + {b})"


def _neg(a: str | None) -> str | None:
    return None if a is None else f"(-{a})"


def _d(node: Node, u: str) -> str | None:
    """d node / d u as C text, None where it is zero."""
    k, t, a = node.kind, node.text, node.args
    if k == "num":
        return None
    if k == "var":
        return "1" if t == u else None
    if k == "unary":
        return _neg(_d(a[0], u)) if t == "-" else _d(a[0], u) if t == "+" else None
    if k == "cast":
        inner = _d(a[0], u)
        return None if inner is None else f"(({t})({inner}))"
    if k == "cond":
        yes, no = _d(a[1], u), _d(a[2], u)
        return None if yes is None and no is None else f"({_emit(a[0])} ? {yes or '0'} : {no or '0'})"
    if k == "bin":
        da, db = _d(a[0], u), _d(a[1], u)
        if t == "+":
            return _add(da, db)
        if t == "-":
            return _add(da, _neg(db))
        if t == "*":
            return _add(_mul(da, _emit(a[1])), _mul(_emit(a[0]), db))
        if t == "/":
            left = None if da is None else f"({da} / {_emit(a[1])})"
            right = None if db is None else f"({_emit(a[0])} * {db} / ({_emit(a[1])} * {_emit(a[1])}))"
            return _add(left, _neg(right))
        return None  # comparisons and logic: piecewise constant
    return _d_call(t, a, u)


def _d_call(name: str, args: tuple[Node, ...], u: str) -> str | None:
    unary, binary = _rules(name)
    texts = [_emit(x) for x in args]
    if unary is not None and len(args) == 1:
        return _mul(unary(texts[0]), _d(args[0], u)) if _d(args[0], u) is not None else None
    if binary is not None and len(args) == 2:
        pa, pb = binary(texts[0], texts[1])
        return _add(_mul(pa, _d(args[0], u)), _mul(pb, _d(args[1], u)))
    if name in ("fma", _UF + "fma") and len(args) == 3:  # a * b + c
        return _add(_add(_mul(texts[1], _d(args[0], u)), _mul(texts[0], _d(args[1], u))), _d(args[2], u))
    if all(_d(x, u) is None for x in args):
        return None  # a call that does not read u (e.g. of constants) contributes nothing
    raise CExprError(f"no derivative for the call {name}(...) (known: {', '.join(known_functions())})")
