"""Plain specs: the read-only view of an already validated spec table, without Pydantic.

A generated module embeds each kernel's table as ``kspec generate`` wrote it from a validated spec (the
spec's ``to_data()``). Serving those kernels from binaries or from the cache needs the parameters, the
flags and the texts, not validation: a :class:`PlainSpec` offers the attributes the kernels, the plans
and :func:`kspec.render.specialize` read, parsed from the table by a strict reader. Whatever the reader
does not recognise exactly as ``to_data()`` writes it gives None, and the caller validates the table with
the spec models instead. A table edited by hand cannot get a binary it was not built from either: binaries
and cache entries are found by a content key over the table itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from .._named_tuple import NamedTuple
from .. import dtypes
from ._placeholders import PlaceholderRules

# Each kind's fields in the spec model's order (``to_data()`` lists its keys so), with the default that
# ``to_data()`` leaves out; REQUIRED ones have none. Also read by the constructors' plain path (._ctor).
_COMMON_DEFAULTS: dict[str, Any] = {"in_params": (), "out_params": (), "name": None, "doc": "", "options": (),
                                    "preamble": "", "reduce_dims": True, "cupy_headers": False, "grad": None}
FIELD_DEFAULTS: dict[str, dict[str, Any]] = {
    "elementwise": {**_COMMON_DEFAULTS, "operation": None, "loop_prep": "", "after_loop": "", "no_return": False,
                    "return_tuple": False, "layouts": "any"},
    "reduction": {**_COMMON_DEFAULTS, "map_expr": None, "reduce_expr": None, "post_map_expr": None, "identity": None,
                  "reduce_type": None},
}
REQUIRED = frozenset({"name", "operation", "map_expr", "reduce_expr", "post_map_expr"})
# What a table written by to_data() may hold: the fields, its kind, and what only spec files declare.
_FIELDS = {kind: set(defaults) | {"kind", "instantiations", "specializations", "scalars", "tune", "cuda_name"}
           for kind, defaults in FIELD_DEFAULTS.items()}


class PlainParam(NamedTuple):
    """One parameter, as :class:`kspec.spec.Param` describes it."""

    name: str
    type: str
    raw: bool = False
    non_const: bool = False

    @property
    def is_placeholder(self) -> bool:
        return dtypes.is_placeholder(self.type)


class PlainSpec(PlaceholderRules):
    """An elementwise or reduction spec table as attributes (see the module docstring)."""

    KIND: ClassVar[str] = ""

    def __init__(self, table: Mapping[str, Any], in_params: tuple[PlainParam, ...], out_params: tuple[PlainParam, ...]) -> None:
        self._table = dict(table)
        self.name: str = table["name"]
        self.cuda_name: str | None = table.get("cuda_name")
        self.doc: str = table.get("doc", "")
        self.options: tuple[str, ...] = tuple(table.get("options", ()))
        self.in_params = in_params
        self.out_params = out_params
        self.preamble: str = table.get("preamble", "")
        self.reduce_dims: bool = table.get("reduce_dims", True)
        self.cupy_headers: bool = table.get("cupy_headers", False)
        self.scalars: tuple[str, ...] = tuple(table.get("scalars", ()))
        self.grad: str | dict[str, str] | None = table.get("grad")  # checked when the module was generated

    def backward_spec(self, shared: bool = False) -> Any:
        """The backward kernel's spec: derived by the spec model, so a gradient imports Pydantic."""
        return self.validated().backward_spec(shared)

    def row_sum_spec(self, summed: tuple[str, ...]) -> Any:
        """The backward's row-sum variant (kspec/spec/_row_sums.py), derived by the spec model."""
        return self.validated().row_sum_spec(summed)

    def backward(self) -> tuple[tuple[str, ...], str]:
        return self.validated().backward()  # type: ignore[no-any-return]

    def to_data(self) -> dict[str, Any]:
        """The table itself: what the validated spec's ``to_data()`` gave when it was written."""
        return dict(self._table)

    def validated(self) -> Any:
        """The spec model of this table (imports Pydantic): for rendering, compiling and ``kernel.spec``. Made once."""
        model = self.__dict__.get("_model")
        if model is None:
            from ._models import parse_spec

            model = self._model = parse_spec(dict(self._table))
        return model


