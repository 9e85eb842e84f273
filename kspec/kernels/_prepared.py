"""Repeated calls: a call's *signature* -> everything prepared, so a call costs a dict lookup and a launch.

Binding, planning and building a parameter frame cost tens of microseconds; none of it depends on pointer
or scalar *values*. A signature holds, per argument, its type and, for arrays, shape, byte strides, dtype
and device (read through the cheapest attributes of CuPy, PyTorch and kspec arrays), plus the call's
keyword values. The first call with a signature takes the full path (every check, every error) and stores a
:class:`PreparedCall`; later calls with the same signature read the pointers, pack the scalars and launch.
Arrays given through ``__cuda_array_interface__`` are keyed from its dict (in a one-device process): their
producer's ``stream`` is no part of the key, but is ordered before the launch on every call
(:meth:`PreparedCall.order_producers`). DLPack arguments, JAX and Numba arrays always take the full path.
"""

from __future__ import annotations

import functools
import struct
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import dtypes
from .._errors import KspecTypeError, about_kernel
from ..runtime import (
    activate_if_several,
    CAI,
    CUPY,
    HOST,
    KSPEC,
    TORCH,
    accepts_kind,
    Device,
    allocate_bytes,
    cu_stream,
    cuda_driver,
    default_stream_getter,
    initialized_device_count,
    kind_of,
    order_cai_producer,
    protocol_library,
    stream_handle,
)
from . import _loaded, _spec_kernel
from ._bind import Bound, scalar_bytes
from ._fastcall import make_direct_call
from ._frame import _U64, Frame

_SCALAR_TYPES = (bool, int, float, complex)


def signature(args: Sequence[Any]) -> tuple[tuple[Any, ...], list[int], Sequence[Any]] | None:
    """(hashable signature, pointer per argument (0 for scalars), the CAI producers' streams to order before
    the launch), or None when an argument needs the full path."""
    keys: list[Any] = []
    pointers: list[int] = []
    producers: Sequence[Any] = ()  # a list only once there is one: CuPy/PyTorch/kspec calls build nothing more
    for a in args:
        tp = type(a)
        kind = kind_of(tp)
        if kind == CUPY:
            memory = a.data
            keys.append((tp, a.shape, a.strides, a.dtype, memory.device_id))
            pointers.append(memory.ptr)
        elif kind == TORCH:
            keys.append((tp, a.shape, a.stride(), a.dtype, a.get_device()))
            pointers.append(a.data_ptr())
        elif kind == KSPEC:
            # DeviceArray's slots, read directly: the per-call hot path (tests/test_layers.py allow-lists it)
            keys.append((tp, a._shape, a._strides, a._dtype, a._device_id))
            pointers.append(a._ptr)
        elif tp in _SCALAR_TYPES or isinstance(a, np.generic):
            keys.append(tp)
            pointers.append(0)
        elif tp is np.ndarray and kind == HOST and accepts_kind(kind):  # NumPy arrays on the CPU device
            keys.append((tp, a.shape, a.strides, a.dtype, a.flags.writeable))
            pointers.append(a.ctypes.data)
        else:
            entry = _cai_entry(a, tp, kind)
            if entry is None:
                return None
            keys.append(entry[0])
            pointers.append(entry[1])
            if entry[2] is not None:
                producers = [*producers, entry[2]]
    return tuple(keys), pointers, producers


def _cai_entry(a: Any, tp: type, kind: str | None) -> tuple[tuple[Any, ...], int, Any] | None:
    """(key, pointer, producer stream or None) of an array given through ``__cuda_array_interface__``, or None
    where the full path is needed: a process with several devices (the pointer's device is a driver query),
    JAX and Numba arrays (outputs go back as theirs), a dict the full path refuses or explains, other types.
    The key holds what binding and planning read (shape, typestr, strides, read-only flag); the full path
    checked the rest (version, mask, byte order) on the first call with it."""
    if kind not in (CAI, None) or initialized_device_count() != 1:
        return None
    cai = getattr(a, "__cuda_array_interface__", None)  # an instance attribute in simple wrappers
    if type(cai) is not dict or cai.get("mask") is not None or protocol_library(a) is not None:
        return None
    try:
        version = cai.get("version", 0)
        if type(version) is not int or version < 2:
            return None
        strides = cai.get("strides")
        data = cai["data"]
        key = (tp, tuple(cai["shape"]), cai["typestr"], None if strides is None else tuple(strides), bool(data[1]))
        hash(key)
        return key, int(data[0] or 0), cai.get("stream")
    except (KeyError, TypeError, IndexError, ValueError):
        return None


