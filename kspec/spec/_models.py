"""Kernel specs: elementwise, reduction and raw kernels as frozen, validated Pydantic models.

A spec built in Python (``ElementwiseSpec(name=..., ...)``) and one read from a spec file go through the
same validators; every failure is a :class:`kspec.SpecError` naming the kernel and the field.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from .. import dtypes
from .._errors import DuplicateNameError, InstantiationError, SpecError, SpecErrorGroup
from ._names import check_identifier
from ._params import Param, check_type_name, format_params, parse_params

Instantiation = dict[str, str]
_C_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_C_TYPE = re.compile(r"[A-Za-z_][A-Za-z0-9_:<>, *]*\Z")  # placeholder letter -> canonical dtype name


class _SpecModel(BaseModel):
    """Frozen, closed models whose construction errors come out as :class:`SpecError`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            name = data.get("name") if isinstance(data.get("name"), str) else None
            raise spec_error_from_validation(exc, kernel=name) from None


class LaunchDefaults(_SpecModel):
    """Launch configuration a raw kernel uses when the caller gives none."""

    block: int | tuple[int, ...] = 128
    shared_mem: int = 0

    @field_validator("block")
    @classmethod
    def _check_block(cls, v: int | tuple[int, ...]) -> int | tuple[int, ...]:
        dims = (v,) if isinstance(v, int) else tuple(v)
        if not 1 <= len(dims) <= 3 or any(d <= 0 for d in dims):
            raise SpecError(f"block must be a positive int or 1 to 3 positive ints, got {v!r}", field="launch.block")
        total = 1
        for d in dims:
            total *= d
        if total > 1024:
            raise SpecError(f"block {v!r} has {total} threads; CUDA allows at most 1024", field="launch.block")
        return v

    @field_validator("shared_mem")
    @classmethod
    def _check_shared(cls, v: int) -> int:
        if v < 0:
            raise SpecError(f"shared_mem must be >= 0 bytes, got {v}", field="launch.shared_mem")
        return v


class KernelAttributes(_SpecModel):
    """Function attributes a raw kernel sets before its first launch."""

    max_dynamic_shared_size_bytes: int | None = None
    preferred_shared_memory_carveout: int | None = None

    @model_validator(mode="after")
    def _check(self) -> "KernelAttributes":
        m = self.max_dynamic_shared_size_bytes
        if m is not None and m < 0:
            raise SpecError(f"must be >= 0 bytes, got {m}", field="attributes.max_dynamic_shared_size_bytes")
        c = self.preferred_shared_memory_carveout
        if c is not None and not -1 <= c <= 100:
            raise SpecError(
                f"must be a percentage 0..100 or -1 (no preference), got {c}",
                field="attributes.preferred_shared_memory_carveout",
            )
        return self


