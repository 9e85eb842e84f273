"""The CPU device's driver: the part of the CUDA driver API kspec calls, answered on the host.

kspec's runtime talks to "the driver" (``cuda.bindings.driver`` on a GPU); on the CPU device it gets this
object instead, so streams, memory, DeviceArray, module loading and every launcher work unchanged. Memory is
host memory (64-byte aligned), streams and events are synchronous no-ops, a module is a shared object the
host compiler built (kspec/compiler), loaded with ctypes, and a launch calls its ``kspec_entry_<hash>``
function with CUDA's ``kernelParams`` (templates/include_host/kspec_host/entry.h). What a CPU cannot do
(textures, CUDA arrays) raises :class:`kspec.HostUnsupportedError` naming the call.
"""

from __future__ import annotations

import atexit
import ctypes
import enum
import os
import threading
from types import SimpleNamespace
from typing import Any

import numpy as np

from ..._binfmt import EM_CUDA
from ..._digest import sha256_hex
from ..._errors import HostUnsupportedError, LaunchError
from .._device_kind import HOST_DEVICE_ID
from . import _checked
from ._checked import Region, host_memory, take_noted
from ._graph import HostCapture, HostGraph, HostGraphExec
from ._fault import run_launch
from ._module import HostFunction, HostModule


class CUresult(enum.IntEnum):
    """The CUresult values kspec's runtime compares against (same numbers as CUDA's)."""

    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_OUT_OF_MEMORY = 2
    CUDA_ERROR_INVALID_IMAGE = 200
    CUDA_ERROR_INVALID_CONTEXT = 201
    CUDA_ERROR_NOT_FOUND = 500
    CUDA_ERROR_NOT_SUPPORTED = 801


class _Names:
    """An enum stand-in whose every attribute is its own name (device and function attributes are looked up
    by name in the tables below)."""

    def __getattr__(self, name: str) -> str:
        if name.startswith("__"):
            raise AttributeError(name)
        return name


def worker_threads() -> int:
    """Host threads a launch may use: ``KSPEC_CPU_THREADS``, else every CPU this process may run on."""
    text = os.environ.get("KSPEC_CPU_THREADS", "").strip()
    if text.isdigit() and int(text) > 0:
        return int(text)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


# CUDA's limits, so that plans and checks made for a GPU hold: 1024 threads per block, 48 KiB of static
# shared memory, warps of 32. "Multiprocessors" are the host threads.
_DEVICE_ATTRIBUTES = {
    "MAX_THREADS_PER_BLOCK": 1024, "MAX_BLOCK_DIM_X": 1024, "MAX_BLOCK_DIM_Y": 1024, "MAX_BLOCK_DIM_Z": 64,
    "MAX_GRID_DIM_X": 2**31 - 1, "MAX_GRID_DIM_Y": 65535, "MAX_GRID_DIM_Z": 65535, "WARP_SIZE": 32,
    "MAX_SHARED_MEMORY_PER_BLOCK": 48 * 1024, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 227 * 1024,
    "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": 228 * 1024, "MAX_THREADS_PER_MULTIPROCESSOR": 2048,
    "MAX_REGISTERS_PER_BLOCK": 65536, "COMPUTE_CAPABILITY_MAJOR": 9, "COMPUTE_CAPABILITY_MINOR": 0,
    "COOPERATIVE_LAUNCH": 1, "MEMORY_POOLS_SUPPORTED": 1, "UNIFIED_ADDRESSING": 1, "L2_CACHE_SIZE": 1 << 20,
    "TOTAL_CONSTANT_MEMORY": 64 * 1024, "CLOCK_RATE": 1_000_000, "INTEGRATED": 1, "CAN_MAP_HOST_MEMORY": 1,
}  # fmt: skip