def pointer_of(obj: Any) -> int:
    """The data pointer of an array kspec allocated (CuPy, PyTorch or kspec)."""
    kind = kind_of(type(obj))
    if kind == CUPY:
        return int(obj.data.ptr)
    if kind == TORCH:
        return int(obj.data_ptr())
    if kind == HOST:  # a NumPy output on the CPU device
        return int(obj.ctypes.data)
    return int(obj._ptr)  # DeviceArray's slot: per call, for each output (allow-listed in tests/test_layers.py)


_FAST_FORMATS = {
    "int8": "<b", "int16": "<h", "int32": "<i", "int64": "<q",
    "uint8": "<B", "uint16": "<H", "uint32": "<I", "uint64": "<Q",
    "float32": "<f", "float64": "<d",
}


def fast_format(dtype: str, value_type: type) -> str | None:
    """The ``struct`` format that packs Python ``value_type`` values into a ``dtype`` parameter exactly as
    :func:`scalar_bytes` would (anything ``struct`` refuses still goes there), or None."""
    fmt = _FAST_FORMATS.get(dtype)
    kind = dtypes.BY_NAME[dtype].kind
    if fmt is None or not (value_type is int or (value_type is float and kind == "f")):
        return None
    return fmt


def scalar_packer(kernel: str, param: str, dtype: str, value_type: type) -> Callable[[Any], bytes]:
    """value -> bytes for one scalar parameter and one Python value type.

    Python ints and floats into integer and float parameters use ``struct`` (anything it refuses, such as an
    out-of-range int, goes to :func:`scalar_bytes`, which raises the proper error); every other case always
    takes :func:`scalar_bytes`.
    """
    fmt = fast_format(dtype, value_type)
    if fmt is None:
        return lambda value: scalar_bytes(kernel, param, value, dtype)
    pack = struct.Struct(fmt).pack

    def packed(value: Any) -> bytes:
        try:
            return pack(value)
        except (struct.error, OverflowError):
            return scalar_bytes(kernel, param, value, dtype)

    return packed


class Launch:
    """One kernel launch of a prepared call: the entry point's variant, frame, grid and block."""

    __slots__ = ("variant", "frame", "grid", "block", "what")

    def __init__(self, variant: Any, frame: Frame, grid: int, block: int, what: str) -> None:
        self.variant = variant
        self.frame = frame
        self.grid = grid
        self.block = block
        self.what = what


