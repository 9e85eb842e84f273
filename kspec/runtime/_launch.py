"""Launch plans: everything about a launch that does not depend on the argument *values*, done once.

For each kernel, each calling thread and each *signature* (the tuple of argument types), a packer function
is generated once. It holds a pre-allocated parameter buffer (one 8- or 16-byte slot per argument) and a
``void*[]`` array whose entries point at the slots. A call then only reads each array's pointer (through
the cheapest attribute its library offers), writes all values with one ``struct.pack_into``, and passes the
int address of the pointer array to ``cuLaunchKernel``: the bindings take an int as-is, which skips their
generic per-argument conversion path.

Per-thread packers: the bindings release the GIL inside ``cuLaunchKernel``, so two threads must not share a
parameter buffer.

Argument rules (CuPy's RawKernel): device arrays -> their pointer; Python int -> int64; float -> double;
complex -> complex128; bool -> bool; NumPy scalars keep their dtype; None -> NULL. Where the driver can
report the kernel's parameter sizes (CUDA >= 12.4), a wrong argument count or a value whose size cannot
match its parameter (a Python float for a ``float`` parameter, a float32 for a ``double``) is a TypeError
before anything runs, rather than garbage in the kernel (*improve*: CuPy passes them through). A Python int
may still fill a narrower integer parameter, as the CuPy examples do with ``int n``.
"""

from __future__ import annotations

import os
import struct
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._errors import KspecOverflowError, KspecTypeError, KspecValueError, LaunchError
from . import _driver, _interop
from ._device import Device, current_device_id
from ._module import kernel_param_sizes
from ._dlpack import DEVICE_ACCESSIBLE
from . import _stream as _stream_module
from ._stream import cu_stream, default_stream_getter, order_after, stream_handle

# Which call into the driver a packer uses: "bindings" (cuda.bindings.driver.cuLaunchKernel) or "ctypes"
# (libcuda's cuLaunchKernel through ctypes). benchmarks/launch_overhead.py measures both.
LAUNCHER = os.environ.get("KSPEC_LAUNCHER", "bindings")

_CUDA_ERROR_INVALID_CONTEXT = 201
_CUDA_ERROR_INVALID_VALUE = 1
_CUDA_ERROR_OUT_OF_RESOURCES = 701


# -- grid / block ----------------------------------------------------------------------------------------


