"""Kernel specs: elementwise, reduction and raw kernels as frozen, validated Pydantic models.

A spec built in Python (``ElementwiseSpec(name=..., ...)``) and one read from a spec file go through the
same validators; every failure is a :class:`kspec.SpecError` naming the kernel and the field. The base
model is in :mod:`._base`, raw specs in :mod:`._raw`.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import Field, StrictBool, StrictStr, field_validator, model_validator

from .. import dtypes
from .._errors import DuplicateNameError, InstantiationError, ReservedNameError, SpecError, SpecErrorGroup
from ._base import _KernelSpec
from ._placeholders import PlaceholderRules
from ._params import Param, check_type_name, parse_params
from ._raw import RawSpec

Instantiation = dict[str, str]
_C_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_C_TYPE = re.compile(r"[A-Za-z_][A-Za-z0-9_:<>, *]*\Z")  # placeholder letter -> canonical dtype name


class _TypedKernelSpec(_KernelSpec, PlaceholderRules):
    """Elementwise and reduction kernels: typed parameters, placeholders, declared instantiations."""

    in_params: tuple[Param, ...] = ()
    out_params: tuple[Param, ...] = ()
    preamble: StrictStr = ""
    reduce_dims: StrictBool = True
    instantiations: tuple[Instantiation, ...] = ()
    # Inputs that calls pass as numbers (by value), e.g. the scalars of a kspec.fuse kernel: `kspec build`
    # precompiles that specialization rather than guessing.
    scalars: tuple[StrictStr, ...] = ()

    @field_validator("in_params", "out_params", mode="before")
    @classmethod
    def _parse_params(cls, v: object, info: Any) -> tuple[Param, ...]:
        return parse_params(v, field=info.field_name)

    @field_validator("instantiations", mode="before")
    @classmethod
    def _expand_instantiations(cls, v: object) -> tuple[Instantiation, ...]:
        return _expand(v)

    def declared_instantiations(self) -> tuple[Instantiation, ...]:
        """What ``kspec build`` precompiles: the declared ones, or the single one of a kernel with no placeholders."""
        if self.instantiations:
            return self.instantiations
        return ({},) if not self.placeholders else ()

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
    operation: StrictStr
    loop_prep: StrictStr = ""
    after_loop: StrictStr = ""
    no_return: StrictBool = False
    return_tuple: StrictBool = False

    @field_validator("operation")
    @classmethod
    def _check_operation(cls, v: str) -> str:
        # An empty body is legal, as in CuPy: the work may sit in loop_prep/after_loop, or the loop may only
        # exist to run `size=` threads of an all-raw call.
        return v


class ReductionSpec(_TypedKernelSpec):
    """CuPy's ReductionKernel as data. ``identity=None`` is legal: a zero-size call then fails."""

    KIND: ClassVar[str] = "reduction"
    kind: Literal["reduction"] = "reduction"
    map_expr: StrictStr
    reduce_expr: StrictStr
    post_map_expr: StrictStr
    identity: StrictStr | None = None
    reduce_type: StrictStr | None = None

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
        if isinstance(v, float) and not math.isfinite(v):
            raise SpecError(
                f"identity {v!r} is not a finite number and has no C spelling; write it as C text "
                "(e.g. '-CUDART_INF_F' with '#include <math_constants.h>' in the preamble)",
                field="identity",
            )
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, str) and not v.strip():
            # CuPy would emit `T(...)()`, a silent zero; say so instead
            raise SpecError("identity is empty; give C text such as '0', or leave it out (no identity)", field="identity")
        return v

    @field_validator("reduce_type")
    @classmethod
    def _check_reduce_type(cls, v: str | None) -> str | None:
        if v is None or v in dtypes.BY_C_TYPE:
            return v
        if dtypes.is_placeholder(v) or dtypes.canonical_name(v) is not None:
            return check_type_name(v, field="reduce_type")
        # Any other C type spelling (a struct from the preamble, ``thrust::pair<...>``) is passed through.
        if not _C_TYPE.match(v) or not _one_type(v):
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
        for field_name in ("in_params", "out_params"):
            for p in getattr(self, field_name):
                if p.name in _REDUCE_OPERANDS:  # (kspec.fuse renames its parameters away from these)
                    raise ReservedNameError(
                        f"parameter name {p.name!r} is reserved in a reduction: 'a' and 'b' are reduce_expr's "
                        "operands (and post_map_expr's 'a' the reduced value); rename the parameter",
                        field=field_name,
                    )
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


_REDUCE_OPERANDS = frozenset({"a", "b"})
# Words that may come together in one C type spelling ("unsigned long long", "const float *").
_TYPE_WORDS = frozenset("unsigned signed short long int char float double bool void const volatile".split())


def _one_type(text: str) -> bool:
    """Whether ``text`` spells one type, not a declaration: ``int x`` is a type and a name."""
    outer = re.sub(r"<.*>", "<>", text)  # template arguments may hold anything with commas and spaces
    if "," in outer:
        return False
    words = outer.replace("*", " ").split()
    return len(words) <= 1 or all(w in _TYPE_WORDS for w in words)


def _is_user_type(type_name: str) -> bool:
    """A plain name that is no dtype, C type of the table or placeholder: the preamble must define it."""
    known = type_name in dtypes.BY_C_TYPE or dtypes.is_placeholder(type_name) or dtypes.canonical_name(type_name)
    return not known and _C_IDENT.match(type_name) is not None


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
    if isinstance(spec, RawSpec):
        try:
            spec.check_path()
        except SpecError as exc:
            raise exc.located(file=file, kernel=name) from None
    return spec  # type: ignore[return-value]


def _locate(exc: SpecError, *, file: str | Path | None, kernel: str | None) -> SpecError:
    if isinstance(exc, SpecErrorGroup):
        located = [e.located(file=file, kernel=kernel) for e in exc.errors]
        return located[0] if len(located) == 1 else SpecErrorGroup(located)
    return exc.located(file=file, kernel=kernel)


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
