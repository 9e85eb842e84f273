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


# Names a typed function's body uses itself (kspec/codegen/_emit.py): a parameter must not rebind them.
BODY_NAMES = frozenset({"outputs", "result"})


@dataclass(frozen=True)
class ApiParam:
    name: str  # the Python name: the spec's, or with "_" appended where that cannot be a Python parameter
    annotation: str  # Python annotation of the argument
    declared: str  # the declared type as the spec writes it ("float32", "T", "raw T")
    default: str | None = None  # source text of the default, None when required
    keyword_only: bool = False
    spec_name: str = ""  # the spec's name where the Python name differs

    @property
    def described(self) -> str:
        """The name as the docstring gives it."""
        return f"{self.name} (the kernel's {self.spec_name!r})" if self.spec_name else self.name


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


def _renamed(p: Param, py: dict[str, str]) -> str:
    return "" if py[p.name] == p.name else p.name


def _check_name(name: str, *, what: str, spec: AnySpec, taken: frozenset[str] = frozenset()) -> None:
    if keyword.iskeyword(name):
        raise SpecError(f"{what} {name!r} is a Python keyword: the typed API cannot use it", kernel=spec.name, file=spec.origin)
    if name in taken:
        raise SpecError(f"{what} {name!r} clashes with a name of the typed API", kernel=spec.name, file=spec.origin)


def _python_names(spec: AnySpec, reserved: frozenset[str]) -> dict[str, str]:
    """Each parameter's Python name: its own, or with ``_`` appended while it is a Python keyword, a launch option
    (``size``), a name of the module or the function body, or another parameter's name. Kernels written for CuPy
    name parameters ``in`` or ``size`` (the arguments are passed by position, so the Python name is free)."""
    taken = set(p.name for p in spec.params) | reserved | MODULE_NAMES | BODY_NAMES
    names: dict[str, str] = {}
    for p in spec.params:
        name = p.name
        if keyword.iskeyword(name) or name in reserved or name in MODULE_NAMES or name in BODY_NAMES:
            while name in taken or keyword.iskeyword(name):
                name += "_"
            taken.add(name)
        names[p.name] = name
    return names


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
    py = _python_names(spec, frozenset(o.name for o in options))

    inputs = tuple(ApiParam(py[p.name], _input_annotation(p), _declared(p), spec_name=_renamed(p, py))
                   for p in spec.in_params)
    outputs = tuple(ApiParam(py[p.name], f"{ARRAY} | None", _declared(p), "None", spec_name=_renamed(p, py))
                    for p in spec.out_params)
    no_return = isinstance(spec, ElementwiseSpec) and spec.no_return
    as_tuple = len(outputs) > 1 or (isinstance(spec, ElementwiseSpec) and spec.return_tuple)
    returns = "None" if no_return else (f"tuple[{ARRAY}, ...]" if as_tuple else ARRAY)
    return ApiFunction(spec.name, spec.KIND, doc, inputs, outputs, options, returns, _instantiations(spec))
