"""The launch interface of a specialization (variants, name expressions, ABI) and its stored form.

Known without rendering: no Jinja, no spec models. ``kspec build`` computes it once per specialization
and stores :func:`interface_to_data` in the manifest; a process serving that binary reads it back with
:func:`interface_from_data` instead of deriving it again. The encoding is generic over the records of
this package (NamedTuples and ``_record.Record`` classes: variants, slots, layouts, ...): a new launch
variant or slot kind needs no change here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

from .._named_tuple import NamedTuple
from .._errors import KspecTypeError
from . import _abi, _layout, _variants
from ._abi import EntryAbi, entry_abi
from ._record import Record
from ._specialize import Operand, Specialization
from ._variants import VariantKey

INTERFACE_FORMAT = 1  # bump when the encoding below changes


class ReduceItem(NamedTuple):
    """The reduce type as the split reduction's workspace holds it.

    ``itemsize`` / ``align`` are known when the reduce type is one of kspec's dtypes; for an opaque C type
    they are None and the launcher reads them from the module global ``symbol`` (two uint64: sizeof, alignof).
    """

    c_type: str
    dtype: str | None
    itemsize: int | None
    align: int | None
    symbol: str


class ModuleInterface(Record):
    """What a launcher needs from a specialization's module, known without rendering its source.

    ``variants`` maps each launch variant to its name expression (the compiler resolves these to lowered
    names); ``abi`` gives each variant's parameter list (see ``kspec/render/_abi.py`` for the entry points
    and how the launcher picks a variant, ``kspec/render/_layout.py`` for the layouts). Loading a
    precompiled binary needs only this, so a deployed kernel never pays for Jinja.
    """

    # A record, not a dataclass (import cost: kspec/render/_record.py). Equal by value (a stored interface
    # equals the one derived again); hashed by the content key, since its mappings are not hashable.
    __slots__ = ("name", "kind", "key", "variants", "abi", "reduce_item")
    name: str
    kind: str  # "elementwise" or "reduction"
    key: str  # the specialization's content key
    variants: Mapping[VariantKey, str]
    abi: Mapping[VariantKey, EntryAbi]
    reduce_item: ReduceItem | None

    def __init__(
        self,
        name: str,
        kind: str,
        key: str,
        variants: Mapping[VariantKey, str],
        abi: Mapping[VariantKey, EntryAbi],
        reduce_item: ReduceItem | None = None,
    ) -> None:
        self._store(name, kind, key, variants, abi, reduce_item)

    def __hash__(self) -> int:
        return hash(self.key)


def module_interface(target: Specialization) -> ModuleInterface:
    """The launch interface of an elementwise or reduction specialization (no template is rendered)."""
    if target.kind == "raw":
        raise KspecTypeError("module_interface: raw modules have no launch interface (the user packs arguments)")
    return ModuleInterface(
        name=target.name,
        kind=target.kind,
        key=target.key,
        variants=MappingProxyType({v: target.name_expression(v) for v in target.variants}),
        abi=_LazyAbi(target.kind, tuple(target.variants), target.operands),
        reduce_item=_reduce_item(target),
    )


_abis: dict[tuple[str, VariantKey, tuple[Operand, ...]], EntryAbi] = {}


class _LazyAbi(Mapping[VariantKey, EntryAbi]):
    """``ModuleInterface.abi`` of a derived interface: each variant's parameter list made when first asked
    for. A first call uses one or two of a module's 4-6 variants, and making them all was most of deriving
    an interface (~0.1 ms); they are shared by every specialization over the same operands. A read-only
    Mapping, equal to the stored interface's (``interface_from_data``) when their items are."""

    __slots__ = ("_kind", "_variants", "_operands")

    def __init__(self, kind: str, variants: tuple[VariantKey, ...], operands: tuple[Operand, ...]) -> None:
        self._kind, self._variants, self._operands = kind, variants, operands

    def __getitem__(self, variant: VariantKey) -> EntryAbi:
        key = (self._kind, variant, self._operands)
        found = _abis.get(key)
        if found is None:
            if variant not in self._variants:
                raise KeyError(variant)
            if len(_abis) >= 4096:  # a bound: a process making this many starts over (still correct)
                _abis.clear()
            found = _abis[key] = entry_abi(self._kind, variant, self._operands)
        return found

    def __iter__(self) -> Iterator[VariantKey]:
        return iter(self._variants)

    def __len__(self) -> int:
        return len(self._variants)

    def __contains__(self, variant: object) -> bool:
        return variant in self._variants

    def __repr__(self) -> str:
        return repr(dict(self.items()))


