"""The ``grad`` table of an elementwise spec: which inputs have a gradient, and its expression.

``grad = {x = "grad_z * 2 * x"}`` declares the gradient of input ``x`` as an expression, written like
``operation``, over the kernel's inputs, its outputs and each output's incoming gradient ``grad_<output>``.
kspec.grad renders the backward kernel from it; this module only checks the table against the parameters, so
that a mistake is a :class:`kspec.SpecError` naming the field and the input when the spec is loaded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from .. import dtypes
from .._errors import SpecError
from ._params import Param

AUTO = "auto"  # grad = "auto": derived from the operation (kspec/spec/_autodiff.py)
GRAD_PREFIX = "grad_"  # grad_<output>: an output's incoming gradient; grad_<input>: the backward's outputs
_GRAD_NAME = re.compile(r"\bgrad_([A-Za-z_]\w*)")


def mentions(name: str, texts: Sequence[str]) -> bool:
    """Whether kernel code (``texts``) names ``name`` as a word: a backward reads a parameter it names."""
    return any(re.search(rf"\b{re.escape(name)}\b", text) for text in texts)


def grad_table(value: object) -> dict[str, str] | None:
    """A ``grad`` table as given (a mapping of names to expression strings), before the parameters are known."""
    if value is None or value == AUTO:
        return value  # type: ignore[return-value]
    if not isinstance(value, Mapping):
        raise SpecError(
            f"expected a table of input name -> gradient expression, e.g. {{x = \"grad_z * 2 * x\"}}, or \"auto\", "
            f"got {type(value).__name__} {value!r}",
            field="grad",
        )
    if not value:
        raise SpecError("is empty: name at least one input and its gradient, or leave grad out", field="grad")
    table: dict[str, str] = {}
    for name, expr in value.items():
        if not isinstance(name, str) or not isinstance(expr, str):
            raise SpecError(f"expected input name -> expression strings, got {name!r} -> {expr!r}", field="grad")
        if not expr.strip():
            raise SpecError(f"the gradient of {name!r} is empty", field=f"grad.{name}")
        table[name] = expr
    return table


def check_grad(table: Mapping[str, str] | str, in_params: Sequence[Param], out_params: Sequence[Param]) -> None:
    """Every entry names a differentiable input; every ``grad_<name>`` it reads is an output's gradient (for
    ``"auto"``, only the parameters' checks: the derivation checks the rest)."""
    inputs = {p.name: p for p in in_params}
    for p in (*in_params, *out_params):
        if p.name.startswith(GRAD_PREFIX):
            raise SpecError(
                f"parameter {p.name!r} starts with {GRAD_PREFIX!r}, which a kernel with gradients keeps for the "
                "gradients' names; rename it",
                field="grad",
            )
    raw_outputs = [p.name for p in out_params if p.raw]
    if raw_outputs:
        raise SpecError(
            f"raw output {raw_outputs[0]!r} has no gradient to pass back (it is written by hand, not per element); "
            "a kernel with gradients has only elementwise outputs",
            field="grad",
        )
    if isinstance(table, str):
        return
    outputs = {p.name for p in out_params}
    differentiable = [p.name for p in in_params if not p.raw and _differentiable(p)]
    for name, expr in table.items():
        param = inputs.get(name)
        if param is None:
            raise SpecError(
                f"{name!r} is not an input; the differentiable inputs are: {', '.join(differentiable) or 'none'}",
                field=f"grad.{name}",
            )
        if param.raw:
            raise SpecError(
                f"{name!r} is a raw input: it is indexed by hand, so its gradient is not elementwise",
                field=f"grad.{name}",
            )
        if not _differentiable(param):
            raise SpecError(f"{name!r} is a {param.type} input, which has no gradient", field=f"grad.{name}")
        for found in _GRAD_NAME.finditer(expr):
            if found.group(1) not in outputs:
                raise SpecError(
                    f"{found.group(0)!r} is not an output's gradient; this kernel's are: "
                    f"{', '.join(GRAD_PREFIX + o for o in outputs)}",
                    field=f"grad.{name}",
                )


def _differentiable(param: Param) -> bool:
    """Floating and complex types, and placeholders (their call decides; kspec.grad refuses integer ones)."""
    return param.is_placeholder or dtypes.lookup(param.type).kind in "fc"



def table_backward(table: Mapping[str, str]) -> tuple[tuple[str, ...], str]:
    """A table's (inputs, backward operation): one assignment per entry."""
    return tuple(table), "\n".join(f"{GRAD_PREFIX}{name} = ({expr});" for name, expr in table.items())
