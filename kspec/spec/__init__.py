"""Kernel specs: validated data that describes elementwise, reduction and raw kernels.

This layer never touches CUDA: it parses, validates, loads and writes specs.
"""

from typing import Any

# Lazy exports: the plain-spec reader (``_plain``) serves generated modules without Pydantic; every other
# name loads the Pydantic models on first access.
_LAZY = {
    **dict.fromkeys(("SCHEMA_VERSION", "FileReport", "SpecLibrary", "dumps_json", "dumps_toml", "load_file",
                     "load_library", "read_file", "spec_files", "spec_to_data"), "_files"),
    **dict.fromkeys(("AnySpec", "ElementwiseSpec", "Instantiation", "KernelSpec", "ReductionSpec", "parse_spec"), "_models"),
    **dict.fromkeys(("KernelAttributes", "LaunchDefaults", "RawSpec"), "_raw"),
    "CPP_KEYWORDS": "_names",
    **dict.fromkeys(("Param", "format_params", "parse_params"), "_params"),
    **dict.fromkeys(("PlainParam", "PlainSpec", "plain_spec"), "_plain"),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kspec.spec' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "AnySpec",
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
    "format_params",
    "load_file",
    "load_library",
    "parse_params",
    "parse_spec",
    "read_file",
    "spec_files",
    "spec_to_data",
]
