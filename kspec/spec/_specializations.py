"""A typed spec's ``specializations``: exact calls to precompile, beside the type products of ``instantiations``.

``instantiations`` name placeholder bindings (a list value means every choice); each ``specializations`` entry
names one module exactly as a call specializes it: its placeholder binding, the inputs passed as numbers, and
each raw array's rank and C-contiguity (the CuPy-style constructors compile per raw layout, as CuPy does). A
``kspec capture`` writes them, so that a build holds the binary of every call it recorded::

    specializations = [
        {types = {T = "float32"}, scalars = ["cval"], raw_layouts = {w = [1, true]}, variants = ["contig/int64/0/4"]},
    ]

``variants`` (what a capture saw its calls launch: ``entry/index/ndim/vec``, a launch variant of the rendered
module) makes the build compile those entry points alone, each as its own program: the programs a first call
compiles, under the same binary-cache keys, so a build after a capture on the same machine finds them cached,
and a fraction of the module's NVRTC time otherwise. Without it the build compiles the whole module (every
variant). A call that needs a variant the build lacks compiles it, or is refused under ``KSPEC_COMPILE=never``.

Not part of a binary's content key: they say what to build, not what the code is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import dtypes
from .._errors import InstantiationError
from ._rules import check_type_name

Specialization = dict[str, Any]  # {"types": {letter: dtype}, "scalars": [...], "raw_layouts": {name: [ndim, c]},
#                                   "variants": ["entry/index/ndim/vec", ...]}
_KEYS = ("types", "scalars", "raw_layouts", "variants")
# the rendered modules' launch entries and index types (kspec/render/_variants.py's Entry and IndexType: a test
# keeps the two in step; the spec layer does not import the renderer)
VARIANT_ENTRIES = ("contig", "strided", "dense", "tiled", "rows", "cols", "pieces", "slab", "split_final", "slab_final")
VARIANT_INDEX_TYPES = ("int32", "int64")
Variant = tuple[str, str, int, int]  # (entry, index type, ndim, vec): a kspec.render.VariantKey's fields
MAX_RAW_NDIM = 64  # what a spec file may say; the renderer checks the kernel's own limit when it builds


def parse_specializations(value: object) -> tuple[Specialization, ...]:
    """The field's value, normalised (types and raw_layouts as tables in key order, scalars sorted); an
    InstantiationError naming the entry otherwise. Checks against the kernel's parameters come later."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise InstantiationError("specializations must be a list of tables like "
                                 "[{types = {T = 'float32'}, scalars = ['b']}]", field="specializations")
    return tuple(_entry(k, entry) for k, entry in enumerate(value))


def _entry(k: int, entry: object) -> Specialization:
    field = f"specializations[{k}]"
    if not isinstance(entry, Mapping):
        raise InstantiationError(f"expected a table with types, scalars and raw_layouts, got {entry!r}", field=field)
    unknown = [key for key in entry if key not in _KEYS]
    if unknown:
        raise InstantiationError(f"unknown key {unknown[0]!r} (expected {', '.join(_KEYS)})", field=field)
    types = entry.get("types", {})
    if not isinstance(types, Mapping):
        raise InstantiationError(f"types must be a table like {{T = 'float32'}}, got {types!r}", field=f"{field}.types")
    bound: dict[str, str] = {}
    for letter, dtype in types.items():
        if not isinstance(letter, str) or not dtypes.is_placeholder(letter):
            raise InstantiationError(f"{letter!r} is not a placeholder letter", field=f"{field}.types")
        name = check_type_name(dtype, field=f"{field}.types") if isinstance(dtype, str) else None
        if name is None or dtypes.is_placeholder(name):
            raise InstantiationError(f"placeholder {letter!r} must be bound to a dtype, got {dtype!r}",
                                     field=f"{field}.types")
        bound[letter] = name
    scalars = entry.get("scalars", [])
    if isinstance(scalars, str) or not isinstance(scalars, Sequence) or not all(isinstance(s, str) for s in scalars):
        raise InstantiationError(f"scalars must be a list of input names, got {scalars!r}", field=f"{field}.scalars")
    layouts = entry.get("raw_layouts", {})
    if not isinstance(layouts, Mapping):
        raise InstantiationError(f"raw_layouts must be a table like {{y = [2, true]}}, got {layouts!r}",
                                 field=f"{field}.raw_layouts")
    checked: dict[str, list[Any]] = {}
    for name, layout in layouts.items():
        ok = (isinstance(layout, Sequence) and not isinstance(layout, str) and len(layout) == 2
              and type(layout[0]) is int and 0 <= layout[0] <= MAX_RAW_NDIM and type(layout[1]) is bool)
        if not isinstance(name, str) or not ok:
            raise InstantiationError(f"raw_layouts[{name!r}]: expected [ndim, c_contiguous] (an int and a bool), "
                                     f"got {layout!r}", field=f"{field}.raw_layouts")
        checked[name] = [layout[0], layout[1]]
    out: Specialization = {}
    if bound:
        out["types"] = bound
    if scalars:
        out["scalars"] = sorted(set(scalars))
    if checked:
        out["raw_layouts"] = dict(sorted(checked.items()))
    variants = entry.get("variants")
    if variants is not None:
        if isinstance(variants, str) or not isinstance(variants, Sequence) or not variants:
            raise InstantiationError(f"variants must be a non-empty list like ['contig/int64/0/4'], got {variants!r}",
                                     field=f"{field}.variants")
        out["variants"] = sorted({variant_text(parse_variant(v, field=f"{field}.variants")) for v in variants})
    return out


