"""The process's memo of specializations of elementwise and reduction specs, by spec digest, binding, scalar inputs
and raw layouts: one :class:`kspec.render.Specialization` each, however many kernel objects share the spec. A
specialization made for the first time is what ``kspec capture`` records (kspec/kernels/records/_observers.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...render import Specialization, specialize  # lazy: no Jinja
from ._observers import notify, observers

if TYPE_CHECKING:  # the serving path never imports the spec models
    from ...spec import ElementwiseSpec, ReductionSpec
    from ..planning import Bound

RawLayouts = tuple[tuple[str, tuple[int, bool]], ...]  # raw parameter -> (ndim, c_contiguous), in order
_specializations: dict[tuple[str, tuple[tuple[str, str], ...], frozenset[str], RawLayouts], Specialization] = {}


def specialization_of(spec: ElementwiseSpec | ReductionSpec, spec_key: str, types: dict[str, str],
                      scalars: frozenset[str], raw_layouts: RawLayouts = (), described: bool = False) -> Specialization:  # fmt: skip
    """The memoised Specialization of ``spec`` (identified by ``spec_key``) for a binding. ``described``: the
    kernel is a spec file's, served by binaries of its own (a generated module's): kspec capture leaves it out."""
    key = (spec_key, tuple(types.items()), scalars, raw_layouts)
    found = _specializations.get(key)
    if found is None:
        found = _specializations[key] = specialize(spec, types, scalars=scalars, raw_layouts=dict(raw_layouts))
        if observers and not described:  # kspec capture
            notify("specialized", spec, spec_key, dict(types), scalars, raw_layouts, found.key)
    return found


def raw_layouts_of(bound: Bound) -> RawLayouts:
    """Each raw array argument's (ndim, C-contiguous), as CuPy keys its kernels (``CArray<T, ndim, c_contiguous>``)."""
    return tuple((name, (len(a.info.shape), bool(a.info.is_c_contiguous))) for name, a in bound.arrays.items() if a.param.raw)