class PreparedCall:
    """Everything about one call signature of a kernel on one device (see the module docstring).

    ``launches`` run in order; ``workspace`` bytes are allocated per call when a split reduction needs them.
    :meth:`run` returns the outputs it allocated, by parameter name.
    """

    def __init__(
        self,
        kernel: Any,
        bound: Bound,
        device_id: int,
        specialization: Any,
        allocate: tuple[tuple[str, str], ...],
        out_shape: tuple[int, ...],
        launches: list[Launch],
        workspace: int = 0,
    ) -> None:
        spec = kernel._spec  # as the kernel holds it: a served kernel keeps its plain spec (no Pydantic)
        self.kernel_name = kernel.name
        self.binaries = kernel._binaries
        self.device_id = device_id
        self.library = bound.library
        self.default_stream = default_stream_getter(bound.library)
        self.specialization = specialization
        self.launches = launches
        self.workspace = workspace
        self.out_shape = out_shape
        self.allocate = allocate
        params = [*spec.in_params, *spec.out_params]
        # argument position -> parameter, for the given arrays and for the scalars (with their packers)
        self.array_positions = [(i, p.name) for i, p in enumerate(params) if p.name in bound.arrays]
        self.scalars = [
            (i, p.name, scalar_packer(kernel.name, p.name, bound.dtypes[p.name], bound.scalar_types[p.name]))
            for i, p in enumerate(params)
            if p.name in bound.scalars
        ]
        self.scalar_formats = {p.name: fast_format(bound.dtypes[p.name], bound.scalar_types[p.name])
                               for p in params if p.name in bound.scalars}  # fmt: skip
        # per output dtype: an input position whose array an output can be allocated "like" (see _like_input);
        # found here, where the bound arrays are at hand (a prepared call keeps no reference to them)
        self.like_inputs = {dtype: _like_input(bound, self.array_positions, out_shape, dtype) for _name, dtype in allocate}
        self._functions: dict[int, list[Any]] = {}
        self._fast: Callable[[Sequence[Any], Sequence[int], object], dict[str, Any]] | None = None
        self.direct: Callable[..., Any] | None = None  # see direct_call (made on the signature's second call)
        self.direct_made = False

    def _functions_on(self, device_id: int) -> list[Any]:
        fns = self._functions.get(device_id)
        if fns is None:
            loaded = _loaded.loaded_kernel(self.specialization, device_id, self.binaries)
            fns = self._functions[device_id] = [loaded.function(step.variant) for step in self.launches]
        return fns

    def _stream(self, stream: object) -> int:
        if stream is None:
            return self.default_stream(self.device_id)
        try:
            return stream_handle(stream)
        except KspecTypeError as exc:
            raise KspecTypeError(about_kernel(self.kernel_name, str(exc))) from None

    def order_producers(self, producers: Sequence[Any], stream: object) -> None:
        """Order each CAI producer's stream (as the interface spells it) before this call's launch stream."""
        handle = self._stream(stream)
        for producer in producers:
            order_cai_producer(producer, handle, self.device_id)

    def run(self, args: Sequence[Any], pointer_list: Sequence[int], stream: object) -> dict[str, Any]:
        fast = self._fast
        if fast is None:
            fast = self._fast = self._one_launch() if len(self.launches) == 1 and not self.workspace else self._general
        return fast(args, pointer_list, stream)

    def _one_launch(self) -> Callable[[Sequence[Any], Sequence[int], object], dict[str, Any]]:
        """The call as one closure for the common case (one launch, no workspace): values go straight from
        the arguments to the thread's parameter buffer at precomputed offsets; no per-call dicts.
        benchmarks/bench.py measures what this is worth (host cost per call)."""
        step = self.launches[0]
        frame = step.frame
        fn = self._functions_on(self.device_id)[0]
        pointer_slots = [(off, i) for i, name in self.array_positions if (off := frame.pointer_offset(name)) is not None]
        scalar_slots = [(off, i, pack) for i, name, pack in self.scalars if (off := frame.scalar_offset(name)) is not None]
        allocations = [(frame.pointer_offset(name), name, dtype, _quick_empty(self.library, self.out_shape, dtype))
                       for name, dtype in self.allocate]  # fmt: skip
        device_id, grid, block, what = self.device_id, step.grid, step.block, step.what
        library, out_shape = self.library, self.out_shape
        choose_stream, allocate, pack_u64 = self._stream, _spec_kernel.allocate, _U64.pack_into
        launch = cuda_driver().cuLaunchKernel
        several_devices = initialized_device_count() > 1

        def one_launch(args: Sequence[Any], pointer_list: Sequence[int], stream: object) -> dict[str, Any]:
            handle = choose_stream(stream)
            buf, address = frame.buffer()
            for offset, i in pointer_slots:
                pack_u64(buf, offset, pointer_list[i])
            for offset, i, pack in scalar_slots:
                value = pack(args[i])
                buf[offset : offset + len(value)] = value
            allocated = {}
            for out_offset, name, dtype, quick in allocations:
                if stream is None and quick is not None:
                    obj = allocated[name] = quick()
                else:
                    obj = allocated[name] = allocate(library, out_shape, dtype, handle if stream is None else stream, device_id)
                if out_offset is not None:
                    pack_u64(buf, out_offset, pointer_of(obj))
            if several_devices:
                activate_if_several(device_id)
            (err,) = launch(fn, grid, 1, 1, block, 1, 1, 0, cu_stream(handle), address, 0)
            if err:  # nothing was queued: the general launcher retries on a lost context or raises
                _spec_kernel.launch(fn, grid, block, address, handle, device_id, what)
            return allocated

        return one_launch

    def direct_call(self, result: str, nargs: int) -> Callable[..., Any] | None:
        """This call, for ``nargs`` arguments, as one generated function returning ``result``
        (kspec/kernels/_fastcall.py), for one launch without workspace; None otherwise."""
        if len(self.launches) != 1 or self.workspace:
            return None
        step = self.launches[0]
        frame = step.frame
        return make_direct_call(
            pointer_slots=[(off, i) for i, name in self.array_positions if (off := frame.pointer_offset(name)) is not None],
            scalar_slots=[(off, i, self.scalar_formats[name], pack) for i, name, pack in self.scalars
                          if (off := frame.scalar_offset(name)) is not None],
            allocations=[(frame.pointer_offset(name), dtype, _quick_empty(self.library, self.out_shape, dtype),
                          self.like_inputs[dtype]) for name, dtype in self.allocate],
            result=result,
            nargs=nargs,
            constants=dict(
                DEVICE=self.device_id, FN=self._functions_on(self.device_id)[0], GRID=step.grid, BLOCK=step.block,
                WHAT=step.what, LIBRARY=self.library, SHAPE=self.out_shape, SEVERAL=initialized_device_count() > 1,
                default_stream=self.default_stream, choose_stream=self._stream, buffer=frame.buffer, LOCAL=frame.thread_local,
                launch=cuda_driver().cuLaunchKernel, relaunch=_spec_kernel.launch, cu_stream=cu_stream,
                allocate=_spec_kernel.allocate, activate=activate_if_several, pointer_of=pointer_of,
                EMPTY_LIKE=sys.modules["torch"].empty_like if self.library == "torch" else None,
            ),
        )  # fmt: skip

    def _general(self, args: Sequence[Any], pointer_list: Sequence[int], stream: object) -> dict[str, Any]:
        device_id = self.device_id
        handle = self._stream(stream)
        owner = handle if stream is None else stream  # an allocation keeps the caller's stream object alive
        pointers = {name: pointer_list[i] for i, name in self.array_positions}
        scalars = {name: pack(args[i]) for i, name, pack in self.scalars}
        allocated = {}
        for name, dtype in self.allocate:
            obj = _spec_kernel.allocate(self.library, self.out_shape, dtype, owner, device_id)
            allocated[name] = obj
            pointers[name] = pointer_of(obj)
        if self.launches:
            activate_if_several(device_id)
            buffer = None
            if self.workspace:
                buffer = allocate_bytes(self.workspace, device_id, handle, None if stream is None else stream)
                pointers["_workspace"] = buffer.ptr
            for step, fn in zip(self.launches, self._functions_on(device_id)):
                params = step.frame.fill(pointers, scalars)
                _spec_kernel.launch(fn, step.grid, step.block, params, handle, device_id, step.what)
            del buffer  # freed in stream order, after the launches that use it
        return allocated


