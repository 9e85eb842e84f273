"""CuPy's function attributes of a RawKernel (``k.num_regs``, ``k.max_dynamic_shared_size_bytes = n``).

One table says which attributes there are, which ``CUfunction_attribute`` each reads and which may be set;
one descriptor serves them all. A read asks the driver on the current device (-1 for an attribute the
driver lacks); a write goes to every device the kernel is loaded on and is kept for the devices it loads on
later, and across pickling (RawKernel does that part). The descriptor knows its kernel only as an
:class:`AttributeOwner`, so this module does not import :mod:`..raw._module`, which imports it.
"""

from __future__ import annotations

from typing import Any, Protocol, overload

from ..._errors import LaunchError, about_kernel
from ...runtime import cuda_driver, describe_driver_error

# (property name, CUfunction_attribute member, settable), in CuPy's order
FUNCTION_ATTRIBUTES: tuple[tuple[str, str, bool], ...] = (
    ("max_threads_per_block", "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK", False),
    ("shared_size_bytes", "CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES", False),
    ("const_size_bytes", "CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES", False),
    ("local_size_bytes", "CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES", False),
    ("num_regs", "CU_FUNC_ATTRIBUTE_NUM_REGS", False),
    ("ptx_version", "CU_FUNC_ATTRIBUTE_PTX_VERSION", False),
    ("binary_version", "CU_FUNC_ATTRIBUTE_BINARY_VERSION", False),
    ("cache_mode_ca", "CU_FUNC_ATTRIBUTE_CACHE_MODE_CA", False),
    ("max_dynamic_shared_size_bytes", "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", True),
    ("preferred_shared_memory_carveout", "CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT", True),
)
_ENUM_NAMES = {name: enum for name, enum, _settable in FUNCTION_ATTRIBUTES}
_SETTABLE = {name for name, _enum, settable in FUNCTION_ATTRIBUTES if settable}


def read_attribute(fn: Any, attr: str) -> int:
    """The attribute ``attr`` (a property name of the table) of a loaded function; -1 where the driver
    lacks it or cannot report it."""
    cu = cuda_driver()
    enum = getattr(cu.CUfunction_attribute, _ENUM_NAMES[attr], None)
    if enum is None:
        return -1
    err, value = cu.cuFuncGetAttribute(enum, fn)
    return -1 if err else int(value)


def resident_blocks(fn: Any, threads: int) -> int:
    """How many blocks of ``threads`` threads (no dynamic shared memory) of a loaded function one SM holds at
    once; 0 where the driver cannot tell."""
    err, blocks = cuda_driver().cuOccupancyMaxActiveBlocksPerMultiprocessor(fn, threads, 0)
    return 0 if err else int(blocks)


def write_attribute(fn: Any, attr: str, value: int, kernel: str) -> None:
    """Set a settable attribute on a loaded function; a LaunchError naming the kernel when the driver refuses."""
    cu = cuda_driver()
    enum = getattr(cu.CUfunction_attribute, _ENUM_NAMES[attr])
    (err,) = cu.cuFuncSetAttribute(fn, enum, value)
    if err:
        raise LaunchError(about_kernel(kernel, f"setting {attr} = {value} failed: {describe_driver_error(err)}"))


class AttributeOwner(Protocol):
    """What :class:`FunctionAttribute` uses of a kernel (RawKernel is one)."""

    def _function_here(self) -> Any:
        """The kernel's loaded function on the current device."""
        ...

    def _set_attribute(self, attr: str, value: int) -> None:
        """Set the settable attribute ``attr`` wherever the kernel is loaded, and for later loads."""
        ...


class FunctionAttribute:
    """A RawKernel property backed by one row of FUNCTION_ATTRIBUTES (the row named like the property)."""

    name: str
    settable: bool

    def __set_name__(self, owner: type, name: str) -> None:
        if name not in _ENUM_NAMES:
            raise TypeError(f"{owner.__name__}.{name}: not a function attribute of FUNCTION_ATTRIBUTES")
        self.name = name
        self.settable = name in _SETTABLE

    @overload
    def __get__(self, kernel: None, owner: type | None = None) -> FunctionAttribute: ...

    @overload
    def __get__(self, kernel: AttributeOwner, owner: type | None = None) -> int: ...

    def __get__(self, kernel: AttributeOwner | None, owner: type | None = None) -> FunctionAttribute | int:
        if kernel is None:
            return self
        return read_attribute(kernel._function_here(), self.name)

    def __set__(self, kernel: AttributeOwner, value: int) -> None:
        if not self.settable:  # read-only, as in CuPy
            raise AttributeError(f"property {self.name!r} of 'RawKernel' object has no setter")
        kernel._set_attribute(self.name, value)
