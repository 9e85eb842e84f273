"""Where a kernel's code comes from and how it sits on a device: precompiled build output as a lookup table,
the binary stores found by content, a specialization's module loaded on a device, and a loaded function's
attributes (registers, block limits).

A room of :mod:`kspec.kernels`: the rest of the layer uses it through the names below, each loading its module on
first access, so a process loads only what its calls use (one serving elementwise kernels never loads the reduction
planner); a room imports only the rooms below it (docs/architecture.md, "Rooms").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_getattr

if TYPE_CHECKING:  # what mypy reads (explicit re-exports); at run time each name loads its module on first access
    from ._function_attributes import (
        FUNCTION_ATTRIBUTES as FUNCTION_ATTRIBUTES, FunctionAttribute as FunctionAttribute,
        read_attribute as read_attribute, resident_blocks as resident_blocks, write_attribute as write_attribute,
    )
    from ._loaded import (
        LoadedKernel as LoadedKernel, cached_function as cached_function, interface_of as interface_of,
        loaded_kernel as loaded_kernel, module_loaded as module_loaded, on_variant_loaded as on_variant_loaded,
    )
    from ._precompiled import BinaryStore as BinaryStore, binary_store as binary_store
    from ._stores import (
        code_directories as code_directories, content_store as content_store, register_binaries as register_binaries,
        registered_binaries as registered_binaries,
    )

_LAZY = {
    "BinaryStore": "_precompiled",
    "FUNCTION_ATTRIBUTES": "_function_attributes",
    "FunctionAttribute": "_function_attributes",
    "LoadedKernel": "_loaded",
    "binary_store": "_precompiled",
    "cached_function": "_loaded",
    "code_directories": "_stores",
    "content_store": "_stores",
    "interface_of": "_loaded",
    "loaded_kernel": "_loaded",
    "module_loaded": "_loaded",
    "on_variant_loaded": "_loaded",
    "read_attribute": "_function_attributes",
    "register_binaries": "_stores",
    "registered_binaries": "_stores",
    "resident_blocks": "_function_attributes",
    "write_attribute": "_function_attributes",
}

__getattr__ = lazy_getattr(__name__, _LAZY, globals())

__all__ = sorted(_LAZY)
