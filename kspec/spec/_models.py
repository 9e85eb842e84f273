"""Kernel specs: elementwise, reduction and raw kernels as frozen, validated Pydantic models.

A spec built in Python (``ElementwiseSpec(name=..., ...)``) and one read from a spec file go through the
same validators; every failure is a :class:`kspec.SpecError` naming the kernel and the field. The base
model is in :mod:`._base`, raw specs in :mod:`._raw`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import Field, StrictBool, StrictStr, field_validator, model_validator

from .. import dtypes
from .._errors import InstantiationError, SpecError, SpecErrorGroup
from .._plan_tuning import check_cases
from .._tuning import TuningError
from ._base import _KernelSpec
from ._autodiff import derive_backward
from ._backward import build_backward, shared_gradients
from ._grad import check_grad, grad_table, table_backward
from ._grad_reduction import reduction_backward
from ._placeholders import PlaceholderRules
from ._params import Param, parse_params
from ._raw import RawSpec
from ._row_sums import row_sum_spec
from ._specializations import Specialization, check_specializations, parse_specializations
from ._rules import check_kernel_name, check_expr, check_params, check_reduce_type, check_reduction_shape, check_type_name, identity_text

Instantiation = dict[str, str]


class _TypedKernelSpec(_KernelSpec, PlaceholderRules):
    """Elementwise and reduction kernels: typed parameters, placeholders, declared instantiations."""

    in_params: tuple[Param, ...] = ()
    out_params: tuple[Param, ...] = ()
    preamble: StrictStr = ""
    reduce_dims: StrictBool = True
    # CuPy's implicit kernel environment (templates/include/cupy: carray.cuh, atomics.cuh, math_constants.h):
    # M_PI, CArray, CIndexer, cupy::type_traits, _floor_divide, the atomics overloads, CUDART_INF/NAN. On
    # for kernels of the CuPy-style constructors, off by default in spec files.
    cupy_headers: StrictBool = False
    instantiations: tuple[Instantiation, ...] = ()
    # Exact specializations to precompile (types, scalar inputs, raw layouts): what `kspec capture` recorded
    # (kspec/spec/_specializations.py). Like instantiations, not part of a binary's content key.
    specializations: tuple[Specialization, ...] = ()
    # The kernel's name in CUDA C++ when it differs from its name here (captured kernels that share a name in the
    # code that built them get distinct library names); the content key and the source use it.
    cuda_name: StrictStr | None = None
    # Inputs that calls pass as numbers (by value), e.g. the scalars of a kspec.fuse kernel: `kspec build`
    # precompiles that specialization rather than guessing.
    scalars: tuple[StrictStr, ...] = ()
    # The calls `kspec tune` times the planner's choices for (kspec/_plan_tuning.py); not part of
    # the code, so not of a binary's content key (kspec.render.specialize leaves it out).
    tune: dict[str, Any] | None = None

    @field_validator("in_params", "out_params", mode="before")
    @classmethod
    def _parse_params(cls, v: object, info: Any) -> tuple[Param, ...]:
        return parse_params(v, field=info.field_name)

    @field_validator("instantiations", mode="before")
    @classmethod
    def _expand_instantiations(cls, v: object) -> tuple[Instantiation, ...]:
        return _expand(v)

    @field_validator("specializations", mode="before")
    @classmethod
    def _parse_specializations(cls, v: object) -> tuple[Specialization, ...]:
        return parse_specializations(v)

    @field_validator("cuda_name")
    @classmethod
    def _check_cuda_name(cls, v: str | None) -> str | None:
        return None if v is None else check_kernel_name(v)

    def declared_instantiations(self) -> tuple[Instantiation, ...]:
        """What ``kspec build`` precompiles: the declared ones, or the single one of a kernel with no placeholders."""
        if self.instantiations:
            return self.instantiations
        return ({},) if not self.placeholders else ()

    def _check_kind(self) -> None:
        """Checks of one kind, run before the instantiations are checked (they may explain why one fails)."""

    @model_validator(mode="after")
    def _check_params(self) -> "_TypedKernelSpec":
        self._check_kind()
        check_params(self.in_params, self.out_params, self.placeholders, self.instantiations, self.scalars)
        check_specializations(self.specializations, self.placeholders, [p.name for p in self.in_params],
                              [p.name for p in (*self.in_params, *self.out_params) if p.raw])
        if self.tune is not None:
            try:
                check_cases(self.tune, self.KIND, [p.name for p in self.in_params], [p.name for p in self.out_params])
            except TuningError as exc:
                raise SpecError(str(exc), field=exc.field) from None
        return self

    def to_data(self) -> dict[str, Any]:
        data = super().to_data()
        if "instantiations" in data:
            data["instantiations"] = [dict(inst) for inst in self.instantiations]
        if "scalars" in data:
            data["scalars"] = list(data["scalars"])
        if "specializations" in data:
            data["specializations"] = [dict(entry) for entry in self.specializations]
        return data

    def row_sum_spec(self, summed: tuple[str, ...]) -> "ElementwiseSpec":
        """The backward's row-sum variant, the gradients of the inputs ``summed`` summed over the rows in the same
        pass (kspec/spec/_row_sums.py); a SpecError where the backward cannot take that form."""
        return row_sum_spec(self.backward_spec(), summed, ElementwiseSpec)  # type: ignore[attr-defined,no-any-return]


class ElementwiseSpec(_TypedKernelSpec):
    """CuPy's ElementwiseKernel as data."""

    KIND: ClassVar[str] = "elementwise"
    kind: Literal["elementwise"] = "elementwise"
    operation: StrictStr
    loop_prep: StrictStr = ""
    after_loop: StrictStr = ""
    no_return: StrictBool = False
    return_tuple: StrictBool = False
    # The array layouts its calls pass: "any", or "contiguous" (C-contiguous arrays, as kspec.grad's row-sum
    # variants always get): its module then holds the contiguous entry and one general strided entry (a call with
    # other layouts still runs, more slowly) instead of every strided and tiled one: a tenth of the bytes.
    layouts: Literal["any", "contiguous"] = "any"
    # input name -> its gradient, an expression of the inputs, the outputs and the outputs' incoming
    # gradients grad_<output> (kspec/spec/_grad.py); kspec.grad renders the backward kernel from it.
    grad: dict[StrictStr, StrictStr] | Literal["auto"] | None = None

    @field_validator("grad", mode="before")
    @classmethod
    def _check_grad_table(cls, v: object) -> dict[str, str] | None:
        return grad_table(v)

    def _check_kind(self) -> None:
        if self.grad is not None:
            check_grad(self.grad, self.in_params, self.out_params)
            if self.grad == "auto":
                if self.loop_prep.strip() or self.after_loop.strip():
                    raise SpecError("'auto' differentiates the operation alone; this kernel has loop_prep or "
                                    "after_loop code: give the grad table by hand", field="grad")  # fmt: skip
                self.backward()  # derived now: what it cannot differentiate is an error at load time

    def backward_spec(self, shared: bool = False) -> "ElementwiseSpec":
        """The backward kernel's spec (kspec/spec/_backward.py); ``shared``: without the gradients equal to an
        earlier input's (:meth:`shared_gradients`)."""
        return build_backward(self, ElementwiseSpec, shared)  # type: ignore[no-any-return]

    def shared_gradients(self) -> dict[str, str]:
        """``{input: the earlier input whose gradient it equals}`` (kspec/spec/_backward.py)."""
        return shared_gradients(*self.backward())

    def backward(self) -> tuple[tuple[str, ...], str]:
        """(the inputs that have a gradient, the backward operation writing ``grad_<input>``) of the ``grad``
        table (derived from the operation for ``"auto"``); kspec.grad makes the backward kernel of it."""
        if self.grad is None:
            raise SpecError("this kernel declares no gradient", kernel=self.name, field="grad")
        if self.grad == "auto":
            return derive_backward(self.operation, self.in_params, self.out_params, self.placeholders)
        return table_backward(self.grad)

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
    # input name -> its gradient (an expression of the inputs, the output and grad_<output>, both
    # broadcast back along the reduced axes), or "auto" for a sum (kspec/spec/_grad_reduction.py).
    grad: dict[StrictStr, StrictStr] | Literal["auto"] | None = None

    @field_validator("grad", mode="before")
    @classmethod
    def _check_grad_table(cls, v: object) -> dict[str, str] | None:
        return grad_table(v)

    def backward_spec(self, shared: bool = False) -> ElementwiseSpec:
        """The backward kernel's spec: elementwise over the inputs' shape (kspec/spec/_backward.py)."""
        return build_backward(self, ElementwiseSpec, shared)  # type: ignore[no-any-return]

    def shared_gradients(self) -> dict[str, str]:
        """``{input: the earlier input whose gradient it equals}`` (kspec/spec/_backward.py)."""
        return shared_gradients(*self.backward())

    def backward(self) -> tuple[tuple[str, ...], str]:
        """(the inputs that have a gradient, the backward operation); see ElementwiseSpec.backward."""
        if self.grad is None:
            raise SpecError("this kernel declares no gradient", kernel=self.name, field="grad")
        return reduction_backward(self)

    @field_validator("map_expr", "reduce_expr", "post_map_expr")
    @classmethod
    def _check_expr(cls, v: str, info: Any) -> str:
        return check_expr(v, field=info.field_name)

    @field_validator("identity", mode="before")
    @classmethod
    def _check_identity(cls, v: object) -> object:
        return identity_text(v)

    @field_validator("reduce_type")
    @classmethod
    def _check_reduce_type(cls, v: str | None) -> str | None:
        return check_reduce_type(v)

    def _extra_placeholders(self) -> tuple[str, ...]:
        rt = self.reduce_type
        return (rt,) if rt is not None and dtypes.is_placeholder(rt) else ()

    def _check_kind(self) -> None:
        check_reduction_shape(self.in_params, self.out_params, self.reduce_type, self.preamble)
        if self.grad is not None:
            check_grad(self.grad, self.in_params, self.out_params)
            self.backward()  # what cannot be differentiated is an error at load time


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
    for k, table in enumerate(value):
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