def dim3(value: object, what: str) -> tuple[int, int, int]:
    """An int or a 1-3 tuple -> (x, y, z); TypeError / ValueError naming ``what`` otherwise."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        dims = [int(value)]
    elif isinstance(value, (tuple, list)) and 1 <= len(value) <= 3:
        dims = []
        for v in value:
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise KspecTypeError(f"{what}: expected ints, got {type(v).__name__} in {value!r}")
            dims.append(int(v))
    else:
        raise KspecTypeError(f"{what}: expected an int or a tuple of 1 to 3 ints, got {value!r}")
    for v in dims:
        if not 1 <= v < 2**31:
            raise KspecValueError(f"{what}: every extent must be between 1 and 2**31-1, got {value!r}")
    while len(dims) < 3:
        dims.append(1)
    return dims[0], dims[1], dims[2]


# -- argument kinds --------------------------------------------------------------------------------------

_NUMPY_FORMATS = {
    "b": "b", "i1": "b", "i2": "h", "i4": "i", "i8": "q",
    "u1": "B", "u2": "H", "u4": "I", "u8": "Q",
    "f2": "e", "f4": "f", "f8": "d",
}


class _Arg:
    """How one argument position is read and packed, for one argument type."""

    __slots__ = ("kind", "fmt", "size", "label")

    def __init__(self, kind: str, fmt: str, size: int, label: str) -> None:
        self.kind = kind  # an _interop array kind, or "scalar", "complex", "bf16", "none"
        self.fmt = fmt  # struct format of the slot's value, without padding
        self.size = size  # bytes the kernel should read from the slot
        self.label = label  # for messages: "float32", "Python float (double)", "cupy.ndarray (pointer)"


def _classify_arg(obj: object) -> _Arg | None:
    tp = type(obj)
    if tp is type(None):
        return _Arg("none", "Q", 8, "None (NULL pointer)")
    if _interop.is_texture_type(tp):  # a texture/surface object: its 64-bit handle, by value
        return _Arg("handle", "Q", 8, f"{tp.__module__}.{tp.__qualname__} (cudaTextureObject_t)")
    kind = _interop.kind_of_object(obj)
    if kind in _interop.ARRAY_KINDS:
        return _Arg(kind, "Q", 8, f"{tp.__module__}.{tp.__qualname__} (pointer)")
    if issubclass(tp, np.generic):
        dt = np.dtype(tp)
        if dt.kind == "b":
            return _Arg("scalar", "?", 1, "numpy.bool_")
        if dt.kind == "c" and dt.itemsize in (8, 16):
            half = "f" if dt.itemsize == 8 else "d"
            return _Arg("complex", half + half, dt.itemsize, dt.name)
        if dt.name == "bfloat16":
            return _Arg("bf16", "H", 2, "bfloat16")
        fmt = _NUMPY_FORMATS.get(f"{dt.kind}{dt.itemsize}")
        if fmt is None:
            return None
        return _Arg("scalar", fmt, dt.itemsize, dt.name)
    if issubclass(tp, bool):
        return _Arg("scalar", "?", 1, "Python bool (bool)")
    if issubclass(tp, int):
        return _Arg("int", "q", 8, "Python int (int64)")
    if issubclass(tp, float):
        return _Arg("scalar", "d", 8, "Python float (double)")
    if issubclass(tp, complex):
        return _Arg("complex", "dd", 16, "Python complex (complex128)")
    return None


def _bf16_bits(value: Any) -> int:
    return int(np.asarray(value).view(np.uint16))


def _unsupported_message(kernel: str, position: int, tp: type) -> str:
    kind = _interop.kind_of(tp)
    if kind == _interop.HOST:
        what = (
            f"a {tp.__module__}.{tp.__qualname__} in host memory; copy it to the device first "
            "(kspec.asarray(x), cupy.asarray(x), torch.as_tensor(x, device='cuda'))"
        )
    else:
        what = f"of unsupported type {tp.__module__}.{tp.__qualname__}"
    return (
        f"kernel '{kernel}': args[{position}] is {what}. RawKernel arguments are device arrays (CuPy, PyTorch, "
        "kspec, or anything with __cuda_array_interface__ / __dlpack__), Python int/float/complex/bool, "
        "NumPy scalars, or None"
    )


def _size_mismatch(arg: _Arg, param_size: int) -> bool:
    if arg.size == param_size:
        return False
    # CuPy's examples pass a Python int to `int n` / `unsigned int N`: the low bytes of an int64 are the
    # value on a little-endian GPU, so an int may fill any narrower integer parameter.
    return not (arg.kind == "int" and param_size < 8)


# -- the plan --------------------------------------------------------------------------------------------


class _PerThread(threading.local):
    """A thread's packers (signature -> packer). ``threading.local`` runs ``__init__`` in each thread."""

    def __init__(self) -> None:
        self.table: dict[tuple[type, ...], Callable[..., None]] = {}


