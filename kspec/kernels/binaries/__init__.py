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

if TYPE_CHECKING:  # what mypy reads; at run time each name loads its module on first access
    from ._function_attributes import (
        FUNCTION_ATTRIBUTES, FunctionAttribute, read_attribute, resident_blocks, write_attribute,
    )
    from ._loaded import LoadedKernel, cached_function, interface_of, loaded_kernel, module_loaded
    from ._precompiled import BinaryStore, binary_store
    from ._stores import content_store, register_binaries, registered_binaries

_LAZY = {
    "BinaryStore": "_precompiled",
    "FUNCTION_ATTRIBUTES": "_function_attributes",
    "FunctionAttribute": "_function_attributes",
    "LoadedKernel": "_loaded",
    "binary_store": "_precompiled",
    "cached_function": "_loaded",
    "content_store": "_stores",
    "interface_of": "_loaded",
    "loaded_kernel": "_loaded",
    "module_loaded": "_loaded",
    "read_attribute": "_function_attributes",
    "register_binaries": "_stores",
    "registered_binaries": "_stores",
    "resident_blocks": "_function_attributes",
    "write_attribute": "_function_attributes",
}

__getattr__ = lazy_getattr(__name__, _LAZY, globals())

__all__ = ["BinaryStore", "FUNCTION_ATTRIBUTES", "FunctionAttribute", "LoadedKernel", "binary_store",
    "cached_function", "content_store", "interface_of", "loaded_kernel", "module_loaded", "read_attribute",
    "register_binaries", "registered_binaries", "resident_blocks", "write_attribute"]
