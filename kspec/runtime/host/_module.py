"""A CPU-device module: a shared object from the host C++ compiler, loaded with ctypes, and its entries.

What the host driver (kspec/runtime/host/_driver.py) hands out as modules and functions: the entries take
CUDA's ``kernelParams`` plus a launch and a fault record (templates/include_host/kspec_host/entry.h); each
exports its parameter sizes (``cuFuncGetParamInfo``), the module the list of its entries, and
``__device__`` variables keep their names and ELF sizes (``get_global``).
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

from ..._binfmt import host_symbol
from ._signals import guard_pointers

FUNCTION_ATTRIBUTES = {
    "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK": 1024, "CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES": 0,
    "CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES": 0, "CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES": 0,
    "CU_FUNC_ATTRIBUTE_NUM_REGS": 0, "CU_FUNC_ATTRIBUTE_PTX_VERSION": 0, "CU_FUNC_ATTRIBUTE_BINARY_VERSION": 0,
    "CU_FUNC_ATTRIBUTE_CACHE_MODE_CA": 0, "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES": 48 * 1024,
    "CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT": -1,
}  # fmt: skip


class _Launch(ctypes.Structure):
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared_bytes", ctypes.c_ulonglong),
                ("threads", ctypes.c_int), ("guarded", ctypes.c_void_p), ("describe", ctypes.c_void_p)]  # fmt: skip


class _Fault(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("message", ctypes.c_char * 2048), ("signal", ctypes.c_int),
                ("address", ctypes.c_ulonglong)]  # fmt: skip


_ENTRY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_Launch), ctypes.POINTER(_Fault))


class HostModule:
    """A host shared object loaded with ctypes; kept loaded for the process (as CUDA modules are)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lib = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)

    def entries(self) -> list[str]:
        try:
            names = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(self.lib, "kspec_host_entries")))
        except ValueError:
            return []
        return [n for n in names.decode().split("\n") if n]

    def function(self, name: str) -> HostFunction | None:
        """The entry of name expression ``name`` (the host module's lowered names are the expressions)."""
        try:
            entry = _ENTRY((host_symbol(name), self.lib))
        except AttributeError:
            return None
        return HostFunction(self, name, entry)

    def global_symbol(self, name: str) -> tuple[int, int] | None:
        """(address, size in bytes) of a ``__device__`` / ``__constant__`` variable, or None."""
        try:
            address = ctypes.addressof(ctypes.c_char.in_dll(self.lib, name))
        except ValueError:
            return None
        return address, _symbol_size(address)


class HostFunction:
    """One entry of a host module: the callable and the attributes CUDA would report for it."""

    def __init__(self, module: HostModule, name: str, entry: Any) -> None:
        self.module, self.name, self.entry = module, name, entry
        self.attributes = dict(FUNCTION_ATTRIBUTES)
        try:
            sizes = ctypes.POINTER(ctypes.c_ulonglong).in_dll(module.lib, host_symbol(name, "sizes"))
            self.param_sizes: tuple[int, ...] | None = tuple(sizes[1 : 1 + sizes[0]])
        except ValueError:
            self.param_sizes = None

    def launch(self, grid: tuple[int, int, int], block: tuple[int, int, int], shared: int, threads: int,
               params: int) -> tuple[int, str, int]:  # fmt: skip
        """Run the entry (the GIL is released meanwhile): (0, "", 0) or (fault code, the fault's message, the
        faulting address of a hardware fault, else 0)."""
        guarded, describe = guard_pointers()
        launch = _Launch((ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block), int(shared), threads, guarded, describe)
        fault = _Fault()
        code = self.entry(params, ctypes.byref(launch), ctypes.byref(fault))
        return (code, fault.message.decode(errors="replace"), int(fault.address)) if code else (0, "", 0)

    def __int__(self) -> int:
        return ctypes.cast(self.entry, ctypes.c_void_p).value or 0


class _Dlinfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p), ("dli_sname", ctypes.c_char_p),
                ("dli_saddr", ctypes.c_void_p)]  # fmt: skip


class _Elf64Sym(ctypes.Structure):
    _fields_ = [("st_name", ctypes.c_uint32), ("st_info", ctypes.c_ubyte), ("st_other", ctypes.c_ubyte),
                ("st_shndx", ctypes.c_uint16), ("st_value", ctypes.c_uint64), ("st_size", ctypes.c_uint64)]  # fmt: skip


def _symbol_size(address: int) -> int:
    """The ELF size of the symbol at ``address`` (dladdr1 with RTLD_DL_SYMENT), 0 when unknown."""
    try:
        libc = ctypes.CDLL(None)
        dladdr1 = libc.dladdr1
    except (OSError, AttributeError):
        return 0
    info, sym = _Dlinfo(), ctypes.POINTER(_Elf64Sym)()
    dladdr1.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Dlinfo), ctypes.POINTER(ctypes.POINTER(_Elf64Sym)), ctypes.c_int]
    if not dladdr1(address, ctypes.byref(info), ctypes.byref(sym), 1) or not sym:  # 1: RTLD_DL_SYMENT
        return 0
    return int(sym.contents.st_size)