def _reduce_item(s: Specialization) -> ReduceItem | None:
    if s.reduce_type is None:
        return None
    size = s.reduce_type.itemsize
    return ReduceItem(
        c_type=s.reduce_type.c_type,
        dtype=s.reduce_type.dtype,
        itemsize=size,
        align=size,  # every dtype of kspec's table is aligned to its size
        symbol=f"{s.name}__reduce_type_info",
    )


# -- stored form: JSON-able data ------------------------------------------------------------------------


def _is_record_type(cls: type) -> bool:
    """A NamedTuple or a :class:`Record`: the record types an interface is made of."""
    return issubclass(cls, Record) or (issubclass(cls, tuple) and hasattr(cls, "_fields"))


def _record_fields(obj: Any) -> tuple[str, ...] | None:
    """The field names of a record instance, else None."""
    if isinstance(obj, type) or not _is_record_type(type(obj)):
        return None
    return tuple(type(obj)._fields)


def _classes() -> dict[str, type]:
    """Every record class an interface is made of, by name (found, not listed: new ones need no change)."""
    found: dict[str, type] = {}
    for module in (_variants, _layout, _abi):
        for name, obj in vars(module).items():
            if isinstance(obj, type) and _is_record_type(obj) and obj.__module__ == module.__name__:
                found[name] = obj
    found["ReduceItem"] = ReduceItem
    found["ModuleInterface"] = ModuleInterface
    return found


def _encode(value: Any) -> Any:
    names = _record_fields(value)
    if names is not None:
        data = {name: _encode(getattr(value, name)) for name in names}
        data["@"] = type(value).__name__
        return data
    if isinstance(value, Mapping):  # keys are records (variants): a list of pairs
        return {"@map": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if isinstance(value, (tuple, list)):
        return [_encode(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"cannot store a {type(value).__name__} in a launch interface")


def _decode(value: Any, classes: dict[str, type]) -> Any:
    if isinstance(value, list):
        return tuple(_decode(v, classes) for v in value)  # every sequence field of these records is a tuple
    if isinstance(value, dict):
        if "@map" in value:
            return MappingProxyType({_decode(k, classes): _decode(v, classes) for k, v in value["@map"]})
        cls = classes[value["@"]]
        return cls(**{k: _decode(v, classes) for k, v in value.items() if k != "@"})
    return value


class _StoredAbi(Mapping[VariantKey, EntryAbi]):
    """``ModuleInterface.abi`` of a stored interface: each variant's parameter list decoded when first asked
    for. Its records were most of reading an interface (~145 records, 0.45 ms a kernel on a 2-core host, in
    every served kernel's first call), and a call uses one or two of its variants. Equal to the derived
    interface's when their items are."""

    __slots__ = ("_stored", "_classes", "_made")

    def __init__(self, encoded: Any, classes: dict[str, type]) -> None:
        pairs = encoded["@map"]
        if not all(type(v) is dict and v.get("@") == "EntryAbi" for _, v in pairs):
            raise ValueError("not a stored ABI")
        self._stored = {_decode(k, classes): v for k, v in pairs}
        self._classes = classes
        self._made: dict[VariantKey, EntryAbi] = {}

    def __getitem__(self, variant: VariantKey) -> EntryAbi:
        found = self._made.get(variant)
        if found is None:
            try:
                found = _decode(self._stored[variant], self._classes)
            except (TypeError, ValueError) as exc:  # KeyError: not a variant of this module, as for any mapping
                from .._errors import KspecValueError

                raise KspecValueError(f"the stored launch interface of variant {variant} is damaged ({exc}): "
                                      "rebuild the binaries (kspec build)") from None
            self._made[variant] = found
        return found

    def __iter__(self) -> Iterator[VariantKey]:
        return iter(self._stored)

    def __len__(self) -> int:
        return len(self._stored)

    def __contains__(self, variant: object) -> bool:
        return variant in self._stored


_CLASSES: dict[str, type] = {}


def interface_to_data(interface: ModuleInterface) -> dict[str, Any]:
    """The interface as JSON-able data (what ``kspec build`` writes into the manifest)."""
    return {"format": INTERFACE_FORMAT, "interface": _encode(interface)}


def interface_from_data(data: object) -> ModuleInterface | None:
    """The interface stored by :func:`interface_to_data`, or None when the data is not one this kspec reads
    (another format, or damaged): the caller then derives it from the specialization. Its ABI is decoded per
    variant on first use (:class:`_StoredAbi`)."""
    if not isinstance(data, dict) or data.get("format") != INTERFACE_FORMAT:
        return None
    if not _CLASSES:
        _CLASSES.update(_classes())
    try:
        stored = data["interface"]
        if stored["@"] != "ModuleInterface":
            return None
        fields: dict[str, Any] = {k: _StoredAbi(v, _CLASSES) if k == "abi" else _decode(v, _CLASSES)
                                  for k, v in stored.items() if k != "@"}  # fmt: skip
        return ModuleInterface(**fields)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
