"""The checks a kernel spec must pass, as plain functions without Pydantic.

The model validators (:mod:`._base`, :mod:`._models`, :mod:`._params`) call them, and so does the
constructor's plain path (:mod:`._ctor`), which serves a CuPy-style constructor call without importing
Pydantic: one source for each rule and each message, so the two paths can never disagree.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .. import dtypes
from .._errors import DuplicateNameError, InstantiationError, ReservedNameError, SpecError, UnknownDtypeError
from ._names import check_identifier, check_param_name

_SURROGATE = re.compile("[\ud800-\udfff]")
_MODIFIERS = ("raw", "_non_const")
_C_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_C_TYPE = re.compile(r"[A-Za-z_][A-Za-z0-9_:<>, *]*\Z")  # placeholder letter -> canonical dtype name
_REDUCE_OPERANDS = frozenset({"a", "b"})
# Words that may come together in one C type spelling ("unsigned long long", "const float *").
_TYPE_WORDS = frozenset("unsigned signed short long int char float double bool void const volatile".split())


# -- every kind -------------------------------------------------------------------------------------------


def check_text(text: str, *, field: str) -> str:
    """Spec text must be encodable Unicode without NUL: NVRTC reads C strings (a NUL ends the source
    early) and every file kspec writes is UTF-8 (a lone surrogate, possible in JSON, cannot be written)."""
    if "\0" in text:
        raise SpecError("contains a NUL character (\\0); spec text cannot hold one", field=field)
    bad = _SURROGATE.search(text)
    if bad:
        raise SpecError(
            f"contains a lone surrogate (U+{ord(bad.group()):04X}), which is not valid Unicode text", field=field
        )
    return text


def normalise_texts(data: Mapping[str, Any]) -> dict[str, Any]:
    """A spec table with every text checked (:func:`check_text`, str values and str items of lists) and CRLF
    turned into LF in str values: TOML multi-line strings do that on read, so round trips stay exact."""
    for key, value in data.items():
        for text in [value] if isinstance(value, str) else value if isinstance(value, (list, tuple)) else ():
            if isinstance(text, str):
                check_text(text, field=str(key))
    return {k: v.replace("\r\n", "\n") if isinstance(v, str) else v for k, v in data.items()}


def check_kernel_name(v: str) -> str:
    return check_identifier(v, what="kernel name", field="name")


def check_options(v: tuple[str, ...]) -> tuple[str, ...]:
    for opt in v:
        if not opt.strip():
            raise SpecError("compiler options must be non-empty strings", field="options")
    return v


# -- parameters -------------------------------------------------------------------------------------------


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


def split_params(text: str) -> list[str]:
    """The items of CuPy's parameter string (``"T x, raw T y"``)."""
    text = text.strip()
    return [] if not text else [s.strip() for s in text.split(",")]


def param_words(item: str, *, field: str) -> dict[str, Any]:
    """One item of a parameter string as the fields of a parameter (not yet checked: :func:`check_param`)."""
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
    return {"name": name, "type": type_name, "raw": "raw" in modifiers, "non_const": "_non_const" in modifiers}


def check_param(data: dict[str, Any], *, field: str) -> dict[str, Any]:
    """A parameter's fields checked here (not only in the Param validators), so the error keeps its class and
    says which list it came from; ``type`` becomes its canonical name."""
    check_param_name(data["name"], field=field)
    data["type"] = check_type_name(data["type"], field=field)
    for flag in ("raw", "non_const"):
        if not isinstance(data.get(flag, False), bool):
            raise SpecError(f"parameter {flag!r} must be true or false", field=field)
    return data


def param_text(name: str, type_name: str, raw: bool, non_const: bool) -> str:
    """CuPy's string form of one parameter (``format_params`` joins them with ``", "``)."""
    return " ".join([*(["raw"] if raw else []), *(["_non_const"] if non_const else []), type_name, name])


