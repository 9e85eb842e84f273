"""Launchers: everything about a raw kernel's launch that does not depend on the argument *values*, done once.

For each kernel, each calling thread and each *signature* (the tuple of argument types), a packer function
is generated once (:mod:`._packer`). It holds a pre-allocated parameter buffer (one 8- or 16-byte slot per
argument) and a ``void*[]`` array whose entries point at the slots. A call then only reads each array's
pointer (through the cheapest attribute its library offers), writes all values with one
``struct.pack_into``, and passes the int address of the pointer array to ``cuLaunchKernel``: the bindings
take an int as-is, which skips their generic per-argument conversion path.

Per-thread packers: the bindings release the GIL inside ``cuLaunchKernel``, so two threads must not share a
parameter buffer. What the arguments become is :mod:`._launch_args`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from .._lazy import imports_settled, settle_imports
from .._errors import KspecTypeError, KspecValueError, LaunchError, about_kernel, kernel_label
from . import _device_kind, _driver
from ._device import Device
from ._launch import CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_OUT_OF_RESOURCES
from ._launch_args import _Arg, check_param_sizes, classify_args
from ._module import kernel_param_sizes
from ._packer import generate_packer
from ._stream import refuse_while_capturing


class _PerThread(threading.local):
    """A thread's packers (signature -> packer). ``threading.local`` runs ``__init__`` in each thread."""

    def __init__(self) -> None:
        self.table: dict[tuple[type, ...], Callable[..., None]] = {}