class PlainElementwiseSpec(PlainSpec):
    KIND: ClassVar[str] = "elementwise"

    def __init__(self, table: Mapping[str, Any], in_params: tuple[PlainParam, ...], out_params: tuple[PlainParam, ...]) -> None:
        super().__init__(table, in_params, out_params)
        self.operation: str = table["operation"]
        self.loop_prep: str = table.get("loop_prep", "")
        self.after_loop: str = table.get("after_loop", "")
        self.no_return: bool = table.get("no_return", False)
        self.return_tuple: bool = table.get("return_tuple", False)
        self.layouts: str = table.get("layouts", "any")


class PlainReductionSpec(PlainSpec):
    KIND: ClassVar[str] = "reduction"

    def __init__(self, table: Mapping[str, Any], in_params: tuple[PlainParam, ...], out_params: tuple[PlainParam, ...]) -> None:
        super().__init__(table, in_params, out_params)
        self.map_expr: str = table["map_expr"]
        self.reduce_expr: str = table["reduce_expr"]
        self.post_map_expr: str = table["post_map_expr"]
        self.identity: str | None = table.get("identity")
        self.reduce_type: str | None = table.get("reduce_type")

    def _extra_placeholders(self) -> tuple[str, ...]:
        rt = self.reduce_type
        return (rt,) if rt is not None and dtypes.is_placeholder(rt) else ()


def _params(text: object) -> tuple[PlainParam, ...] | None:
    """Parameters from the exact form ``format_params`` writes, or None."""
    if not isinstance(text, str):
        return None
    if not text:
        return ()
    params = []
    for item in text.split(", "):
        words = item.split(" ")
        raw = words[:1] == ["raw"]
        words = words[1:] if raw else words
        non_const = words[:1] == ["_non_const"]
        words = words[1:] if non_const else words
        if len(words) != 2 or not words[1].isidentifier():
            return None
        type_name, name = words
        if not (dtypes.is_placeholder(type_name) and type_name.isascii() and type_name.isalpha()):
            if dtypes.canonical_name(type_name) != type_name:  # to_data() writes canonical names only
                return None
        params.append(PlainParam(name, type_name, raw, non_const))
    return tuple(params)


_TYPES: dict[str, type | tuple[type, ...]] = {
    "name": str, "doc": str, "preamble": str, "reduce_dims": bool, "cupy_headers": bool, "operation": str, "loop_prep": str,
    "after_loop": str, "no_return": bool, "return_tuple": bool, "map_expr": str, "reduce_expr": str,
    "post_map_expr": str, "identity": (str, type(None)), "reduce_type": (str, type(None)), "grad": (str, dict),
    "cuda_name": str, "layouts": str,
}


def plain_spec(table: Mapping[str, Any]) -> PlainSpec | None:
    """The plain spec of an elementwise or reduction table written by ``to_data()``, or None (another kind,
    or anything this reader does not recognise: validate the table with the spec models then)."""
    kind = table.get("kind")
    if not isinstance(kind, str):
        return None
    fields = _FIELDS.get(kind)
    if fields is None or not set(table) <= fields or not all(name in table for name in REQUIRED & fields):
        return None
    if not all(isinstance(table[k], t) for k, t in _TYPES.items() if k in table):
        return None
    if table.get("layouts", "any") not in ("any", "contiguous"):
        return None
    options, scalars = table.get("options", []), table.get("scalars", [])
    if not (isinstance(options, list) and isinstance(scalars, list) and all(isinstance(o, str) for o in [*options, *scalars])):
        return None
    in_params, out_params = _params(table.get("in_params", "")), _params(table.get("out_params", ""))
    if in_params is None or out_params is None:
        return None
    cls = PlainElementwiseSpec if kind == "elementwise" else PlainReductionSpec
    return cls(table, in_params, out_params)