def parse_variant(text: object, *, field: str = "variants") -> Variant:
    """``entry/index/ndim/vec`` (``contig/int64/0/4``) as its fields; an InstantiationError naming ``field``
    otherwise."""
    parts = text.split("/") if isinstance(text, str) else []
    ok = (len(parts) == 4 and parts[0] in VARIANT_ENTRIES and parts[1] in VARIANT_INDEX_TYPES
          and all(p.isdigit() and len(p) <= 3 for p in parts[2:]))
    if not ok:
        raise InstantiationError(f"{text!r} is not a launch variant: expected entry/index/ndim/vec with entry one of "
                                 f"{', '.join(VARIANT_ENTRIES)} and index int32 or int64 (like 'contig/int64/0/4')",
                                 field=field)
    return parts[0], parts[1], int(parts[2]), int(parts[3])


def variant_text(variant: Sequence[Any]) -> str:
    """A launch variant's fields (entry, index type, ndim, vec) as a spec file spells them."""
    entry, index, ndim, vec = variant
    return f"{entry}/{index}/{ndim}/{vec}"


def variants_of(entry: Specialization) -> tuple[Variant, ...]:
    """An entry's ``variants`` as fields, () where it names none (the build compiles every variant)."""
    return tuple(parse_variant(v) for v in entry.get("variants", ()))


def check_specializations(entries: Sequence[Specialization], placeholders: Sequence[str], inputs: Sequence[str],
                          raw_names: Sequence[str]) -> None:  # fmt: skip
    """Each entry against the kernel: every placeholder bound (and no other), scalars among the inputs,
    raw_layouts naming raw parameters."""
    for k, entry in enumerate(entries):
        field = f"specializations[{k}]"
        types = entry.get("types", {})
        unknown = sorted(set(types) - set(placeholders))
        missing = [t for t in placeholders if t not in types]
        if unknown or missing:
            what = f"names unknown placeholder {unknown[0]!r}" if unknown else f"does not bind placeholder {missing[0]!r}"
            raise InstantiationError(f"{what} (the kernel's placeholders: {', '.join(placeholders) or 'none'})",
                                     field=f"{field}.types")
        for name in entry.get("scalars", ()):
            if name not in inputs:
                raise InstantiationError(f"scalar {name!r} is not an input (inputs: {', '.join(inputs) or 'none'})",
                                         field=f"{field}.scalars")
        for name in entry.get("raw_layouts", {}):
            if name not in raw_names:
                raise InstantiationError(f"{name!r} is not a raw parameter (those: {', '.join(raw_names) or 'none'})",
                                         field=f"{field}.raw_layouts")


def layouts_of(entry: Specialization) -> tuple[tuple[str, tuple[int, bool]], ...]:
    """An entry's raw layouts as the kernels key them: sorted (name, (ndim, c_contiguous)) pairs."""
    return tuple((name, (int(v[0]), bool(v[1]))) for name, v in sorted(entry.get("raw_layouts", {}).items()))
