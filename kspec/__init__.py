"""kspec: CUDA kernels declared as data.

Importing kspec touches no CUDA driver and needs no GPU; the runtime initialises on the first launch.
"""

from __future__ import annotations

from ._errors import (
    CacheWarning,
    CompileError,
    DuplicateNameError,
    InstantiationError,
    InvalidNameError,
    KspecError,
    KspecNotImplementedError,
    KspecOverflowError,
    KspecTypeError,
    KspecValueError,
    LaunchError,
    NoDeviceError,
    NvrtcNotFoundError,
    ReservedNameError,
    SpecError,
    SpecErrorGroup,
    SpecFileError,
    UnknownDtypeError,
)

__version__ = "0.1.0"

__all__ = [
    "CacheWarning",
    "CompileError",
    "DuplicateNameError",
    "InstantiationError",
    "InvalidNameError",
    "KspecError",
    "KspecNotImplementedError",
    "KspecOverflowError",
    "KspecTypeError",
    "KspecValueError",
    "LaunchError",
    "NoDeviceError",
    "NvrtcNotFoundError",
    "ReservedNameError",
    "SpecError",
    "SpecErrorGroup",
    "SpecFileError",
    "UnknownDtypeError",
    "__version__",
]
