"""The plain path of a CuPy-style constructor: its arguments checked without Pydantic.

``kspec.ElementwiseKernel(...)`` and ``kspec.ReductionKernel(...)`` pass their arguments as a table to
:func:`plain_from_fields` first. It runs the models' own checks (:mod:`._rules`, the same functions their
validators call) and, when every check passes, returns the plain spec whose ``to_data()`` is exactly the
model's. On any doubt it returns None and the caller builds the model, which raises the proper SpecError:
what this path accepts is a strict subset of what the models accept, and it never raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._errors import SpecError
from ._plain import FIELD_DEFAULTS, REQUIRED, PlainElementwiseSpec, PlainParam, PlainReductionSpec, PlainSpec
from ._rules import (
    check_expr,
    check_kernel_name,
    check_options,
    check_param,
    check_params,
    check_reduce_type,
    check_reduction_shape,
    identity_text,
    normalise_texts,
    param_text,
    param_words,
    split_params,
)

_FLAGS = frozenset({"reduce_dims", "no_return", "return_tuple", "cupy_headers"})
_NUMBER_TYPES = (str, bool, int, float, type(None))  # what identity_text takes exactly (no subclasses)


def plain_from_fields(kind: str, fields: Mapping[str, Any]) -> PlainSpec | None:
    """The plain spec of an elementwise or reduction kernel's fields (keyword arguments of its model), when
    they are provably valid; None otherwise (build the model then: it raises the error).

    Declined, although the model may accept them (rare in constructor calls): ``kind``, ``instantiations``
    or ``scalars`` given, any value of a subclass (a str subclass, a NumPy bool or float), parameters given
    as a list rather than CuPy's string, and options not a tuple or list of str.
    """
    defaults = FIELD_DEFAULTS.get(kind) if isinstance(kind, str) else None
    if defaults is None or not set(fields) <= set(defaults) or not all(f in fields for f in REQUIRED & set(defaults)):
        return None
    if not all(_plain_type(key, value) for key, value in fields.items()):
        return None
    try:
        return _checked(kind, defaults, normalise_texts(fields))
    except SpecError:
        return None


def _plain_type(key: str, value: object) -> bool:
    if key == "grad":
        return False  # a gradient is checked (and derived) by the model
    if key == "options":
        return isinstance(value, (tuple, list)) and type(value) in (tuple, list) and all(type(o) is str for o in value)
    if key in _FLAGS:
        return type(value) is bool
    if key == "identity":
        return type(value) in _NUMBER_TYPES
    if key == "reduce_type":
        return value is None or type(value) is str
    return type(value) is str


def _checked(kind: str, defaults: dict[str, Any], fields: dict[str, Any]) -> PlainSpec:
    """The plain spec, raising SpecError where a model validator would (in no particular order)."""
    check_kernel_name(fields["name"])
    check_options(tuple(fields.get("options", ())))
    in_params = _params(fields.get("in_params", ""), "in_params")
    out_params = _params(fields.get("out_params", ""), "out_params")
    values = dict(fields)
    if kind == "reduction":
        for key in ("map_expr", "reduce_expr", "post_map_expr"):
            check_expr(values[key], field=key)
        identity = identity_text(values.get("identity"))
        if not (identity is None or type(identity) is str):
            raise SpecError("identity: not a str")  # the model's StrictStr refuses it (this message is never seen)
        values["identity"] = identity
        values["reduce_type"] = check_reduce_type(values.get("reduce_type"))
    values["in_params"], values["out_params"] = in_params, out_params
    values["options"] = tuple(values.get("options", ()))
    table: dict[str, Any] = {"kind": kind}
    for key, default in defaults.items():
        value = values.get(key, default)
        if key in REQUIRED or value != default:
            table[key] = _data(key, value)
    cls = PlainElementwiseSpec if kind == "elementwise" else PlainReductionSpec
    spec = cls(table, in_params, out_params)
    check_params(spec.in_params, spec.out_params, spec.placeholders)
    if kind == "reduction":
        check_reduction_shape(spec.in_params, spec.out_params, values["reduce_type"], spec.preamble)
    return spec


def _params(text: str, field: str) -> tuple[PlainParam, ...]:
    """Parameters from CuPy's string form, by the checks ``kspec.spec.parse_params`` makes."""
    out = []
    for item in split_params(text):
        data = check_param(param_words(item, field=field), field=field)
        out.append(PlainParam(data["name"], data["type"], data["raw"], data["non_const"]))
    return tuple(out)


def _data(key: str, value: Any) -> Any:
    """A field's value as ``to_data()`` writes it."""
    if key in ("in_params", "out_params"):
        return ", ".join(param_text(p.name, p.type, p.raw, p.non_const) for p in value)
    if key == "options":
        return list(value)
    return value
