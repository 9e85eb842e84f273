"""Kernel specs: validated data that describes elementwise, reduction and raw kernels.

This layer never touches CUDA: it parses, validates, loads and writes specs.
"""

from ._files import (
    SCHEMA_VERSION,
    FileReport,
    SpecLibrary,
    dumps_json,
    dumps_toml,
    load_file,
    load_library,
    read_file,
    spec_files,
    spec_to_data,
)
from ._models import (
    AnySpec,
    ElementwiseSpec,
    Instantiation,
    KernelSpec,
    ReductionSpec,
    parse_spec,
)
from ._raw import KernelAttributes, LaunchDefaults, RawSpec
from ._names import CPP_KEYWORDS
from ._params import Param, format_params, parse_params

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
