"""Model -> API: what the typed Python function of one kernel looks like (names, annotations, docs).

Reads specs only; never imports ``kspec.runtime`` or ``kspec.kernels``.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass

from .. import dtypes
from .._errors import SpecError
from ..spec import AnySpec, ElementwiseSpec, Param, RawSpec, ReductionSpec

ARRAY = "CudaArray"
ANY_SCALAR = "bool | int | float | complex"

# Names the generated module defines itself; a kernel must not shadow them.
MODULE_NAMES = frozenset({"Any", "Path", "CudaArray", "load_specs", "_SPECS", "_KERNELS", "_outputs", "annotations"})


@dataclass(frozen=True)
class ApiParam:
    name: str
    annotation: str  # Python annotation of the argument
    declared: str  # the declared type as the spec writes it ("float32", "T", "raw T")
    default: str | None = None  # source text of the default, None when required
    keyword_only: bool = False


@dataclass(frozen=True)
class ApiFunction:
    """One typed wrapper: an elementwise or reduction kernel."""

    name: str
    kind: str  # "elementwise" | "reduction"
    doc: str
    inputs: tuple[ApiParam, ...]
    outputs: tuple[ApiParam, ...]
    options: tuple[ApiParam, ...]  # keyword-only launch options passed through to the kernel
    returns: str
    instantiations: tuple[str, ...]  # "T=float32", "T=float64, U=float32", "(no placeholders)"


@dataclass(frozen=True)
class ApiRaw:
    """A raw kernel or module, exposed as the kernel object itself."""

    name: str
    doc: str
    functions: tuple[str, ...]


Api = ApiFunction | ApiRaw


def _declared(p: Param) -> str:
    return f"raw {p.type}" if p.raw else p.type


def _input_annotation(p: Param) -> str:
    if p.raw:
        return ARRAY
    if p.is_placeholder:
        return f"{ARRAY} | {ANY_SCALAR}"
    return f"{ARRAY} | {dtypes.BY_NAME[p.type].python_type.__name__}"


def _check_name(name: str, *, what: str, spec: AnySpec, taken: frozenset[str] = frozenset()) -> None:
    if keyword.iskeyword(name):
        raise SpecError(f"{what} {name!r} is a Python keyword: the typed API cannot use it", kernel=spec.name, file=spec.origin)
    if name in taken:
        raise SpecError(f"{what} {name!r} clashes with a name of the typed API", kernel=spec.name, file=spec.origin)


def _instantiations(spec: ElementwiseSpec | ReductionSpec) -> tuple[str, ...]:
    out = []
    for inst in spec.declared_instantiations():
        out.append(", ".join(f"{k}={v}" for k, v in inst.items()) if inst else "(no placeholders)")
    return tuple(out)


def api_of(spec: AnySpec) -> Api:
    """The API of one kernel; ``SpecError`` when its names cannot be Python names of the module."""
    _check_name(spec.name, what="kernel name", spec=spec, taken=MODULE_NAMES)
    doc = spec.doc.strip()
    if isinstance(spec, RawSpec):
        return ApiRaw(spec.name, doc, tuple(spec.kernels) + tuple(spec.name_expressions))
    options: tuple[ApiParam, ...]
    if isinstance(spec, ElementwiseSpec):
        options = (
            ApiParam("size", "int | None", "", "None", True),
            ApiParam("block_size", "int | None", "", "None", True),
        )
    else:
        options = (
            ApiParam("axis", "int | tuple[int, ...] | None", "", "None", True),
            ApiParam("keepdims", "bool", "", "False", True),
        )
    options += (ApiParam("stream", "Any", "", "None", True),)
    reserved = frozenset(o.name for o in options)
    for p in spec.params:
        _check_name(p.name, what="parameter name", spec=spec, taken=reserved)
    inputs = tuple(ApiParam(p.name, _input_annotation(p), _declared(p)) for p in spec.in_params)
    outputs = tuple(ApiParam(p.name, f"{ARRAY} | None", _declared(p), "None") for p in spec.out_params)
    no_return = isinstance(spec, ElementwiseSpec) and spec.no_return
    as_tuple = len(outputs) > 1 or (isinstance(spec, ElementwiseSpec) and spec.return_tuple)
    returns = "None" if no_return else (f"tuple[{ARRAY}, ...]" if as_tuple else ARRAY)
    return ApiFunction(spec.name, spec.KIND, doc, inputs, outputs, options, returns, _instantiations(spec))
