"""Render: one specialization of a kernel spec -> CUDA C++ source holding every launch variant.

``specialize(spec, {"T": "float32"}, scalars=("y",))`` binds placeholders and marks scalar inputs;
``render(specialization)`` returns a :class:`RenderedModule`: the source (Jinja templates in
``templates/``), the NVRTC name expression of each launch variant, and each variant's parameter list as
data (:mod:`kspec.render._abi` documents the exact layouts and how the launcher picks a variant).
``render_raw(raw_spec)`` passes a raw module's source through. Never compiles, never launches.
"""

from ._abi import COLS_MAX_WARPS, EntryAbi, Field, Layout, Slot
from ._env import make_environment
from ._render import ModuleInterface, ReduceItem, RenderedModule, module_interface, raw_source, render, render_raw
from ._specialize import TEMPLATE_VERSION, Operand, ReduceType, Specialization, specialize
from ._variants import DYNAMIC_NDIM, INDEX_C_TYPES, MAX_NDIM, VECTOR_BYTES, VariantKey

__all__ = [
    "COLS_MAX_WARPS",
    "DYNAMIC_NDIM",
    "INDEX_C_TYPES",
    "MAX_NDIM",
    "TEMPLATE_VERSION",
    "VECTOR_BYTES",
    "EntryAbi",
    "Field",
    "Layout",
    "ModuleInterface",
    "Operand",
    "ReduceItem",
    "ReduceType",
    "RenderedModule",
    "Slot",
    "Specialization",
    "VariantKey",
    "make_environment",
    "module_interface",
    "raw_source",
    "render",
    "render_raw",
    "specialize",
]
