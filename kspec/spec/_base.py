"""The base of every spec model: frozen, closed, with errors that come out as :class:`SpecError`.

Spec values are never converted (strict types: ``reduce_dims = "yes"`` is an error naming the field, not
True), and spec text is checked to be encodable Unicode without NUL.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, PrivateAttr, StrictStr, ValidationError, field_validator, model_validator

from .._errors import SpecError, SpecErrorGroup
from ._params import format_params
from ._rules import check_kernel_name, check_options, normalise_texts


class _SpecModel(BaseModel):
    """Frozen, closed models whose construction errors come out as :class:`SpecError`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            name = data.get("name") if isinstance(data.get("name"), str) else None
            raise spec_error_from_validation(exc, kernel=name) from None


class _KernelSpec(_SpecModel):
    """Fields and checks shared by every kind."""

    KIND: ClassVar[str]

    name: StrictStr
    doc: StrictStr = ""
    options: tuple[StrictStr, ...] = ()

    # The spec file a kernel came from (None when built in Python); not part of the data.
    _origin: Path | None = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _normalise_newlines(cls, data: Any) -> Any:
        # TOML multi-line strings turn CRLF into LF on read; normalising up front keeps round trips exact.
        return normalise_texts(data) if isinstance(data, Mapping) else data

    @field_validator("name")
    @classmethod
    def _check_name(cls, v: str) -> str:
        return check_kernel_name(v)

    @field_validator("options")
    @classmethod
    def _check_options(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return check_options(v)

    def __eq__(self, other: object) -> bool:
        # Equal when the data is equal: where a spec was loaded from is not part of it.
        return type(self) is type(other) and self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # instantiations hold dicts

    @property
    def origin(self) -> Path | None:
        """The spec file this kernel was loaded from, if any."""
        return self._origin

    def with_origin(self, origin: Path | None) -> "_KernelSpec":
        self._origin = origin
        return self

    def to_data(self) -> dict[str, Any]:
        """Plain data for a spec file: params in CuPy's string form, defaults left out."""
        data: dict[str, Any] = {"kind": self.KIND}
        for key, value in self.model_dump(exclude_defaults=True, exclude={"kind"}).items():
            data[key] = value
        for key in ("in_params", "out_params"):
            if key in data:
                data[key] = format_params(getattr(self, key))
        if "options" in data:
            data["options"] = list(data["options"])
        return data


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _shown(v: object) -> str:
    return f"{type(v).__name__} {v!r}"


def spec_error_from_validation(exc: ValidationError, *, kernel: str | None = None) -> SpecError:
    """Turn Pydantic's errors into SpecErrors that keep kspec's classes and name the field."""
    errors: list[SpecError] = []
    for err in exc.errors():
        loc = ".".join(str(part) for part in err["loc"])
        original = (err.get("ctx") or {}).get("error")
        if isinstance(original, SpecError):
            members = original.errors if isinstance(original, SpecErrorGroup) else [original]
            errors.extend(_nested(e, loc, kernel) for e in members)
        elif err["type"] == "extra_forbidden":
            errors.append(SpecError(f"unknown key {loc!r}", kernel=kernel, field=loc))
        elif err["type"] == "missing":
            errors.append(SpecError("required field is missing", kernel=kernel, field=loc))
        else:
            # strict types: say what was given, so `reduce_dims = "yes"` reads as a type error of that field
            got = f", got {_shown(err['input'])}" if err["type"].endswith(("_type", "_parsing", "_from_float")) else ""
            errors.append(SpecError(err["msg"] + got, kernel=kernel, field=loc or None))
    return errors[0] if len(errors) == 1 else SpecErrorGroup(errors)


def _nested(err: SpecError, loc: str, kernel: str | None) -> SpecError:
    """A nested model's error names its own field ("shared_mem"); prefix the outer one ("launch.shared_mem")."""
    field = err.field
    if loc and field and "." not in field and not field.startswith(loc.split(".")[0]):
        field = f"{loc}.{field}"  # a dotted field ("launch.block") is already a full path
    return type(err)(err.message, file=err.file, kernel=err.kernel or kernel, field=field or loc or None)