class _KernelSpec(_SpecModel):
    """Fields and checks shared by every kind."""

    KIND: ClassVar[str]

    name: str
    doc: str = ""
    options: tuple[str, ...] = ()

    # The spec file a kernel came from (None when built in Python); not part of the data.
    _origin: Path | None = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _normalise_newlines(cls, data: Any) -> Any:
        # TOML multi-line strings turn CRLF into LF on read; normalising up front keeps round trips exact.
        if isinstance(data, Mapping):
            return {k: v.replace("\r\n", "\n") if isinstance(v, str) else v for k, v in data.items()}
        return data

    @field_validator("name")
    @classmethod
    def _check_name(cls, v: str) -> str:
        return check_identifier(v, what="kernel name", field="name")

    @field_validator("options")
    @classmethod
    def _check_options(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for opt in v:
            if not opt.strip():
                raise SpecError("compiler options must be non-empty strings", field="options")
        return v

    def __eq__(self, other: object) -> bool:
        # Equal when the data is equal: where a spec was loaded from is not part of it.
        return type(self) is type(other) and self.__dict__ == other.__dict__  # type: ignore[union-attr]

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


class _TypedKernelSpec(_KernelSpec):
    """Elementwise and reduction kernels: typed parameters, placeholders, declared instantiations."""

    in_params: tuple[Param, ...] = ()
    out_params: tuple[Param, ...] = ()
    preamble: str = ""
    reduce_dims: bool = True
    instantiations: tuple[Instantiation, ...] = ()
    # Inputs that calls pass as numbers (by value), e.g. the scalars of a kspec.fuse kernel: `kspec build`
    # precompiles that specialization rather than guessing.
    scalars: tuple[str, ...] = ()

    @field_validator("in_params", "out_params", mode="before")
    @classmethod
    def _parse_params(cls, v: object, info: Any) -> tuple[Param, ...]:
        return parse_params(v, field=info.field_name)

    @field_validator("instantiations", mode="before")
    @classmethod
    def _expand_instantiations(cls, v: object) -> tuple[Instantiation, ...]:
        return _expand(v)

    @property
    def params(self) -> tuple[Param, ...]:
        return self.in_params + self.out_params

    @property
    def placeholders(self) -> tuple[str, ...]:
        """Placeholder letters in order of first use (inputs, outputs, then reduce_type)."""
        seen: dict[str, None] = {}
        for p in self.params:
            if p.is_placeholder:
                seen.setdefault(p.type)
        for extra in self._extra_placeholders():
            seen.setdefault(extra)
        return tuple(seen)

    @property
    def output_only_placeholders(self) -> tuple[str, ...]:
        """Placeholders no input binds: such a kernel must be called with its outputs given."""
        bound_by_inputs = {p.type for p in self.in_params if p.is_placeholder}
        return tuple(t for t in self.placeholders if t not in bound_by_inputs)

    @property
    def requires_explicit_outputs(self) -> bool:
        return bool(self.output_only_placeholders)

    def declared_instantiations(self) -> tuple[Instantiation, ...]:
        """What ``kspec build`` precompiles: the declared ones, or the single one of a kernel with no placeholders."""
        if self.instantiations:
            return self.instantiations
        return ({},) if not self.placeholders else ()

    def _extra_placeholders(self) -> tuple[str, ...]:
        return ()

    @model_validator(mode="after")
    def _check_params(self) -> "_TypedKernelSpec":
        seen: dict[str, str] = {}
        for field_name in ("in_params", "out_params"):
            for p in getattr(self, field_name):
                if p.name in seen:
                    raise DuplicateNameError(
                        f"parameter {p.name!r} appears twice (in {seen[p.name]} and {field_name})", field=field_name
                    )
                seen[p.name] = field_name
        placeholders = set(self.placeholders)
        for p in self.params:
            if p.name in placeholders:
                raise DuplicateNameError(
                    f"parameter {p.name!r} has the name of a type placeholder; rename one of them", field="in_params"
                )
        for k, inst in enumerate(self.instantiations):
            field = f"instantiations[{k}]"
            unknown = sorted(set(inst) - placeholders)
            if unknown:
                known = ", ".join(self.placeholders) or "none"
                raise InstantiationError(
                    f"names unknown placeholder {unknown[0]!r} (the kernel's placeholders: {known})", field=field
                )
            missing = [t for t in self.placeholders if t not in inst]
            if missing:
                raise InstantiationError(f"leaves placeholder {missing[0]!r} unbound; give it a dtype", field=field)
        scalar_inputs = {p.name for p in self.in_params if not p.raw}
        for k, name in enumerate(self.scalars):
            if name not in scalar_inputs:
                raise SpecError(
                    f"{name!r} is not a non-raw input parameter (scalars name inputs that calls pass as numbers)",
                    field=f"scalars[{k}]",
                )
        if len(set(self.scalars)) != len(self.scalars):
            raise DuplicateNameError("an input is listed twice", field="scalars")
        keys = [tuple(sorted(inst.items())) for inst in self.instantiations]
        if len(set(keys)) != len(keys):
            raise InstantiationError("the same instantiation is declared twice", field="instantiations")
        return self

    def to_data(self) -> dict[str, Any]:
        data = super().to_data()
        if "instantiations" in data:
            data["instantiations"] = [dict(inst) for inst in self.instantiations]
        if "scalars" in data:
            data["scalars"] = list(data["scalars"])
        return data


class ElementwiseSpec(_TypedKernelSpec):
    """CuPy's ElementwiseKernel as data."""

    KIND: ClassVar[str] = "elementwise"
    kind: Literal["elementwise"] = "elementwise"
    operation: str
    loop_prep: str = ""
    after_loop: str = ""
    no_return: bool = False
    return_tuple: bool = False

    @field_validator("operation")
    @classmethod
    def _check_operation(cls, v: str) -> str:
        if not v.strip():
            raise SpecError("operation is empty; write the loop body, e.g. 'z = x + y'", field="operation")
        return v


class ReductionSpec(_TypedKernelSpec):
    """CuPy's ReductionKernel as data. ``identity=None`` is legal: a zero-size call then fails."""

    KIND: ClassVar[str] = "reduction"
    kind: Literal["reduction"] = "reduction"
    map_expr: str
    reduce_expr: str
    post_map_expr: str
    identity: str | None = None
    reduce_type: str | None = None

    @field_validator("map_expr", "reduce_expr", "post_map_expr")
    @classmethod
    def _check_expr(cls, v: str, info: Any) -> str:
        if not v.strip():
            raise SpecError(f"{info.field_name} is empty", field=info.field_name)
        return v

    @field_validator("identity", mode="before")
    @classmethod
    def _check_identity(cls, v: object) -> object:
        # CuPy takes identity as C text; accept numbers from a spec file and keep their text.
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        return v

    @field_validator("reduce_type")
    @classmethod
    def _check_reduce_type(cls, v: str | None) -> str | None:
        if v is None or v in dtypes.BY_C_TYPE:
            return v
        if dtypes.is_placeholder(v) or dtypes.canonical_name(v) is not None:
            return check_type_name(v, field="reduce_type")
        # Any other C type spelling (a struct from the preamble, ``thrust::pair<...>``) is passed through.
        if not _C_TYPE.match(v):
            raise SpecError(
                f"reduce_type {v!r} is neither a dtype, a placeholder nor a C type name", field="reduce_type"
            )
        return v

    def _extra_placeholders(self) -> tuple[str, ...]:
        rt = self.reduce_type
        return (rt,) if rt is not None and dtypes.is_placeholder(rt) else ()

    @model_validator(mode="after")
    def _check_shape(self) -> "ReductionSpec":
        if not self.in_params:
            raise SpecError("a reduction needs at least one input parameter", field="in_params")
        if not self.out_params:
            raise SpecError("a reduction needs at least one output parameter", field="out_params")
        if all(p.raw for p in self.in_params):
            raise SpecError("a reduction needs at least one non-raw input to reduce over", field="in_params")
        rt = self.reduce_type
        if rt is not None and dtypes.is_placeholder(rt) and rt not in {p.type for p in self.params}:
            raise SpecError(f"reduce_type {rt!r} is a placeholder no parameter uses", field="reduce_type")
        if rt is not None and _is_user_type(rt) and not re.search(rf"\b{re.escape(rt)}\b", self.preamble):
            close = dtypes.suggest(rt)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise SpecError(
                f"reduce_type {rt!r} is not a dtype{hint}, and the preamble does not define a type of that name",
                field="reduce_type",
            )
        return self


def _is_user_type(type_name: str) -> bool:
    """A plain name that is no dtype, C type of the table or placeholder: the preamble must define it."""
    known = type_name in dtypes.BY_C_TYPE or dtypes.is_placeholder(type_name) or dtypes.canonical_name(type_name)
    return not known and _C_IDENT.match(type_name) is not None


_BINARY_SUFFIXES = (".cubin", ".ptx", ".fatbin")
_SOURCE_SUFFIXES = (".cu", ".cuh")


class RawSpec(_KernelSpec):
    """A raw CUDA module (CuPy's RawModule / RawKernel): source text or a path to .cu/.cubin/.ptx/.fatbin."""

    KIND: ClassVar[str] = "raw"
    kind: Literal["raw"] = "raw"
    source: str | None = None
    path: str | None = None
    kernels: tuple[str, ...] = ()
    name_expressions: tuple[str, ...] = ()
    cooperative: bool = False
    translate_cucomplex: bool = False
    launch: LaunchDefaults = LaunchDefaults()
    attributes: KernelAttributes = KernelAttributes()

    @field_validator("kernels")
    @classmethod
    def _check_kernels(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for k, name in enumerate(v):
            check_identifier(name, what="kernel function name", field=f"kernels[{k}]")
        if len(set(v)) != len(v):
            raise DuplicateNameError("a kernel function is listed twice", field="kernels")
        return v

    @field_validator("name_expressions")
    @classmethod
    def _check_name_expressions(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for expr in v:
            if not expr.strip():
                raise SpecError("name expressions must be non-empty, like 'fx3<float>'", field="name_expressions")
        if len(set(v)) != len(v):
            raise DuplicateNameError("a name expression is listed twice", field="name_expressions")
        return v

    @model_validator(mode="after")
    def _check_source(self) -> "RawSpec":
        if (self.source is None) == (self.path is None):
            which = "both" if self.source is not None else "neither"
            raise SpecError(f"give exactly one of 'source' and 'path' ({which} given)", field="source")
        if self.source is not None and not self.source.strip():
            raise SpecError("source is empty", field="source")
        if self.path is not None:
            suffix = Path(self.path).suffix
            if suffix not in _BINARY_SUFFIXES + _SOURCE_SUFFIXES:
                allowed = ", ".join(_SOURCE_SUFFIXES + _BINARY_SUFFIXES)
                raise SpecError(f"path {self.path!r} must end in one of {allowed}", field="path")
            if self.is_binary and self.name_expressions:
                raise SpecError(
                    "name_expressions need a source to compile; a precompiled binary has fixed names", field="name_expressions"
                )
        if not self.kernels and not self.name_expressions:
            raise SpecError("list the kernel functions to expose in 'kernels' or 'name_expressions'", field="kernels")
        return self

    @property
    def is_binary(self) -> bool:
        return self.path is not None and Path(self.path).suffix in _BINARY_SUFFIXES

    def resolved_path(self) -> Path | None:
        """``path`` relative to the spec file it came from (or the working directory)."""
        if self.path is None:
            return None
        p = Path(self.path)
        if not p.is_absolute() and self._origin is not None:
            p = self._origin.parent / p
        return p

    def read_source(self) -> str:
        """The CUDA source: inline, or read from a .cu path."""
        if self.source is not None:
            return self.source
        path = self.resolved_path()
        assert path is not None
        if self.is_binary:
            raise SpecError(f"{self.path!r} is a binary, it has no source", field="path", kernel=self.name)
        try:
            return path.read_text()
        except OSError as exc:
            raise SpecError(f"cannot read {str(path)!r}: {exc.strerror}", field="path", kernel=self.name) from None

    def to_data(self) -> dict[str, Any]:
        data = super().to_data()
        for key in ("kernels", "name_expressions"):
            if key in data:
                data[key] = list(data[key])
        launch = data.get("launch")
        if isinstance(launch, dict) and isinstance(launch.get("block"), tuple):
            launch["block"] = list(launch["block"])
        return data


KernelSpec = Annotated[Union[ElementwiseSpec, ReductionSpec, RawSpec], Field(discriminator="kind")]
SPEC_CLASSES: dict[str, type[_KernelSpec]] = {c.KIND: c for c in (ElementwiseSpec, ReductionSpec, RawSpec)}
AnySpec = Union[ElementwiseSpec, ReductionSpec, RawSpec]


def parse_spec(data: Mapping[str, Any], *, file: str | Path | None = None) -> AnySpec:
    """One kernel spec from plain data (a spec file's table, or keyword arguments)."""
    name = data.get("name") if isinstance(data.get("name"), str) else None
    kind = data.get("kind")
    cls = SPEC_CLASSES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise SpecError(
            f"kind must be one of {', '.join(repr(k) for k in SPEC_CLASSES)}, got {kind!r}",
            file=file,
            kernel=name,
            field="kind",
        )
    try:
        spec = cls(**data)
    except SpecError as exc:
        raise _locate(exc, file=file, kernel=name) from None
    spec.with_origin(Path(file) if file is not None else None)
    return spec  # type: ignore[return-value]


def _locate(exc: SpecError, *, file: str | Path | None, kernel: str | None) -> SpecError:
    if isinstance(exc, SpecErrorGroup):
        located = [e.located(file=file, kernel=kernel) for e in exc.errors]
        return located[0] if len(located) == 1 else SpecErrorGroup(located)
    return exc.located(file=file, kernel=kernel)


def spec_error_from_validation(exc: ValidationError, *, kernel: str | None = None) -> SpecError:
    """Turn Pydantic's errors into SpecErrors that keep kspec's classes and name the field."""
    errors: list[SpecError] = []
    for err in exc.errors():
        loc = ".".join(str(part) for part in err["loc"])
        original = (err.get("ctx") or {}).get("error")
        if isinstance(original, SpecError):
            field = original.field
            # a nested model's validator names its own field; prefix the outer one ("launch.block")
            if loc and field and not field.startswith(loc.split(".")[0]):
                field = f"{loc}.{field}" if "." not in field else field
            errors.append(original.located(kernel=kernel, field=field or loc or None))
        elif err["type"] == "extra_forbidden":
            errors.append(SpecError(f"unknown key {loc!r}", kernel=kernel, field=loc))
        elif err["type"] == "missing":
            errors.append(SpecError("required field is missing", kernel=kernel, field=loc))
        else:
            errors.append(SpecError(err["msg"], kernel=kernel, field=loc or None))
    return errors[0] if len(errors) == 1 else SpecErrorGroup(errors)


def _expand(value: object) -> tuple[Instantiation, ...]:
    """Instantiations: a list of tables; a list value in a table means every choice (a product)."""
    if value is None:
        return ()
    if isinstance(value, Mapping):
        value = [value]
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise InstantiationError(
            "instantiations must be a list of tables like [{T = 'float32'}, {T = 'float64'}]", field="instantiations"
        )
    out: list[Instantiation] = []
    for k, table in enumerate(value):  # type: ignore[union-attr]
        field = f"instantiations[{k}]"
        if not isinstance(table, Mapping):
            raise InstantiationError(f"expected a table like {{T = 'float32'}}, got {table!r}", field=field)
        letters = list(table)
        choices: list[list[str]] = []
        for letter in letters:
            if not isinstance(letter, str) or not dtypes.is_placeholder(letter):
                raise InstantiationError(f"{letter!r} is not a placeholder letter", field=field)
            v = table[letter]
            options = [v] if isinstance(v, str) else list(v) if isinstance(v, (list, tuple)) else None
            if not options:
                raise InstantiationError(
                    f"placeholder {letter!r} needs a dtype name or a list of them, got {v!r}", field=field
                )
            resolved = []
            for opt in options:
                name = check_type_name(opt, field=field) if isinstance(opt, str) else None
                if name is None or dtypes.is_placeholder(name):
                    raise InstantiationError(f"placeholder {letter!r} must be bound to a dtype, got {opt!r}", field=field)
                resolved.append(name)
            choices.append(resolved)
        for combo in itertools.product(*choices):
            out.append(dict(zip(letters, combo)))
    return tuple(out)