class Launcher:
    """Launch machinery of one kernel: per-device functions, per-thread per-signature packers.

    ``resolve(device_id)`` returns the kernel's ``CUfunction`` on that device (loading and compiling as
    needed); it is called once per device. ``cooperative`` launches with ``cuLaunchCooperativeKernel``.

    ``install(method)``, when given, receives the packer last used by the thread that launched first, as a
    function ``(self, grid, block, args, *, shared_mem=0, stream=None)`` to become the kernel's own
    ``__call__`` (one Python frame per launch instead of two); ``install(None)`` takes it back. That method
    checks its thread and argument types itself and falls back to :meth:`launch` for anything else.

    ``vet(args)``, when given, sees the arguments of each new signature first and may raise (the kernels layer
    refuses another framework's tracers there, kspec/kernels/callpath/_frameworks.py): never on a known signature.
    """

    def __init__(
        self,
        name: str,
        resolve: Callable[[int], Any],
        *,
        cooperative: bool = False,
        install: Callable[[Callable[..., None] | None], None] | None = None,
        vet: Callable[[Sequence[Any]], None] | None = None,
    ) -> None:
        self.name = name
        self._vet = vet
        self._resolve = resolve
        self.cooperative = cooperative
        self._install = install
        self._installed_thread: int | None = None
        self._functions: dict[int, Any] = {}
        self._param_sizes: dict[int, tuple[int, ...] | None] = {}
        self._coresident: dict[tuple[int, int, int], int] = {}
        self._local = _PerThread()
        self._lock = threading.Lock()

    # per device ----------------------------------------------------------------------------------------

    def function(self, device_id: int, stream: int | None = None) -> Any:
        """The kernel's ``CUfunction`` on a device, resolved on first use. ``stream``: the launch stream of
        the call that asks; a first resolution while it captures a CUDA graph raises
        :class:`kspec.CaptureError` before anything compiles or loads."""
        fn = self._functions.get(device_id)
        if fn is None:
            if stream is not None:
                refuse_while_capturing(stream, kernel_label(self.name))
            with self._lock:
                fn = self._functions.get(device_id)
                if fn is None:
                    fn = self._functions[device_id] = self._resolve(device_id)
        return fn

    def param_sizes(self, device_id: int) -> tuple[int, ...] | None:
        """The kernel's parameter sizes as the driver reports them (None where it cannot, CUDA < 12.4)."""
        if device_id not in self._param_sizes:
            self._param_sizes[device_id] = kernel_param_sizes(self.function(device_id))
        return self._param_sizes[device_id]

    def loaded_functions(self) -> list[Any]:
        """The functions resolved so far, one per device that launched (or asked for) this kernel."""
        return list(self._functions.values())

    def forget_occupancy(self) -> None:
        """Drop the cached co-resident block counts (they depend on the shared-memory configuration)."""
        self._coresident.clear()

    def reset(self) -> None:
        """Forget resolved functions and packers (after a recompile); the next call resolves again."""
        with self._lock:
            self._functions.clear()
            self._param_sizes.clear()
            self._coresident.clear()
            self._local = _PerThread()  # every thread's packers go with it
            if self._install is not None:
                self._install(None)
                self._installed_thread = None

    # per thread ----------------------------------------------------------------------------------------

    def packers(self) -> dict[tuple[type, ...], Callable[..., None]]:
        """This thread's signature -> packer table."""
        return self._local.table

    def launch(self, grid: object, block: object, args: Sequence[Any], shared_mem: int = 0, stream: object = None) -> None:
        """Launch with the rules of :mod:`kspec.runtime._launch_args`: the general entry, which finds (or
        builds) this thread's packer for the signature and, where allowed, installs it as the kernel's fast
        path."""
        if type(args) is not tuple and type(args) is not list:
            if hasattr(args, "__cuda_array_interface__"):
                # CuPy iterates `args`; for one device array given bare, `k(grid, block, x)`, what reaches the
                # kernel's first parameter is x's pointer: code written for CuPy relies on that.
                return self.launch(grid, block, (args,), shared_mem, stream)
            raise KspecTypeError(about_kernel(self.name, f"args must be a tuple of arguments, got {type(args).__name__}"))
        packer: Any = self._local.table.get(_signature(args))
        if packer is None:
            packer = self.build(args)
        # One thread owns the fast path; others keep using this general one (still per-thread buffers).
        if self._install is not None and self._installed_thread in (None, packer.thread):
            self._install(getattr(packer, "native", None) or packer)  # in C where the compiled call path has it
            self._installed_thread = packer.thread
        packer.body(grid, block, args, shared_mem, stream)

    def build(self, args: Sequence[Any]) -> Callable[..., None]:
        """Generate, check and register this thread's packer for the signature of ``args``."""
        if self._vet is not None:
            self._vet(args)
        _driver.driver()  # NoDeviceError here, before anything else, when there is no device
        specs = classify_args(self.name, args)
        packer = generate_packer(self, specs, tuple(map(type, args)))
        self._local.table[_signature(args)] = packer
        if not imports_settled[0]:  # the process's first call: its lazy imports are done (kspec/_lazy.py)
            settle_imports()
        return packer

    def check_params(self, device_id: int, specs: Sequence[_Arg]) -> None:
        """A TypeError when ``specs`` cannot fill the kernel's parameters on the device (where it can say)."""
        sizes = self.param_sizes(device_id)
        if sizes is not None:
            check_param_sizes(self.name, sizes, specs)

    # cooperative launches and failures -----------------------------------------------------------------

    def coresident_blocks(self, device_id: int, block_threads: int, shared_mem: int) -> int:
        """How many blocks of ``block_threads`` threads fit on the device at once (cached per configuration)."""
        key = (device_id, block_threads, shared_mem)
        value = self._coresident.get(key)
        if value is None:
            cu = _driver.driver()
            per_sm = _driver.check(
                cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(self.function(device_id), block_threads, shared_mem),
                "cuOccupancyMaxActiveBlocksPerMultiprocessor",
            )
            value = self._coresident[key] = int(per_sm) * Device(device_id).multiprocessor_count
        return value

    def check_cooperative(self, device_id: int, grid: tuple[int, int, int], block: tuple[int, int, int], shared_mem: int) -> None:
        """A ValueError when a cooperative launch's blocks cannot all be resident at once."""
        blocks = grid[0] * grid[1] * grid[2]
        threads = block[0] * block[1] * block[2]
        limit = self.coresident_blocks(device_id, threads, shared_mem)
        if blocks > limit:
            raise KspecValueError(
                about_kernel(
                    self.name,
                    f"a cooperative launch needs every block resident at once, but grid={grid} is {blocks} blocks "
                    f"and device {device_id} fits at most {limit} of them with block={block} and "
                    f"shared_mem={shared_mem}; use a smaller grid",
                )
            )

    def failed(self, err: int, device_id: int, grid: tuple[int, int, int], block: tuple[int, int, int], shared_mem: int, stream: int) -> LaunchError | Exception:
        """The exception for a launch the driver refused."""
        cu = _driver.driver()
        where = kernel_label(self.name, f"grid={grid}, block={block}, shared_mem={shared_mem}, device {device_id}")
        hint = ""
        try:
            fn = self.function(device_id)
            attr = cu.CUfunction_attribute
            if err == CUDA_ERROR_INVALID_VALUE and min(grid + block) < 1:
                return KspecValueError(f"{where}: grid and block extents must be between 0 and 2**31-1")
            if err == CUDA_ERROR_INVALID_VALUE:
                _, max_dyn = cu.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, fn)
                _, max_threads = cu.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn)
                if shared_mem > max_dyn:
                    hint = (
                        f"; shared_mem={shared_mem} exceeds the kernel's max_dynamic_shared_size_bytes={max_dyn}: "
                        "raise it first (kernel.max_dynamic_shared_size_bytes = n)"
                    )
                elif block[0] * block[1] * block[2] > max_threads:
                    hint = f"; the block has more threads than the kernel's max_threads_per_block={max_threads}"
            elif err == CUDA_ERROR_OUT_OF_RESOURCES:
                _, regs = cu.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_NUM_REGS, fn)
                hint = f"; the kernel uses {regs} registers per thread: try a smaller block"
        except Exception:
            pass
        return LaunchError(f"launching {where} failed: {_driver.describe(err)}{hint}")


def _signature(args: Sequence[Any]) -> tuple[Any, ...]:
    """A packer's key: the argument types, and the device kind (a DeviceArray is a GPU or a host array)."""
    key = tuple(map(type, args))
    return (_device_kind.HOST_DEVICE_ID, *key) if _device_kind.host_active else key
