"""What ``kspec build`` precompiles for specs with gradients: each one's backward kernel (and its
``shared`` variant where inputs share a gradient), its row-sum variants (one broadcast input's gradient summed in
the backward's pass), and the sums that fold a broadcast input's gradient to its shape, one reduction per floating
dtype the backwards write.

The sums are concrete specs (one dtype each, no placeholder), so kspec.grad makes exactly the same spec at run
time (:func:`grad_sum_spec`) and finds its binary by the same content key, beside the forward's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .. import dtypes
from .._errors import SpecError
from ._backward import backward_spec
from ._models import ReductionSpec
from ._row_sums import row_sum_spec

GRAD_SUM = "kspec_grad_sum"
_NARROW = ("float16", "bfloat16")  # summed in float32, as their forward reductions are


def grad_sum_spec(dtype: str) -> ReductionSpec:
    """The reduction that sums gradients of ``dtype`` (a kspec dtype name) over the axes kspec.grad passes."""
    wide = dtype in _NARROW
    fields: dict[str, Any] = {
        "name": f"{GRAD_SUM}_{dtype}",
        "doc": f"kspec.grad: a broadcast input's {dtype} gradient summed to its shape.",
        "in_params": f"{dtype} g",
        "out_params": f"{dtype} s",
        "map_expr": "float(g)" if wide else "g",
        "reduce_expr": "a + b",
        "post_map_expr": f"s = ({dtypes.lookup(dtype).c_type})a" if wide else "s = a",
        "identity": "0",
        "reduce_type": "float32" if wide else None,
    }
    return ReductionSpec(**fields)


def row_sum_variants(spec: Any, backward: Any) -> list[Any]:
    """The row-sum variants (kspec/spec/_row_sums.py) of ``spec``'s ``backward`` spec that kspec.grad takes when
    one input of several is broadcast: one per input with a gradient, where the backward can take that form.
    Other sets (two broadcast inputs at once) compile on first use, or under ``KSPEC_COMPILE=never`` take the
    plain backward and a second pass."""
    names = spec.backward()[0]
    if len(names) < 2:
        return []
    made = []
    for name in names:
        try:
            made.append(row_sum_spec(backward, (name,), type(backward)))
        except SpecError:
            return []  # the body reads loop state or raw arrays: no variant for any input
    return made


def with_backwards(specs: Iterable[Any]) -> list[Any]:
    """``specs`` with each spec's backward spec after it where it declares gradients, then one gradient sum per
    floating dtype those backwards write (what ``kspec build`` and ``kspec warm`` precompile)."""
    out: list[Any] = []
    sums: dict[str, None] = {}
    for spec in specs:
        out.append(spec)
        if getattr(spec, "grad", None) is None:
            continue
        backward = backward_spec(spec)
        out.append(backward)
        if spec.shared_gradients():  # the variant kspec.grad takes when those inputs are broadcast
            out.append(spec.backward_spec(shared=True))
        out += row_sum_variants(spec, backward)
        bindings: tuple[Mapping[str, str], ...] = tuple(backward.declared_instantiations()) or ({},)
        for binding in bindings:
            for param in backward.out_params:
                name = binding.get(param.type, param.type)
                canonical = None if dtypes.is_placeholder(name) else dtypes.canonical_name(name)
                if canonical is not None and dtypes.lookup(canonical).kind in "fc":
                    sums[canonical] = None
    return out + [grad_sum_spec(dtype) for dtype in sums]