class LaunchPlan:
    """Launch machinery of one kernel: per-device functions, per-thread per-signature packers.

    ``resolve(device_id)`` returns the kernel's ``CUfunction`` on that device (loading and compiling as
    needed); it is called once per device. ``cooperative`` launches with ``cuLaunchCooperativeKernel``.

    ``install(method)``, when given, receives the packer last used by the thread that launched first, as a
    function ``(self, grid, block, args, *, shared_mem=0, stream=None)`` to become the kernel's own
    ``__call__`` (one Python frame per launch instead of two); ``install(None)`` takes it back. That method
    checks its thread and argument types itself and falls back to :meth:`launch` for anything else.
    """

    def __init__(
        self,
        name: str,
        resolve: Callable[[int], Any],
        *,
        cooperative: bool = False,
        install: Callable[[Callable[..., None] | None], None] | None = None,
    ) -> None:
        self.name = name
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

    def function(self, device_id: int) -> Any:
        fn = self._functions.get(device_id)
        if fn is None:
            with self._lock:
                fn = self._functions.get(device_id)
                if fn is None:
                    fn = self._functions[device_id] = self._resolve(device_id)
        return fn

    def param_sizes(self, device_id: int) -> tuple[int, ...] | None:
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
        """Launch with the rules of the module docstring: the general entry, which finds (or builds) this
        thread's packer for the signature and, where allowed, installs it as the kernel's fast path."""
        if type(args) is not tuple and type(args) is not list:
            raise KspecTypeError(f"kernel '{self.name}': args must be a tuple of arguments, got {type(args).__name__}")
        packer: Any = self._local.table.get(tuple(map(type, args)))
        if packer is None:
            packer = self.build(args)
        # One thread owns the fast path; others keep using this general one (still per-thread buffers).
        if self._install is not None and self._installed_thread in (None, packer.thread):
            self._install(packer)
            self._installed_thread = packer.thread
        packer.body(grid, block, args, shared_mem, stream)

    # building a packer ---------------------------------------------------------------------------------

    def build(self, args: Sequence[Any]) -> Callable[..., None]:
        """Generate, check and register this thread's packer for the signature of ``args``."""
        _driver.driver()  # NoDeviceError here, before anything else, when there is no device
        specs: list[_Arg] = []
        for position, obj in enumerate(args):
            arg = _classify_arg(obj)
            if arg is None:
                raise KspecTypeError(_unsupported_message(self.name, position, type(obj)))
            specs.append(arg)
        packer = _generate(self, specs, tuple(map(type, args)))
        self._local.table[tuple(map(type, args))] = packer
        return packer

    def check_params(self, device_id: int, specs: Sequence[_Arg]) -> None:
        sizes = self.param_sizes(device_id)
        if sizes is None:
            return
        if len(sizes) != len(specs):
            raise KspecTypeError(
                f"kernel '{self.name}' takes {len(sizes)} argument(s), got {len(specs)}"
            )
        for position, (arg, size) in enumerate(zip(specs, sizes)):
            if _size_mismatch(arg, size):
                hint = ""
                if arg.label.startswith("Python float") and size == 4:
                    hint = "; pass numpy.float32(x) for a float parameter"
                elif arg.label.startswith("Python"):
                    hint = "; pass a NumPy scalar of the parameter's type"
                raise KspecTypeError(
                    f"kernel '{self.name}': args[{position}] is a {arg.label}, {arg.size} byte(s), but the "
                    f"kernel's parameter {position} takes {size} byte(s){hint}"
                )

    # failures ------------------------------------------------------------------------------------------

    def coresident_blocks(self, device_id: int, block_threads: int, shared_mem: int) -> int:
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
        blocks = grid[0] * grid[1] * grid[2]
        threads = block[0] * block[1] * block[2]
        limit = self.coresident_blocks(device_id, threads, shared_mem)
        if blocks > limit:
            raise KspecValueError(
                f"kernel '{self.name}': a cooperative launch needs every block resident at once, but grid={grid} "
                f"is {blocks} blocks and device {device_id} fits at most {limit} of them with block={block} and "
                f"shared_mem={shared_mem}; use a smaller grid"
            )

    def failed(self, err: int, device_id: int, grid: tuple[int, int, int], block: tuple[int, int, int], shared_mem: int, stream: int) -> LaunchError | Exception:
        """The exception for a launch the driver refused."""
        cu = _driver.driver()
        where = f"kernel '{self.name}' (grid={grid}, block={block}, shared_mem={shared_mem}, device {device_id})"
        hint = ""
        try:
            fn = self.function(device_id)
            attr = cu.CUfunction_attribute
            if err == _CUDA_ERROR_INVALID_VALUE and 0 in grid + block:
                return KspecValueError(f"{where}: grid and block extents must be at least 1")
            if err == _CUDA_ERROR_INVALID_VALUE:
                _, max_dyn = cu.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, fn)
                _, max_threads = cu.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn)
                if shared_mem > max_dyn:
                    hint = (
                        f"; shared_mem={shared_mem} exceeds the kernel's max_dynamic_shared_size_bytes={max_dyn}: "
                        "raise it first (kernel.max_dynamic_shared_size_bytes = n)"
                    )
                elif block[0] * block[1] * block[2] > max_threads:
                    hint = f"; the block has more threads than the kernel's max_threads_per_block={max_threads}"
            elif err == _CUDA_ERROR_OUT_OF_RESOURCES:
                _, regs = cu.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_NUM_REGS, fn)
                hint = f"; the kernel uses {regs} registers per thread: try a smaller block"
        except Exception:
            pass
        return LaunchError(f"launching {where} failed: {_driver.describe(err)}{hint}")

    def bad_launch_value(self, exc: Exception, grid: object, block: object, shared_mem: object, stream: object) -> Exception:
        """TypeError / OverflowError raised by the bindings for a grid, block or shared_mem they cannot take."""
        dim3(grid, "grid")
        dim3(block, "block")
        if isinstance(shared_mem, bool) or not isinstance(shared_mem, (int, np.integer)) or not 0 <= shared_mem < 2**32:
            return KspecValueError(f"shared_mem: expected a number of bytes (int >= 0), got {shared_mem!r}")
        return KspecTypeError(f"kernel '{self.name}': the launch arguments were refused ({exc})")