def _quick_empty(library: str | None, shape: tuple[int, ...], dtype: str) -> Callable[[], Any] | None:
    """An allocator for outputs on the library's current stream in a one-device process, skipping
    allocate_like's device switch and stream checks (a CuPy or PyTorch array on the current stream is what
    ``cupy.empty`` / ``torch.empty`` make). None where those checks are needed."""
    if initialized_device_count() != 1 or library not in ("cupy", "torch"):
        return None
    np_dtype = dtypes.BY_NAME[dtype].numpy
    if np_dtype is None:  # a dtype NumPy lacks (bfloat16 without ml_dtypes): allocate_like decides
        return None
    if library == "cupy":  # what cupy.empty returns, without its Python frame (one C-level call per output)
        # CuPy reads a dtype's name faster than the dtype (3.3 against 3.6 us on an H100)
        spelled = np_dtype.name if np_dtype.kind in "biufc" and np.dtype(np_dtype.name) == np_dtype else np_dtype
        return functools.partial(sys.modules["cupy"].ndarray, shape, spelled)
    torch = sys.modules["torch"]
    from ..runtime import numpy_dtype_to_torch

    return functools.partial(torch.empty, shape, dtype=numpy_dtype_to_torch(np_dtype), device=torch.device("cuda", 0))


def _like_input(bound: Bound, array_positions: Sequence[tuple[int, str]], out_shape: tuple[int, ...], dtype: str) -> int | None:
    """The argument position of a C-contiguous PyTorch input of the output's shape and dtype, in a one-device
    process, or None: ``torch.empty_like`` of it is the output ``torch.empty`` would make, and costs 2.3 us
    against 3.5 (H100; the common elementwise case, an output shaped like its inputs)."""
    if bound.library != "torch" or initialized_device_count() != 1:
        return None
    for position, name in array_positions:
        arg = bound.arrays[name]
        info = arg.info
        if (arg.dtype == dtype and info.library == "torch" and info.shape == out_shape
                and info.strides == dtypes.c_strides(info.shape, info.dtype.itemsize)):  # fmt: skip
            return position
    return None


def bound_pointers(bound: Bound, spec: Any) -> list[int]:
    """Pointer per argument position (0 for scalars) from a bound call (the full path)."""
    params = [*spec.in_params, *spec.out_params]
    return [bound.arrays[p.name].info.ptr if p.name in bound.arrays else 0 for p in params]


def sm_count(device_id: int) -> int:
    return Device(device_id).multiprocessor_count
