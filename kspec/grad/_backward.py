"""The backward kernel of an elementwise spec with a ``grad`` table: one more elementwise spec.

For ``z = f(x, y)`` with ``grad = {x = ..., y = ...}`` the backward kernel reads the forward's inputs (raw ones
too: an expression may index them), its outputs and their incoming gradients ``grad_<output>``, and writes
``grad_<input>`` for each entry, all in one pass over the broadcast shape. It is an ordinary spec, so it is
rendered, compiled, cached, precompiled (``kspec build``) and served exactly as a forward kernel is; nothing here
compiles or launches.
"""

from __future__ import annotations

from typing import Any

from ..spec import ElementwiseSpec, Param

GRAD_PREFIX = "grad_"
BACKWARD_SUFFIX = "_backward"


def backward_spec(spec: Any) -> Any:
    """The backward ElementwiseSpec of ``spec`` (an ElementwiseSpec with ``grad``); ValueError without one."""
    if not isinstance(spec, ElementwiseSpec) or spec.grad is None:
        from .._errors import KspecValueError

        what = f"kernel '{getattr(spec, 'name', '?')}'"
        raise KspecValueError(f"{what} declares no gradient: give its spec a grad table (input name -> expression)")
    outputs = [p for p in spec.out_params]
    in_params = [
        *spec.in_params,
        *(Param(name=p.name, type=p.type) for p in outputs),  # the forward's results, read as inputs
        *(Param(name=GRAD_PREFIX + p.name, type=p.type) for p in outputs),
    ]
    types = {p.name: p.type for p in spec.in_params}
    out_params = [Param(name=GRAD_PREFIX + name, type=types[name]) for name in spec.grad]
    operation = "\n".join(f"{GRAD_PREFIX}{name} = ({expr});" for name, expr in spec.grad.items())
    return ElementwiseSpec(
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


def gradient_inputs(spec: Any) -> tuple[str, ...]:
    """The inputs ``spec``'s grad table differentiates, in the table's order (the backward's outputs)."""
    return tuple(spec.grad or ())