def _mismatched_devices(plan: LaunchPlan, args: Sequence[Any]) -> Exception:
    named = []
    for position, a in enumerate(args):
        if _interop.kind_of(type(a)) in _interop.ARRAY_KINDS:
            try:
                device = _interop.array_info(a).device_id
            except Exception:
                continue
            named.append((f"args[{position}] ({type(a).__name__})", device))
    try:
        _interop.check_same_device(named)
    except KspecValueError as exc:
        return KspecValueError(f"kernel '{plan.name}': {exc}")
    return KspecValueError(f"kernel '{plan.name}': arrays on different devices in one call")


def _host_tensor(plan: LaunchPlan, position: int, tensor: Any) -> Exception:
    return KspecTypeError(
        f"kernel '{plan.name}': args[{position}] is a PyTorch tensor on {tensor.device} (host memory); "
        "move it to the GPU with .cuda()"
    )


def _host_dlpack(plan: LaunchPlan, position: int, obj: Any, device_type: int) -> Exception:
    return KspecTypeError(
        f"kernel '{plan.name}': args[{position}] ({type(obj).__name__}) is on DLPack device type "
        f"{device_type}, not a CUDA device; copy it to the device first"
    )


def _bad_scalar(plan: LaunchPlan, args: Sequence[Any], specs: Sequence[_Arg]) -> Exception:
    for position, (a, spec) in enumerate(zip(args, specs)):
        if spec.kind == "int":
            if not -(2**63) <= a < 2**63:
                return KspecOverflowError(
                    f"kernel '{plan.name}': args[{position}] = {a} does not fit the int64 a Python int is passed "
                    "as; pass a NumPy scalar (numpy.uint64(x)) for other types"
                )
    return KspecValueError(f"kernel '{plan.name}': an argument could not be packed")


def _cai_pointer(obj: Any) -> tuple[int, Any]:
    cai = obj.__cuda_array_interface__
    return cai["data"][0] or 0, cai.get("stream")


def _dlpack_view(obj: Any, stream: int) -> Any:
    return _dlpack_read(obj.__dlpack__(stream=_interop.protocol_stream(stream)))


def _dlpack_read(capsule: Any) -> Any:
    from ._dlpack import read_capsule

    return read_capsule(capsule)


# -- the launch call itself ------------------------------------------------------------------------------

_ctypes_launch: Any = None
_ctypes_coop: Any = None
_c_void_ps: dict[int, Any] = {}


