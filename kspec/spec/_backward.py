"""The backward kernel of an elementwise spec with a ``grad`` table: one more elementwise spec.

For ``z = f(x, y)`` with ``grad = {x = ..., y = ...}`` the backward kernel reads the forward's inputs (raw ones
too: an expression may index them), its outputs and their incoming gradients ``grad_<output>``, and writes
``grad_<input>`` for each entry, all in one pass over the broadcast shape. It is an ordinary spec, so it is
rendered, compiled, cached, precompiled (``kspec build``) and served exactly as a forward kernel is; nothing here
compiles or launches. ``kspec build`` precompiles it beside its forward (kspec/spec/_grad_plan.py).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from .._errors import SpecError
from ._grad import GRAD_PREFIX, mentions
from ._params import Param

BACKWARD_SUFFIX = "_backward"


def backward_spec(spec: Any) -> Any:
    """The backward ElementwiseSpec of ``spec`` (an elementwise or reduction spec with ``grad``); a SpecError
    naming the kernel without one."""
    if getattr(spec, "grad", None) is None or not callable(getattr(spec, "backward_spec", None)):
        raise SpecError("declares no gradient: give its spec a grad table (input name -> expression) or "
                        "grad = \"auto\"", kernel=getattr(spec, "name", None), field="grad")  # fmt: skip
    return spec.backward_spec()


def outputs_read(spec: Any) -> tuple[bool, ...]:
    """Per output of a spec with gradients, whether its backward reads the output's value (:func:`build_backward`
    passes every output in): its name in the backward's operation or in the preamble the backward compiles with
    (a macro may read it). The adapters keep for the backward only the outputs it reads (bias-GELU's backward
    recomputes from its inputs: none) and pass each other output's gradient in its place (same shape and dtype:
    the backward kernel binds as before)."""
    texts = (spec.backward()[1], str(getattr(spec, "preamble", "") or ""))
    return tuple(mentions(p.name, texts) for p in spec.out_params)


def shared_gradients(names: tuple[str, ...], operation: str) -> dict[str, str]:
    """See :func:`_shared_gradients` (a copy: callers may change it)."""
    return dict(_shared_gradients(tuple(names), operation))


@functools.lru_cache(maxsize=1024)  # kspec.grad asks on every backward call
def _shared_gradients(names: tuple[str, ...], operation: str) -> dict[str, str]:
    """``{input: an earlier input}`` for inputs whose gradient is computed by the same expressions as an earlier
    one's (a bias added to an activation's input: ``v = x + b`` gives both ``grad_v``). A backward that writes
    the earlier one alone lets a broadcast input's gradient be summed from it: one full-size array less to
    write and read."""
    rhs: dict[str, list[str]] = {}
    for line in operation.splitlines():
        found = _ASSIGNED.match(line)
        if found is None or found.group(2) not in names:
            continue
        prefix, name, value = found.group(1), found.group(2), found.group(3).strip()
        if prefix == GRAD_PREFIX and value == f"{_ACCUMULATOR}{name}":
            continue  # the accumulator's final copy: the same for every input
        rhs.setdefault(name, []).append(value.replace(f"{_ACCUMULATOR}{name}", "@"))
    shared: dict[str, str] = {}
    for k, name in enumerate(names):
        earlier = next((e for e in names[:k] if e not in shared and rhs.get(e) and rhs.get(e) == rhs.get(name)), None)
        if earlier is not None:
            shared[name] = earlier
    return shared


_ACCUMULATOR = "_kspec_grad_"  # kspec/spec/_autodiff.py's per-input sums
_ASSIGNED = re.compile(rf"\s*({_ACCUMULATOR}|{GRAD_PREFIX})(\w+)\s*\+?=\s*(.*?);\s*$")
SHARED_SUFFIX = "_shared"


def build_backward(spec: Any, elementwise: type, shared: bool = False) -> Any:
    """The backward spec of ``spec``, of class ``elementwise`` (ElementwiseSpec: this module does not import the
    models, they import it). An elementwise kernel's backward runs over the broadcast shape; a reduction's over
    its inputs' shape, with the output and its gradient broadcast back along the reduced axes (kspec.grad
    passes them with those axes kept). ``shared``: the variant that leaves out the gradients
    :func:`shared_gradients` finds equal to an earlier input's (kspec.grad sums those from the earlier one)."""
    outputs = list(spec.out_params)
    inputs = [p for p in spec.in_params if not (spec.KIND == "reduction" and p.raw)]
    in_params = [
        *inputs,
        *(Param(name=p.name, type=p.type) for p in outputs),  # the forward's results, read as inputs
        *(Param(name=GRAD_PREFIX + p.name, type=p.type) for p in outputs),
    ]
    names, operation = spec.backward()
    if shared:
        left_out = shared_gradients(names, operation)
        names = tuple(n for n in names if n not in left_out)
        operation = "\n".join(
            line for line in operation.splitlines()
            if not any(re.search(rf"\b({_ACCUMULATOR}|{GRAD_PREFIX}){n}\b", line) for n in left_out)
        )  # fmt: skip
    types = {p.name: p.type for p in spec.in_params}
    out_params = [Param(name=GRAD_PREFIX + name, type=types[name]) for name in names]
    used = {p.type for p in (*in_params, *out_params)}
    instantiations = [{k: v for k, v in inst.items() if k in used} for inst in spec.instantiations]
    return elementwise(
        name=spec.name + BACKWARD_SUFFIX + (SHARED_SUFFIX if shared else ""),
        doc=f"The backward kernel of {spec.name} (kspec.grad, from its grad table).",
        options=spec.options,
        in_params=in_params,
        out_params=out_params,
        operation=operation,
        preamble=spec.preamble,
        cupy_headers=spec.cupy_headers,
        reduce_dims=spec.reduce_dims,
        instantiations=[dict(t) for t in dict.fromkeys(tuple(sorted(i.items())) for i in instantiations)],
        scalars=[n for n in spec.scalars if n in {p.name for p in in_params}],
    )
