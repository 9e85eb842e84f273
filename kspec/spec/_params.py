"""Kernel parameters: the ``Param`` model and CuPy's string form ``"T x, raw T y, _non_const float32 z"``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr, field_validator

from .. import dtypes
from .._errors import SpecError
from ._names import check_param_name
from ._rules import check_param, check_type_name, param_text, param_words, split_params


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
        return param_text(self.name, self.type, self.raw, self.non_const)


def parse_params(value: object, *, field: str) -> tuple[Param, ...]:
    """Parameters from CuPy's string form, or from a list of tables / Param objects."""
    if isinstance(value, str):
        return tuple(_make(param_words(item, field=field), field=field) for item in split_params(value))
    if isinstance(value, Iterable) and not isinstance(value, (bytes, Mapping)):
        out = []
        for k, item in enumerate(value):
            if isinstance(item, Param):
                out.append(item)
            elif isinstance(item, str):
                out.append(_make(param_words(item, field=f"{field}[{k}]"), field=f"{field}[{k}]"))
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
    return Param(**check_param(data, field=field))
