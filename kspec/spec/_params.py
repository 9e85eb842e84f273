"""Kernel parameters: the ``Param`` model and CuPy's string form ``"T x, raw T y, _non_const float32 z"``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr, field_validator

from .. import dtypes
from .._errors import SpecError, UnknownDtypeError
from ._names import check_param_name

_MODIFIERS = ("raw", "_non_const")


class Param(BaseModel):
    """One kernel parameter.

    ``type`` is a canonical dtype name of :mod:`kspec.dtypes` or a one-letter placeholder (``T``).
    ``raw`` parameters are array views indexed by hand and not broadcast. Inputs are const inside the
    body unless ``non_const`` (CuPy's ``_non_const``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: StrictStr
    type: StrictStr
    raw: StrictBool = False
    non_const: StrictBool = False

    @field_validator("name")
    @classmethod
    def _check_name(cls, v: str) -> str:
        return check_param_name(v, field="name")

    @field_validator("type")
    @classmethod
    def _check_type(cls, v: str) -> str:
        return check_type_name(v, field="type")

    @property
    def is_placeholder(self) -> bool:
        return dtypes.is_placeholder(self.type)

    def to_str(self) -> str:
        """CuPy's string form of this parameter."""
        words = [*(["raw"] if self.raw else []), *(["_non_const"] if self.non_const else []), self.type, self.name]
        return " ".join(words)


def check_type_name(type_name: object, *, field: str) -> str:
    """Canonical dtype name, or the placeholder letter itself; ``UnknownDtypeError`` otherwise."""
    if not isinstance(type_name, str) or not type_name:
        raise UnknownDtypeError(f"type must be a dtype name or a one-letter placeholder, got {type_name!r}", field=field)
    if dtypes.is_placeholder(type_name):
        if not (type_name.isascii() and type_name.isalpha()) or type_name == "i":  # "é" is no C type name
            raise UnknownDtypeError(
                f"placeholder {type_name!r} must be an ASCII letter other than 'i' (it becomes a C type name)", field=field
            )
        return type_name
    name = dtypes.canonical_name(type_name)
    if name is None:
        close = dtypes.suggest(type_name)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise UnknownDtypeError(
            f"unknown dtype {type_name!r}{hint} (known: {', '.join(dtypes.NAMES)}, or a one-letter placeholder)",
            field=field,
        )
    return name


def parse_params(value: object, *, field: str) -> tuple[Param, ...]:
    """Parameters from CuPy's string form, or from a list of tables / Param objects."""
    if isinstance(value, str):
        return tuple(_parse_one(item, field=field) for item in _split(value))
    if isinstance(value, Iterable) and not isinstance(value, (bytes, Mapping)):
        out = []
        for k, item in enumerate(value):
            if isinstance(item, Param):
                out.append(item)
            elif isinstance(item, str):
                out.append(_parse_one(item, field=f"{field}[{k}]"))
            elif isinstance(item, Mapping):
                out.append(_param_from_table(item, field=f"{field}[{k}]"))
            else:
                raise SpecError(f"each parameter must be a string or a table, got {type(item).__name__}", field=field)
        return tuple(out)
    raise SpecError(
        f"expected a parameter string like 'T x, raw T y' or a list of tables, got {type(value).__name__}",
        field=field,
    )


def format_params(params: Iterable[Param]) -> str:
    """CuPy's string form of a parameter list (inverse of :func:`parse_params`)."""
    return ", ".join(p.to_str() for p in params)


def _split(text: str) -> list[str]:
    text = text.strip()
    return [] if not text else [s.strip() for s in text.split(",")]


def _parse_one(item: str, *, field: str) -> Param:
    words = item.split()
    if not words:
        raise SpecError("empty parameter (two commas in a row, or a trailing comma?)", field=field)
    if len(words) < 2:
        raise SpecError(f"parameter {item!r} needs a type and a name, like 'float32 x'", field=field)
    *modifiers, type_name, name = words
    for m in modifiers:
        if m not in _MODIFIERS:
            raise SpecError(
                f"unknown modifier {m!r} in parameter {item!r} (allowed: {', '.join(_MODIFIERS)})", field=field
            )
    if len(set(modifiers)) != len(modifiers):
        raise SpecError(f"repeated modifier in parameter {item!r}", field=field)
    return _make(
        {"name": name, "type": type_name, "raw": "raw" in modifiers, "non_const": "_non_const" in modifiers},
        field=field,
    )


def _param_from_table(table: Mapping[str, Any], *, field: str) -> Param:
    unknown = set(table) - set(Param.model_fields)
    if unknown:
        raise SpecError(
            f"unknown key {sorted(unknown)[0]!r} in parameter table (allowed: {', '.join(Param.model_fields)})",
            field=field,
        )
    for key in ("name", "type"):
        if key not in table:
            raise SpecError(f"parameter table is missing {key!r}", field=field)
    return _make(dict(table), field=field)


def _make(data: dict[str, Any], *, field: str) -> Param:
    # Check name and type here (not only in the validators) so the error keeps its class and says which
    # list it came from.
    check_param_name(data["name"], field=field)
    data["type"] = check_type_name(data["type"], field=field)
    for flag in ("raw", "non_const"):
        if not isinstance(data.get(flag, False), bool):
            raise SpecError(f"parameter {flag!r} must be true or false", field=field)
    return Param(**data)
