"""Kernel specs: validated data that describes elementwise, reduction and raw kernels.

This layer never touches CUDA: it parses, validates, loads and writes specs.
"""

from .._lazy import lazy_getattr

# Lazy exports: the plain-spec reader (``_plain``) serves generated modules and the constructors' plain path
# (``_ctor``, checked by ``_rules``) serves CuPy-style constructor calls, both without Pydantic; every other
# name loads the Pydantic models on first access.
_LAZY = {
    **dict.fromkeys(("SCHEMA_VERSION", "FileReport", "SpecLibrary", "dumps_json", "dumps_toml", "load_file",
                     "load_library", "read_file", "spec_files", "spec_to_data"), "_files"),
    **dict.fromkeys(("AnySpec", "ElementwiseSpec", "Instantiation", "KernelSpec", "ReductionSpec", "parse_spec"), "_models"),
    **dict.fromkeys(("KernelAttributes", "LaunchDefaults", "RawSpec"), "_raw"),
    "CPP_KEYWORDS": "_names",
    **dict.fromkeys(("layouts_of", "parse_specializations", "parse_variant", "variant_text", "variants_of",
                     "VARIANT_ENTRIES", "VARIANT_INDEX_TYPES"), "_specializations"),
    "find_spec_files": "_scan",
    **dict.fromkeys(("row_sum_arrays", "row_sum_inputs", "row_sum_outputs"), "_row_sums"),
    "backward_spec": "_backward", "outputs_read": "_backward", "with_backwards": "_grad_plan", "grad_sum_spec": "_grad_plan",
    **dict.fromkeys(("Param", "format_params", "parse_params"), "_params"),
    **dict.fromkeys(("PlainParam", "PlainSpec", "plain_spec"), "_plain"),
    # for kspec.kernels (not in __all__): a constructor's fields checked without Pydantic
    "plain_from_fields": "_ctor",
}


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


__all__ = [
    "AnySpec",
    "backward_spec",
    "grad_sum_spec",
    "with_backwards",
    "CPP_KEYWORDS",
    "ElementwiseSpec",
    "FileReport",
    "Instantiation",
    "KernelAttributes",
    "KernelSpec",
    "LaunchDefaults",
    "Param",
    "PlainParam",
    "PlainSpec",
    "plain_spec",
    "RawSpec",
    "ReductionSpec",
    "SCHEMA_VERSION",
    "SpecLibrary",
    "dumps_json",
    "dumps_toml",
    "find_spec_files",
    "layouts_of",
    "parse_specializations",
    "parse_variant",
    "variant_text",
    "variants_of",
    "VARIANT_ENTRIES",
    "VARIANT_INDEX_TYPES",
    "format_params",
    "load_file",
    "load_library",
    "parse_params",
    "parse_spec",
    "read_file",
    "spec_files",
    "spec_to_data",
]
