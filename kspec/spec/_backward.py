"""The backward kernel of an elementwise spec with a ``grad`` table: one more elementwise spec.

For ``z = f(x, y)`` with ``grad = {x = ..., y = ...}`` the backward kernel reads the forward's inputs (raw ones
too: an expression may index them), its outputs and their incoming gradients ``grad_<output>``, and writes
``grad_<input>`` for each entry, all in one pass over the broadcast shape. It is an ordinary spec, so it is
rendered, compiled, cached, precompiled (``kspec build``) and served exactly as a forward kernel is; nothing here
compiles or launches. ``kspec build`` precompiles it beside its forward (:func:`with_backwards`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._errors import SpecError
from ._grad import GRAD_PREFIX
from ._params import Param

BACKWARD_SUFFIX = "_backward"


def backward_spec(spec: Any) -> Any:
    """The backward ElementwiseSpec of ``spec`` (an ElementwiseSpec with ``grad``); ValueError without one."""
    if getattr(spec, "KIND", None) != "elementwise" or getattr(spec, "grad", None) is None:
        raise SpecError("declares no gradient: give its spec a grad table (input name -> expression) or "
                        "grad = \"auto\"", kernel=getattr(spec, "name", None), field="grad")  # fmt: skip
    outputs = [p for p in spec.out_params]
    in_params = [
        *spec.in_params,
        *(Param(name=p.name, type=p.type) for p in outputs),  # the forward's results, read as inputs
        *(Param(name=GRAD_PREFIX + p.name, type=p.type) for p in outputs),
    ]
    names, operation = spec.backward()
    types = {p.name: p.type for p in spec.in_params}
    out_params = [Param(name=GRAD_PREFIX + name, type=types[name]) for name in names]
    return type(spec)(  # an ElementwiseSpec (this module does not import the models: they import it)
        name=spec.name + BACKWARD_SUFFIX,
        doc=f"The backward kernel of {spec.name} (kspec.grad, from its grad table).",
        options=spec.options,
        in_params=in_params,
        out_params=out_params,
        operation=operation,
        preamble=spec.preamble,
        cupy_headers=spec.cupy_headers,
        reduce_dims=spec.reduce_dims,
        instantiations=spec.instantiations,
        scalars=spec.scalars,
    )


def with_backwards(specs: Iterable[Any]) -> list[Any]:
    """``specs`` with each elementwise spec's backward spec after it (what ``kspec build`` precompiles)."""
    out: list[Any] = []
    for spec in specs:
        out.append(spec)
        if getattr(spec, "KIND", None) == "elementwise" and getattr(spec, "grad", None) is not None:
            out.append(backward_spec(spec))
    return out