def _ctypes_entry_points() -> tuple[Any, Any]:
    global _ctypes_launch, _ctypes_coop
    if _ctypes_launch is None:
        import ctypes

        lib = ctypes.CDLL("libcuda.so.1")
        _ctypes_launch = lib.cuLaunchKernel
        _ctypes_launch.restype = ctypes.c_int
        _ctypes_coop = lib.cuLaunchCooperativeKernel
        _ctypes_coop.restype = ctypes.c_int
    return _ctypes_launch, _ctypes_coop


def _c_stream(handle: int) -> Any:
    obj = _c_void_ps.get(handle)
    if obj is None:
        import ctypes

        if len(_c_void_ps) > 4096:
            _c_void_ps.clear()
        obj = _c_void_ps[handle] = ctypes.c_void_p(handle)
    return obj


def _activate(device_id: int) -> None:
    Device(device_id).activate()


# -- code generation -------------------------------------------------------------------------------------


def _generate(plan: LaunchPlan, specs: list[_Arg], types: tuple[type, ...]) -> Callable[..., None]:
    """Write, compile and return the packer for one signature (see the module docstring)."""
    import ctypes

    cu = _driver.driver()
    multi = _driver._device_count > 1
    n = len(specs)

    # The parameter buffer: one 8-byte slot per argument (16 for complex128), zero-padded so a narrower
    # value reads back zero-extended.
    offsets, fmt, total = [], "<", 0
    for spec in specs:
        slot = 16 if spec.size == 16 else 8
        offsets.append(total)
        fmt += spec.fmt + ("x" * (slot - struct.calcsize("<" + spec.fmt)))
        total += slot
    buffer = (ctypes.c_char * max(total, 8))()
    base = ctypes.addressof(buffer)
    pointers = (ctypes.c_void_p * max(n, 1))(*[base + off for off in offsets])
    params_address = ctypes.addressof(pointers)

    library = None
    for spec in specs:
        if spec.kind in (_interop.CUPY, _interop.TORCH):
            library = spec.kind
            break

    ns: dict[str, Any] = {
        "_plan": plan,
        "_specs": specs,
        "_pack": struct.Struct(fmt).pack_into,
        "_buf": buffer,
        "_keep": pointers,
        "_params": params_address,
        "_StructError": struct.error,
        "_dim3": dim3,
        "_default_stream": default_stream_getter(library),
        "_stream_handle": stream_handle,
        "_current_device": current_device_id,
        "_mismatch": _mismatched_devices,
        "_host_tensor": _host_tensor,
        "_host_dlpack": _host_dlpack,
        "_bad_scalar": _bad_scalar,
        "_cai": _cai_pointer,
        "_dlpack_view": _dlpack_view,
        "_ptr_device": _interop.pointer_device,
        "_order": order_after,
        "_norm_stream": _interop.normalize_protocol_stream,
        "_accessible": DEVICE_ACCESSIBLE,
        "_bf16": _bf16_bits,
        "_activate": _activate,
        "_fs": {},
        "_ArgumentError": ctypes.ArgumentError,
        "_INVALID_CONTEXT": _CUDA_ERROR_INVALID_CONTEXT,
    }
    lines: list[str] = []
    w = lines.append
    names = [f"a{i}" for i in range(n)]
    if n == 1:
        w("    a0, = args")
    elif n:
        w(f"    {', '.join(names)} = args")
    body_start = len(lines)

    # 1. pointers and devices
    values: list[str] = []
    device_exprs: list[str] = []  # expressions holding each array's device, in order
    deferred: list[str] = []  # needs the stream: CAI producers' streams, DLPack exports
    for i, spec in enumerate(specs):
        a = f"a{i}"
        if spec.kind == _interop.KSPEC:
            values.append(f"{a}._ptr")
            if multi:
                device_exprs.append(f"{a}._device_id")
        elif spec.kind == _interop.CUPY:
            w(f"    m{i} = {a}.data")
            values.append(f"m{i}.ptr")
            if multi:
                device_exprs.append(f"m{i}.device_id")
        elif spec.kind == _interop.TORCH:
            values.append(f"{a}.data_ptr()")
            if multi:
                w(f"    d{i} = {a}.get_device()")
                w(f"    if d{i} < 0: raise _host_tensor(_plan, {i}, {a})")
                device_exprs.append(f"d{i}")
            else:
                w(f"    if not {a}.is_cuda: raise _host_tensor(_plan, {i}, {a})")
        elif spec.kind == _interop.CAI:
            w(f"    p{i}, cs{i} = _cai({a})")
            values.append(f"p{i}")
            if multi:
                device_exprs.append(f"_ptr_device(p{i})")
            deferred.append(f"    if cs{i} is not None and _norm_stream(cs{i}) != s: _order(_norm_stream(cs{i}), s)")
        elif spec.kind == _interop.DLPACK:
            w(f"    t{i}, d{i} = {a}.__dlpack_device__()")
            w(f"    if t{i} not in _accessible: raise _host_dlpack(_plan, {i}, {a}, t{i})")
            if multi:
                device_exprs.append(f"d{i}")
            deferred.append(f"    v{i} = _dlpack_view({a}, s)")
            values.append(f"v{i}.ptr")
        elif spec.kind == "none":
            values.append("0")
        elif spec.kind == "handle":
            values.append(f"{a}.ptr")
        elif spec.kind == "complex":
            values.extend([f"{a}.real", f"{a}.imag"])
        elif spec.kind == "bf16":
            values.append(f"_bf16({a})")
        else:  # int, scalar
            values.append(a)

    if multi and device_exprs:
        w(f"    dev = {device_exprs[0]}")
        for expr in device_exprs[1:]:
            w(f"    if {expr} != dev: raise _mismatch(_plan, args)")
    elif multi:
        w("    dev = _current_device()")
    else:
        w("    dev = 0")

    # 2. stream (hs: what the launch call takes for it; the conversions are cached per handle)
    use_ctypes = LAUNCHER == "ctypes"
    if use_ctypes:
        ns["_hs_cache"], ns["_to_hs"] = _c_void_ps, _c_stream
    else:
        ns["_hs_cache"], ns["_to_hs"] = _stream_module._cu_streams, cu_stream
    # a `with kspec.Stream(...)` block open in this thread stands for stream= (one list read when none is)
    ns["_entered"], ns["_current_stream"] = _stream_module._entered, _stream_module.current_stream
    w("    if stream is None and _entered[0]:")
    w("        stream = _current_stream()")
    w("    if stream is None:")
    if library == _interop.CUPY:
        # CuPy's current stream of the arrays' device (a Python call into CuPy's thread-local state).
        ns["_cupy_current"] = sys.modules["cupy"].cuda.get_current_stream
        w("        s = _cupy_current(dev).ptr")
    elif library == _interop.TORCH:
        ns["_torch_current"] = default_stream_getter(_interop.TORCH)
        w("        s = _torch_current(dev)")
    else:
        w("        s = 0")
    if library:
        w("        hs = _hs_cache.get(s)")
        w("        if hs is None:")
        w("            hs = _to_hs(s)")
    else:
        w("        hs = _hs0")
    w("    else:")
    w("        s = _stream_handle(stream)")
    w("        hs = _hs_cache.get(s)")
    w("        if hs is None:")
    w("            hs = _to_hs(s)")
    lines.extend(deferred)

    # 3. values
    if values:
        w("    try:")
        w(f"        _pack(_buf, 0, {', '.join(values)})")
        w("    except (_StructError, OverflowError):")
        w("        raise _bad_scalar(_plan, args, _specs) from None")

    # 4. dims
    for var, prefix in (("grid", "g"), ("block", "b")):
        w(f"    if type({var}) is tuple and len({var}) == 1:")
        w(f"        {prefix}x = {var}[0]; {prefix}y = {prefix}z = 1")
        w(f"    elif type({var}) is int:")
        w(f"        {prefix}x = {var}; {prefix}y = {prefix}z = 1")
        w("    else:")
        w(f"        {prefix}x, {prefix}y, {prefix}z = _dim3({var}, '{var}')")

    # 5. the function on this device, checked against the signature once per device
    def resolve(device_id: int) -> Any:
        fn = plan.function(device_id)
        plan.check_params(device_id, specs)
        handle = ctypes.c_void_p(int(fn)) if use_ctypes else fn
        ns["_fs"][device_id] = handle
        if not multi:
            ns["_f"] = handle
        return handle

    ns["_resolve"] = resolve
    ns["_f"] = None
    if multi:
        w("    f = _fs.get(dev)")
        w("    if f is None:")
        w("        f = _resolve(dev)")
        w("    _activate(dev)")
    else:
        w("    f = _f")
        w("    if f is None:")
        w("        f = _resolve(dev)")
    if plan.cooperative:
        w("    _plan.check_cooperative(dev, (gx, gy, gz), (bx, by, bz), shared_mem)")

    # 6. launch
    if use_ctypes:
        launch_c, coop_c = _ctypes_entry_points()
        ns["_launch"] = coop_c if plan.cooperative else launch_c
        ns["_c_params"] = ctypes.c_void_p(params_address)
        ns["_hs0"] = _c_stream(0)
        call = "_launch(f, gx, gy, gz, bx, by, bz, shared_mem, hs, _c_params" + (
            ")" if plan.cooperative else ", None)"
        )
        w("    try:")
        w(f"        err = {call}")
    else:
        ns["_launch"] = cu.cuLaunchCooperativeKernel if plan.cooperative else cu.cuLaunchKernel
        ns["_hs0"] = cu_stream(0)
        call = "_launch(f, gx, gy, gz, bx, by, bz, shared_mem, hs, _params" + (")" if plan.cooperative else ", 0)")
        w("    try:")
        w(f"        err, = {call}")
    w("    except (TypeError, OverflowError, _ArgumentError) as exc:")
    w("        raise _plan.bad_launch_value(exc, grid, block, shared_mem, stream) from None")
    w("    if err:")
    w("        if err == _INVALID_CONTEXT:")
    # No context current in this thread (nothing initialised CUDA here yet): make the device's primary
    # context current and launch again. Checking before every launch would cost a driver call per launch.
    w("            _activate(dev)")
    w(f"            err = {call}" if use_ctypes else f"            err, = {call}")
    w("        if err:")
    w("            raise _plan.failed(int(err), dev, (gx, gy, gz), (bx, by, bz), shared_mem, s)")
    # `method` becomes the kernel's own __call__ (LaunchPlan.install): it checks the thread and the argument
    # types (a few `is` tests, cheaper than building a key tuple) and sends anything else to the plan's
    # general launch. `body` is the same without the checks, for that general path.
    thread = threading.get_ident()
    guard = ["def method(self, grid, block, args, *, shared_mem=0, stream=None):"]
    guard.append(f"    if _get_ident() != {thread} or type(args) is not tuple or len(args) != {n}:")
    guard.append("        return _miss(grid, block, args, shared_mem, stream)")
    guard.extend(lines[:body_start])
    if n:
        checks = " or ".join(f"type(a{i}) is not _T{i}" for i in range(n))
        guard.append(f"    if {checks}:")
        guard.append("        return _miss(grid, block, args, shared_mem, stream)")
    guard.extend(lines[body_start:])
    body = ["def body(grid, block, args, shared_mem, stream):", *lines]
    for i, tp in enumerate(types):
        ns[f"_T{i}"] = tp
    ns["_miss"] = plan.launch
    ns["_get_ident"] = threading.get_ident
    source = "\n".join(guard) + "\n\n" + "\n".join(body) + "\n"
    code = compile(source, f"<kspec launch of {plan.name}>", "exec")
    exec(code, ns)
    packer = ns["method"]
    packer.body = ns["body"]
    packer.thread = thread
    packer.source = source  # for debugging: print(next(iter(kernel._plan.packers().values())).source)
    return packer