class HostDriver:
    """What kspec calls of ``cuda.bindings.driver``, for the CPU device (see the module docstring)."""

    CUresult = CUresult
    CUdevice_attribute = CUfunction_attribute = CUpointer_attribute = CUmemPool_attribute = _Names()
    CUstream_flags = SimpleNamespace(CU_STREAM_DEFAULT=0, CU_STREAM_NON_BLOCKING=1)
    CUevent_flags = SimpleNamespace(CU_EVENT_DISABLE_TIMING=2)
    CUmemAllocationType = SimpleNamespace(CU_MEM_ALLOCATION_TYPE_PINNED=1)
    CUmemAllocationHandleType = SimpleNamespace(CU_MEM_HANDLE_TYPE_NONE=0)
    CUmemLocationType = SimpleNamespace(CU_MEM_LOCATION_TYPE_DEVICE=1)
    CUstreamCaptureMode = int  # the modes differ in what other threads may do; the host refuses nothing more

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._memory: dict[int, tuple[np.ndarray | Region, int]] = {}  # pointer -> (what holds it, size)
        self._in_use = 0
        self._handles = 0
        self._dir: str | None = None
        self.threads = worker_threads()
        self._capture = HostCapture(self._free_now)  # graph capture: kspec/runtime/host/_graph.py

    # -- handles the runtime passes around --------------------------------------------------------------

    @staticmethod
    def CUstream(handle: Any = 0) -> int:
        return int(handle or 0)

    @staticmethod
    def CUcontext(handle: Any = 0) -> int:
        return int(handle or 0)

    @staticmethod
    def cuuint64_t(value: int) -> int:
        return int(value)

    @staticmethod
    def CUmemPoolProps() -> SimpleNamespace:
        return SimpleNamespace(allocType=0, handleTypes=0, location=SimpleNamespace(type=0, id=0))

    def _new_handle(self) -> int:
        with self._lock:
            self._handles += 1
            return self._handles

    def __getattr__(self, name: str) -> Any:
        if name.startswith("cu") or name.startswith("CU"):
            raise HostUnsupportedError(
                f"the CPU device cannot do what {name} does (CUDA arrays, textures and surfaces need a GPU); "
                "run this on a GPU"
            )
        raise AttributeError(name)

    # -- device and context ------------------------------------------------------------------------------

    def cuInit(self, flags: int) -> tuple[int]:
        return (0,)

    def cuDriverGetVersion(self) -> tuple[int, int]:
        return (0, 13000)

    def cuDeviceGetCount(self) -> tuple[int, int]:
        return (0, 1)

    def cuDeviceGetAttribute(self, attr: str, device: int) -> tuple[int, int]:
        name = str(attr).removeprefix("CU_DEVICE_ATTRIBUTE_")
        if name == "MULTIPROCESSOR_COUNT":
            return (0, self.threads)
        return (0, _DEVICE_ATTRIBUTES.get(name, 0))

    def cuDeviceGetName(self, length: int, device: int) -> tuple[int, bytes]:
        return (0, f"CPU (kspec host device, {self.threads} threads)".encode()[: length - 1])

    def cuDevicePrimaryCtxRetain(self, device: int) -> tuple[int, int]:
        return (0, 1)

    def cuCtxGetCurrent(self) -> tuple[int, int]:
        return (0, 1)

    def cuCtxSetCurrent(self, ctx: Any) -> tuple[int]:
        return (0,)

    def cuCtxGetDevice(self) -> tuple[int, int]:
        return (0, HOST_DEVICE_ID)

    def cuCtxSynchronize(self) -> tuple[int]:
        return (0,)

    # -- streams and events: the CPU device runs every launch to completion before returning ----------------

    def cuStreamCreateWithPriority(self, flags: int, priority: int) -> tuple[int, int]:
        return (0, self._new_handle())

    def cuStreamSynchronize(self, stream: Any) -> tuple[int]:
        return self._capture.synchronize(int(stream or 0)) if self._capture.capturing else (0,)

    def cuStreamDestroy(self, stream: Any) -> tuple[int]:
        return (0,)

    def cuEventCreate(self, flags: int) -> tuple[int, int]:
        return (0, self._new_handle())

    def cuEventRecord(self, event: Any, stream: Any) -> tuple[int]:
        return (0,)

    def cuStreamWaitEvent(self, stream: Any, event: Any, flags: int) -> tuple[int]:
        return (0,)

    def cuEventDestroy(self, event: Any) -> tuple[int]:
        return (0,)

    # -- memory -------------------------------------------------------------------------------------------

    def cuMemAlloc(self, nbytes: int) -> tuple[int, int]:
        holder, ptr = host_memory(int(nbytes))  # checked mode: against a guard page
        with self._lock:
            self._memory[ptr] = (holder, int(nbytes))
            self._in_use += int(nbytes)
        return (0, ptr)

    def _buffer_size(self, ptr: int) -> int | None:
        """The size of the allocation starting at ``ptr`` (cuMemAlloc's), or None."""
        return self._memory.get(ptr, (None, None))[1]

    def _own_region(self, ptr: int) -> Region | None:
        entry = self._memory.get(ptr)
        return entry[0] if entry is not None and isinstance(entry[0], Region) else None

    def cuMemFree(self, ptr: Any) -> tuple[int]:
        return self._free_now(int(ptr))

    def _free_now(self, ptr: int) -> tuple[int]:
        with self._lock:
            entry = self._memory.pop(int(ptr), None)
            if entry is not None:
                self._in_use -= entry[1]
        if entry is not None and isinstance(entry[0], Region):
            entry[0].close()  # unmapped: a later access through a stale pointer faults
        return (0,) if entry is not None else (int(CUresult.CUDA_ERROR_INVALID_VALUE),)

    def cuMemAllocFromPoolAsync(self, nbytes: int, pool: Any, stream: Any) -> tuple[int, int]:
        result = self.cuMemAlloc(nbytes)
        if self._capture.capturing:  # on a capturing stream: the graph's memory
            self._capture.allocated(int(stream or 0), result[1])
        return result

    def cuMemFreeAsync(self, ptr: Any, stream: Any) -> tuple[int]:
        taken = self._capture.free(int(ptr), int(stream or 0))  # memory a graph holds is freed with the graph
        return taken if taken is not None else self._free_now(int(ptr))

    def cuMemPoolCreate(self, props: Any) -> tuple[int, int]:
        return (0, self._new_handle())

    def cuMemPoolSetAttribute(self, pool: Any, attr: Any, value: Any) -> tuple[int]:
        return (0,)

    def cuMemPoolGetAttribute(self, pool: Any, attr: Any) -> tuple[int, int]:
        return (0, self._in_use)

    def cuMemPoolTrimTo(self, pool: Any, keep: int) -> tuple[int]:
        return (0,)

    def _copy(self, dst: Any, src: Any, nbytes: int) -> tuple[int]:
        if nbytes:
            ctypes.memmove(int(dst), int(src), int(nbytes))
        return (0,)

    def _copy_on(self, dst: Any, src: Any, nbytes: int, stream: Any) -> tuple[int]:
        graph = self._capture.capturing.get(int(stream or 0)) if self._capture.capturing else None
        if graph is not None:
            return self._capture.record(graph, "copy", int(dst), int(src), int(nbytes))
        return self._copy(dst, src, nbytes)

    cuMemcpyHtoDAsync = cuMemcpyDtoHAsync = cuMemcpyDtoDAsync = _copy_on

    def cuMemsetD8Async(self, ptr: Any, value: int, nbytes: int, stream: Any) -> tuple[int]:
        graph = self._capture.capturing.get(int(stream or 0)) if self._capture.capturing else None
        if graph is not None:
            return self._capture.record(graph, "memset", int(ptr), int(value), int(nbytes))
        if nbytes:
            ctypes.memset(int(ptr), int(value), int(nbytes))
        return (0,)

    def cuPointerGetAttribute(self, attr: Any, ptr: Any) -> tuple[int, int]:
        return (0, HOST_DEVICE_ID)

    # -- modules and functions ------------------------------------------------------------------------------

    def cuModuleLoadData(self, image: bytes) -> tuple[int, HostModule | None]:
        data = bytes(image[:20]) if isinstance(image, (bytes, bytearray)) else b""
        if data[:4] != b"\x7fELF" or int.from_bytes(data[18:20], "little") == EM_CUDA:
            raise HostUnsupportedError(
                "the CPU device cannot load a CUBIN, PTX or fatbin (GPU machine code); give kspec the CUDA C++ "
                "source (RawModule(code=...), or a .cu file) and it compiles it for the host"
            )
        digest = sha256_hex(image)[:24]
        path = os.path.join(self._directory(), f"kspec-{digest}.so")
        if not os.path.exists(path):
            partial = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
            with open(partial, "wb") as f:
                f.write(image)
            os.replace(partial, path)
        return (0, HostModule(path))

    def _directory(self) -> str:
        with self._lock:
            if self._dir is None:
                import shutil  # here: a process loads its first module once
                import tempfile

                self._dir = tempfile.mkdtemp(prefix="kspec-host-")
                atexit.register(shutil.rmtree, self._dir, True)  # the loaded objects stay mapped until exit
            return self._dir

    def cuModuleGetFunction(self, module: HostModule, name: bytes) -> tuple[int, HostFunction | None]:
        fn = module.function(name.decode() if isinstance(name, bytes) else str(name))
        return (0, fn) if fn is not None else (int(CUresult.CUDA_ERROR_NOT_FOUND), None)

    def cuModuleGetGlobal(self, module: HostModule, name: bytes) -> tuple[int, int, int]:
        found = module.global_symbol(name.decode() if isinstance(name, bytes) else str(name))
        return (0, *found) if found is not None else (int(CUresult.CUDA_ERROR_NOT_FOUND), 0, 0)

    def cuModuleGetFunctionCount(self, module: HostModule) -> tuple[int, int]:
        return (0, len(module.entries()))

    def cuModuleEnumerateFunctions(self, count: int, module: HostModule) -> tuple[int, list[Any]]:
        return (0, [self.cuModuleGetFunction(module, n.encode())[1] for n in module.entries()[:count]])

    def cuFuncGetName(self, fn: HostFunction) -> tuple[int, bytes]:
        return (0, fn.name.encode())

    def cuFuncGetAttribute(self, attr: Any, fn: HostFunction) -> tuple[int, int]:
        return (0, fn.attributes.get(str(attr), 0))

    def cuFuncGetParamInfo(self, fn: HostFunction, index: int) -> tuple[int, int, int]:
        sizes = fn.param_sizes
        if sizes is None:
            return (int(CUresult.CUDA_ERROR_NOT_SUPPORTED), 0, 0)
        if not 0 <= index < len(sizes):
            return (int(CUresult.CUDA_ERROR_INVALID_VALUE), 0, 0)
        return (0, 0, sizes[index])

    def cuFuncSetAttribute(self, fn: HostFunction, attr: Any, value: int) -> tuple[int]:
        fn.attributes[str(attr)] = int(value)
        return (0,)

    def cuOccupancyMaxActiveBlocksPerMultiprocessor(self, fn: Any, threads: int, shared: int) -> tuple[int, int]:
        return (0, max(1, 2048 // max(1, int(threads))))

    # -- launches -----------------------------------------------------------------------------------------

    def cuLaunchKernel(self, fn: HostFunction, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, shared: int,
                       stream: Any, params: Any, extra: Any) -> tuple[int]:  # fmt: skip
        if not isinstance(fn, HostFunction):
            raise LaunchError(f"the CPU device cannot launch {fn!r}: not a function of a host module")
        grid, block = (int(gx), int(gy), int(gz)), (int(bx), int(by), int(bz))
        attributes = fn.attributes
        if (min(grid + block) < 1 or block[0] * block[1] * block[2] > attributes["CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK"]
                or int(shared) > attributes["CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES"]):  # as a GPU refuses them
            return (int(CUresult.CUDA_ERROR_INVALID_VALUE),)
        address = (params.value or 0) if isinstance(params, ctypes.c_void_p) else int(params or 0)
        arrays = take_noted() if _checked.state[0] else ()  # NumPy arguments a checked launch stages
        if self._capture.capturing:  # a capturing stream records the launch (its parameter values copied)
            graph = self._capture.capturing.get(int(stream or 0))
            if graph is not None:
                return self._capture.record_launch(graph, fn, grid, block, int(shared), address)
        run_launch(fn, grid, block, int(shared), self.threads, address, arrays, self._buffer_size, self._own_region)
        return (0,)

    def cuLaunchCooperativeKernel(self, fn: HostFunction, gx: int, gy: int, gz: int, bx: int, by: int, bz: int,
                                  shared: int, stream: Any, params: Any) -> tuple[int]:  # fmt: skip
        """CUDA's signature (no ``extra``); on the host every launch runs its blocks to the end together."""
        return self.cuLaunchKernel(fn, gx, gy, gz, bx, by, bz, shared, stream, params, None)

    # -- graph capture (kspec/runtime/host/_graph.py) ----------------------------------------------------------

    def cuStreamBeginCapture(self, stream: Any, mode: Any) -> tuple[int]:
        return self._capture.begin(int(stream or 0), mode)

    def cuStreamEndCapture(self, stream: Any) -> tuple[int, HostGraph | None]:
        return self._capture.end(int(stream or 0))

    def cuStreamIsCapturing(self, stream: Any) -> tuple[int, int]:
        return self._capture.status(int(stream or 0))

    def cuGraphInstantiate(self, graph: HostGraph, flags: int) -> tuple[int, HostGraphExec]:
        return self._capture.instantiate(graph)

    def cuGraphExecUpdate(self, exec_: HostGraphExec, graph: HostGraph) -> tuple[int, Any]:
        return self._capture.update(exec_, graph)

    def cuGraphLaunch(self, exec_: HostGraphExec, stream: Any) -> tuple[int]:
        graph = self._capture.capturing.get(int(stream or 0)) if self._capture.capturing else None
        if graph is not None:  # launched inside another capture: replayed with it
            return self._capture.record(graph, "graph", exec_)
        return self._replay(exec_)

    def _replay(self, exec_: HostGraphExec) -> tuple[int]:
        def memset(ptr: int, value: int, nbytes: int) -> tuple[int]:
            return self.cuMemsetD8Async(ptr, value, nbytes, 0)

        return self._capture.replay(exec_, self.cuLaunchKernel, self._copy, memset, self._replay)

    def cuGraphExecDestroy(self, exec_: HostGraphExec) -> tuple[int]:
        return self._capture.destroy(exec_)

    def cuGraphDestroy(self, graph: HostGraph) -> tuple[int]:
        return self._capture.destroy(graph)


_host: HostDriver | None = None
_host_lock = threading.Lock()


def host_driver() -> HostDriver:
    """The process's host driver, made on first use."""
    global _host
    if _host is None:
        with _host_lock:
            if _host is None:
                _host = HostDriver()
    return _host