def check_params(
    in_params: Sequence[Any],
    out_params: Sequence[Any],
    placeholders: Sequence[str],
    instantiations: Sequence[Mapping[str, str]] = (),
    scalars: Sequence[str] = (),
) -> None:
    """A typed spec's parameters against each other, its placeholders, instantiations and scalars."""
    seen: dict[str, str] = {}
    for field_name, params in (("in_params", in_params), ("out_params", out_params)):
        for p in params:
            if p.name in seen:
                raise DuplicateNameError(
                    f"parameter {p.name!r} appears twice (in {seen[p.name]} and {field_name})", field=field_name
                )
            seen[p.name] = field_name
    placeholder_set = set(placeholders)
    for p in (*in_params, *out_params):
        if p.name in placeholder_set:
            raise DuplicateNameError(
                f"parameter {p.name!r} has the name of a type placeholder; rename one of them", field="in_params"
            )
    for k, inst in enumerate(instantiations):
        field = f"instantiations[{k}]"
        unknown = sorted(set(inst) - placeholder_set)
        if unknown:
            known = ", ".join(placeholders) or "none"
            raise InstantiationError(
                f"names unknown placeholder {unknown[0]!r} (the kernel's placeholders: {known})", field=field
            )
        missing = [t for t in placeholders if t not in inst]
        if missing:
            raise InstantiationError(f"leaves placeholder {missing[0]!r} unbound; give it a dtype", field=field)
    scalar_inputs = {p.name for p in in_params if not p.raw}
    for k, name in enumerate(scalars):
        if name not in scalar_inputs:
            raise SpecError(
                f"{name!r} is not a non-raw input parameter (scalars name inputs that calls pass as numbers)",
                field=f"scalars[{k}]",
            )
    if len(set(scalars)) != len(scalars):
        raise DuplicateNameError("an input is listed twice", field="scalars")
    keys = [tuple(sorted(inst.items())) for inst in instantiations]
    if len(set(keys)) != len(keys):
        raise InstantiationError("the same instantiation is declared twice", field="instantiations")


# -- reductions -------------------------------------------------------------------------------------------


def check_expr(v: str, *, field: str) -> str:
    if not v.strip():
        raise SpecError(f"{field} is empty", field=field)
    return v


def identity_text(v: object) -> object:
    """CuPy takes identity as C text; numbers (from a spec file) become their text."""
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


def check_reduce_type(v: str | None) -> str | None:
    if v is None or v in dtypes.BY_C_TYPE:
        return v
    if dtypes.is_placeholder(v) or dtypes.canonical_name(v) is not None:
        return check_type_name(v, field="reduce_type")
    # Any other C type spelling (a struct from the preamble, ``thrust::pair<...>``) is passed through.
    if not _C_TYPE.match(v) or not _one_type(v):
        raise SpecError(f"reduce_type {v!r} is neither a dtype, a placeholder nor a C type name", field="reduce_type")
    return v


def check_reduction_shape(
    in_params: Sequence[Any], out_params: Sequence[Any], reduce_type: str | None, preamble: str
) -> None:
    """A reduction's parameters (inputs and outputs, no operand names) and a reduce_type that exists."""
    if not in_params:
        raise SpecError("a reduction needs at least one input parameter", field="in_params")
    if not out_params:
        raise SpecError("a reduction needs at least one output parameter", field="out_params")
    if all(p.raw for p in in_params):
        raise SpecError("a reduction needs at least one non-raw input to reduce over", field="in_params")
    for field_name, params in (("in_params", in_params), ("out_params", out_params)):
        for p in params:
            if p.name in _REDUCE_OPERANDS:  # (kspec.fuse renames its parameters away from these)
                raise ReservedNameError(
                    f"parameter name {p.name!r} is reserved in a reduction: 'a' and 'b' are reduce_expr's "
                    "operands (and post_map_expr's 'a' the reduced value); rename the parameter",
                    field=field_name,
                )
            if p.is_placeholder and p.type in _REDUCE_OPERANDS:  # `typedef float a;` would meet the operand a
                raise ReservedNameError(
                    f"type placeholder {p.type!r} (of parameter {p.name!r}) is reserved in a reduction: 'a' and 'b' "
                    "are reduce_expr's operands (and post_map_expr's 'a' the reduced value); name the placeholder "
                    "otherwise (T, U, ...)",
                    field=field_name,
                )
    rt = reduce_type
    if rt is not None and dtypes.is_placeholder(rt) and rt not in {p.type for p in (*in_params, *out_params)}:
        used = sorted({p.type for p in (*in_params, *out_params) if p.is_placeholder})
        raise SpecError(
            f"reduce_type {rt!r} is a type placeholder that no parameter uses, so no call can give it a type; "
            f"use a placeholder of the parameters ({', '.join(map(repr, used)) or 'there are none'}), a dtype "
            "such as 'float32', or a type the preamble defines",
            field="reduce_type",
        )
    if rt is not None and _is_user_type(rt) and not re.search(rf"\b{re.escape(rt)}\b", preamble):
        close = dtypes.suggest(rt)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise SpecError(
            f"reduce_type {rt!r} is not a dtype{hint}, and the preamble does not define a type of that name",
            field="reduce_type",
        )


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
