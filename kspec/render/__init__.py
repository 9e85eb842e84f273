"""Render: one specialization of a kernel spec -> CUDA C++ source holding every launch variant.

``specialize(spec, {"T": "float32"}, scalars=("y",))`` binds placeholders and marks scalar inputs;
``render(specialization)`` returns a :class:`RenderedModule`: the source (Jinja templates in
``templates/``), the NVRTC name expression of each launch variant, and each variant's parameter list as
data (:mod:`kspec.render._abi` documents the entry points and how the launcher picks a variant,
:mod:`kspec.render._layout` the exact layouts).
``render_host(specialization)`` renders the same module for kspec's CPU device (host C++ from
``templates/host/``: the same entries, name expressions and ABI). ``render_raw(raw_spec)`` passes a raw
module's source through. Never compiles, never launches.
"""

from .._lazy import lazy_getattr

# Lazy exports: the serving path (kspec/kernels) needs variants, the ABI and the launch interface, never
# Jinja (``_env``, ``_render``) or the spec models; each name loads its module on first access.
_LAZY = {
    "COLS_MAX_WARPS": "_abi", "COLS_SHORT_ROWS": "_abi", "COLS_WARP_LOADS": "_abi", "COLS_WIDE_ACC": "_abi", "COLS_WIDE_WARPS": "_abi",
    "COLS_MIN_BLOCKS": "_abi", "COLS_ONE_DIM_BLOCKS": "_abi", "COLS_ONE_DIM_THREADS": "_abi", "COLS_THREADS": "_abi",
    "FINAL_OWN_CHUNKS": "_abi", "FINAL_OWN_OUTPUTS": "_abi", "SLAB_ACC_BYTES": "_abi", "SLAB_BLOCK": "_abi", "SLAB_MIN_BLOCKS": "_abi",
    "EntryAbi": "_abi", "Field": "_layout", "Layout": "_layout", "Slot": "_abi",
    "make_environment": "_env", "needs_from_text": "_analysis", "needs_of_raw_source": "_analysis",
    "ModuleInterface": "_interface", "ReduceItem": "_interface", "module_interface": "_interface",
    "interface_from_data": "_interface", "interface_to_data": "_interface",
    "RenderedModule": "_render", "raw_source": "_render", "render": "_render", "render_host": "_render",
    "render_raw": "_render",
    "TEMPLATE_VERSION": "_content", "Operand": "_specialize", "ReduceType": "_specialize",
    "Specialization": "_specialize", "specialize": "_specialize", "specialization_key": "_specialize",
    "raw_module_key": "_content", "content_data": "_content",
    "DYNAMIC_NDIM": "_variants", "INDEX_C_TYPES": "_variants", "MAX_NDIM": "_variants",
    "VECTOR_BYTES": "_variants", "VariantKey": "_variants", "TILED_VARIANTS": "_variants", "NARROW_TILE": "_variants",
    "tiled_variant": "_variants", "tiled_layout": "_variants", "stacked_planes": "_variants", "module_variant": "_variants",
    "stand_in": "_variants",
}


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


__all__ = [
    "COLS_MAX_WARPS",
    "COLS_MIN_BLOCKS",
    "COLS_ONE_DIM_BLOCKS",
    "COLS_ONE_DIM_THREADS",
    "COLS_SHORT_ROWS",
    "COLS_WARP_LOADS",
    "COLS_THREADS",
    "DYNAMIC_NDIM",
    "FINAL_OWN_CHUNKS",
    "FINAL_OWN_OUTPUTS",
    "INDEX_C_TYPES",
    "MAX_NDIM",
    "NARROW_TILE",
    "SLAB_ACC_BYTES",
    "SLAB_BLOCK",
    "SLAB_MIN_BLOCKS",
    "TEMPLATE_VERSION",
    "TILED_VARIANTS",
    "VECTOR_BYTES",
    "EntryAbi",
    "Field",
    "Layout",
    "ModuleInterface",
    "Operand",
    "ReduceItem",
    "ReduceType",
    "interface_from_data",
    "interface_to_data",
    "RenderedModule",
    "Slot",
    "Specialization",
    "content_data",
    "raw_module_key",
    "VariantKey",
    "make_environment",
    "module_interface",
    "module_variant",
    "raw_source",
    "render",
    "render_host",
    "render_raw",
    "specialize",
    "specialization_key",
    "stacked_planes",
    "stand_in",
    "tiled_layout",
    "tiled_variant",
]
