"""kspec's own device array, for code that uses no array library.

A DeviceArray is a pointer, a shape, byte strides, a NumPy dtype and a device. It does no arithmetic; it
carries data to and from kernels. Other libraries take it without a copy: ``cupy.asarray(a)`` through
``__cuda_array_interface__`` (v3), ``torch.from_dlpack(a)`` through ``__dlpack__``.
"""

from __future__ import annotations

import math

import operator
from typing import Any

import numpy as np

from .._errors import KspecNotImplementedError, KspecTypeError, KspecValueError
from ..dtypes import c_strides
from . import _driver
from ._device_kind import HOST_DEVICE_ID
from ._generic import KDL_CPU, KDL_CUDA
from ._device import Device, get_device
from ._interop import (
    array_info,
    is_device_array,
    normalize_protocol_stream,
    protocol_stream,
    register_kspec_type,
)
from ._memory import allocate
from ._stream import _entered as _stream_entered, cu_stream, current_stream, live_handle, order_after, stream_handle


def _normalize_shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        result = tuple(operator.index(s) for s in shape)
    except TypeError:
        raise KspecTypeError(f"shape: expected an int or a tuple of ints, got {shape!r}") from None
    if any(s < 0 for s in result):
        raise KspecValueError(f"shape: extents must be >= 0, got {result}")
    return result


def _normalize_dtype(dtype: Any) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise KspecTypeError(f"dtype: {dtype!r} is not a dtype") from None
    if dt.kind not in "biufc" or dt.hasobject or dt.byteorder == ">":
        # bfloat16 (ml_dtypes) is kind 'V' but a plain 2-byte type on the device.
        if dt.name != "bfloat16":
            raise KspecTypeError(f"dtype: {dt} cannot live in a DeviceArray")
    return dt


class DeviceArray:
    """An n-dimensional array in device memory (see the module docstring).

    Make one with :func:`kspec.empty`, :func:`kspec.zeros` or :func:`kspec.asarray`; read it back with
    :meth:`get`. Strides are in bytes, as in NumPy.
    """

    __slots__ = ("_ptr", "_shape", "_strides", "_dtype", "_device_id", "_base", "_stream", "_stream_owner", "__weakref__")

    _ptr: int
    _shape: tuple[int, ...]
    _strides: tuple[int, ...]
    _dtype: np.dtype
    _device_id: int
    _base: Any
    _stream: int
    _stream_owner: object

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise KspecTypeError("DeviceArray is not built directly; use kspec.empty, kspec.zeros or kspec.asarray")

    @classmethod
    def _wrap(
        cls,
        ptr: int,
        shape: tuple[int, ...],
        dtype: np.dtype,
        device_id: int,
        base: Any,
        stream: int = 0,
        strides: tuple[int, ...] | None = None,
        stream_owner: object = None,
    ) -> DeviceArray:
        self = object.__new__(cls)
        self._ptr = ptr
        self._shape = shape
        self._strides = c_strides(shape, dtype.itemsize) if strides is None else strides
        self._dtype = dtype
        self._device_id = device_id
        self._base = base  # what owns the memory: an Allocation, another library's array, a module
        self._stream = stream  # the stream the array was made on: the default for its copies and exports
        self._stream_owner = stream_owner  # what that handle came from (kept alive with the array)
        return self

    def _home_stream(self) -> int:
        return live_handle(self._stream, self._stream_owner)

    # -- description -------------------------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def strides(self) -> tuple[int, ...]:
        return self._strides

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return math.prod(self._shape)

    @property
    def itemsize(self) -> int:
        return self._dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self._dtype.itemsize

    @property
    def ptr(self) -> int:
        """Address of the first element."""
        return self._ptr

    data_ptr = ptr

    @property
    def device(self) -> Device:
        return Device(self._device_id)

    @property
    def base(self) -> Any:
        """What keeps the memory alive (kspec's allocation, or the array this one views)."""
        return self._base

    @property
    def is_c_contiguous(self) -> bool:
        return self.size <= 1 or self._strides == c_strides(self._shape, self._dtype.itemsize)

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d DeviceArray")
        return self._shape[0]

    def __repr__(self) -> str:
        return f"<kspec.DeviceArray shape={self._shape} dtype={self._dtype} device={self._device_id}>"

    def __array__(self, *args: object, **kwargs: object) -> np.ndarray:
        # As CuPy: a device->host copy must be asked for, never happen behind np.asarray's back.
        raise KspecTypeError("implicit conversion of a DeviceArray to a NumPy array is not allowed; use .get()")

    # -- views -------------------------------------------------------------------------------------------

    def reshape(self, *shape: Any) -> DeviceArray:
        """A view with a new shape (C-contiguous arrays only); one extent may be -1."""
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = tuple(shape[0])
        extents = [operator.index(s) for s in shape]
        if extents.count(-1) > 1:
            raise KspecValueError(f"shape: only one extent may be -1, got {tuple(extents)}")
        if -1 in extents:
            known = int(np.prod([s for s in extents if s != -1], dtype=np.int64))
            extents[extents.index(-1)] = self.size // known if known else 0
        result = _normalize_shape(extents)
        if int(np.prod(result, dtype=np.int64)) != self.size:
            raise KspecValueError(f"shape: cannot reshape an array of size {self.size} into {result}")
        if not self.is_c_contiguous:
            raise KspecNotImplementedError("reshape of a non-C-contiguous DeviceArray (it would need a copy)")
        return DeviceArray._wrap(
            self._ptr, result, self._dtype, self._device_id, self, self._stream, stream_owner=self._stream_owner
        )

    def transpose(self, *axes: Any) -> DeviceArray:
        """A view with its axes permuted, as NumPy's ``transpose``: reversed when none are given, else
        ``axes[k]`` is the axis that becomes axis k (negative ones count from the end). No copy."""
        if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], (int, np.integer))):
            axes = () if axes[0] is None else tuple(axes[0])
        n = self.ndim
        try:
            order = tuple(operator.index(a) for a in axes) if axes else tuple(range(n - 1, -1, -1))
        except TypeError:
            raise KspecTypeError(f"axes: expected ints, got {axes!r}") from None
        axis_of = tuple(a % n for a in order) if n else order  # normalised once: checked, then used
        if any(not -n <= a < n for a in order) or sorted(axis_of) != list(range(n)):
            raise KspecValueError(f"axes: expected a permutation of the {n} axes, got {order}")
        return DeviceArray._wrap(
            self._ptr, tuple(self._shape[a] for a in axis_of), self._dtype, self._device_id, self, self._stream,
            strides=tuple(self._strides[a] for a in axis_of), stream_owner=self._stream_owner,
        )

    @property
    def T(self) -> DeviceArray:
        """The view with the axes reversed (:meth:`transpose`)."""
        return self.transpose()

    # -- host transfers ----------------------------------------------------------------------------------

    def _span(self) -> tuple[int, int]:
        """(offset of the lowest byte from ptr, number of bytes) covered by the elements."""
        if self.size == 0:
            return 0, 0
        low = sum(s * (n - 1) for s, n in zip(self._strides, self._shape) if s < 0)
        high = sum(s * (n - 1) for s, n in zip(self._strides, self._shape) if s > 0)
        return low, high - low + self._dtype.itemsize

    def get(self, stream: object = None) -> np.ndarray:
        """Copy to a new NumPy array (waits for the copy; any strides)."""
        cu = _driver.driver_for(self._device_id)
        handle = self._home_stream() if stream is None else stream_handle(stream)
        low, nbytes = self._span()
        host = np.empty(nbytes, dtype=np.uint8)
        if nbytes:
            Device(self._device_id).activate()
            _driver.check(
                cu.cuMemcpyDtoHAsync(host.ctypes.data, self._ptr + low, nbytes, cu_stream(handle)),
                "cuMemcpyDtoHAsync",
            )
            _driver.check(cu.cuStreamSynchronize(cu_stream(handle)), "cuStreamSynchronize")
        if self.is_c_contiguous:
            return host.view(self._dtype).reshape(self._shape)
        view = np.lib.stride_tricks.as_strided(
            host[-low:].view(self._dtype) if low else host.view(self._dtype),
            shape=self._shape,
            strides=self._strides,
        )
        return view.copy()

    def set(self, host: Any, stream: object = None) -> None:
        """Copy a host array of the same shape into this (C-contiguous) array."""
        source = np.asarray(host, dtype=self._dtype, order="C")  # ascontiguousarray makes 0-d 1-d
        if source.shape != self._shape:
            raise KspecValueError(f"host: shape {source.shape} does not match the DeviceArray's {self._shape}")
        if not self.is_c_contiguous:
            raise KspecNotImplementedError("set() into a non-C-contiguous DeviceArray")
        handle = self._home_stream() if stream is None else stream_handle(stream)
        _copy_from_host(self._ptr, source, self._device_id, handle)

    def copy(self, stream: object = None) -> DeviceArray:
        """A new C-contiguous copy on the same device."""
        if not self.is_c_contiguous:
            raise KspecNotImplementedError("copy() of a non-C-contiguous DeviceArray (needs a kernel)")
        cu = _driver.driver_for(self._device_id)
        handle = self._home_stream() if stream is None else stream_handle(stream)
        out = empty(self._shape, self._dtype, device=self._device_id, stream=handle)
        if self.nbytes:
            _driver.check(
                cu.cuMemcpyDtoDAsync(out._ptr, self._ptr, self.nbytes, cu_stream(handle)), "cuMemcpyDtoDAsync"
            )
        return out

    # -- export ------------------------------------------------------------------------------------------

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        if self._device_id == HOST_DEVICE_ID:
            raise AttributeError("__cuda_array_interface__: this DeviceArray is on the CPU device (host memory)")
        return {
            "shape": self._shape,
            "typestr": self._dtype.str,
            "descr": [("", self._dtype.str)],
            "data": (self._ptr, False),
            "strides": None if self.is_c_contiguous else self._strides,
            "version": 3,
            # The consumer synchronises with the stream the array was made on (CAI v3 spells legacy as 1).
            "stream": protocol_stream(self._home_stream()),
        }

    @property
    def __array_interface__(self) -> dict[str, Any]:
        """NumPy's view of an array on the CPU device (zero-copy); a GPU array has none (use ``get()``)."""
        if self._device_id != HOST_DEVICE_ID:
            raise AttributeError("__array_interface__: a DeviceArray on a GPU is not in host memory; use .get()")
        return {"shape": self._shape, "typestr": self._dtype.str, "descr": [("", self._dtype.str)],
                "data": (self._ptr, False), "strides": None if self.is_c_contiguous else self._strides, "version": 3}

    def __dlpack_device__(self) -> tuple[int, int]:
        if self._device_id == HOST_DEVICE_ID:
            return (KDL_CPU, 0)
        return (KDL_CUDA, self._device_id)

    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"DeviceArray is on CUDA device {self._device_id}; cannot export to {dl_device}")
        source = self.copy() if copy else self
        if stream is not None and stream != -1:
            order_after(self._home_stream(), normalize_protocol_stream(stream))
        versioned = max_version is not None and max_version[0] >= 1
        from . import _dlpack  # its ctypes structs are made on the first export
        device_type, device_id = self.__dlpack_device__()  # the capsule says what __dlpack_device__ says
        return _dlpack.make_capsule(
            ptr=source._ptr,
            shape=source._shape,
            strides=source._strides,
            dtype=source._dtype,
            device_id=device_id,
            owner=source,
            versioned=versioned,
            device_type=device_type,
        )


register_kspec_type(DeviceArray)


def _copy_from_host(ptr: int, source: np.ndarray, device_id: int, stream: int) -> None:
    if source.nbytes == 0:
        return
    cu = _driver.driver_for(device_id)
    Device(device_id).activate()
    _driver.check(cu.cuMemcpyHtoDAsync(ptr, source.ctypes.data, source.nbytes, cu_stream(stream)), "cuMemcpyHtoDAsync")
    # Pageable host memory: the copy may still read `source` after the call returns; wait so the caller may
    # reuse or free it.
    _driver.check(cu.cuStreamSynchronize(cu_stream(stream)), "cuStreamSynchronize")


def empty(shape: Any, dtype: Any = np.float64, *, device: int | Device | None = None, stream: object = None) -> DeviceArray:
    """An uninitialised C-contiguous DeviceArray from the device's stream-ordered pool."""
    shape_t = _normalize_shape(shape)
    dt = _normalize_dtype(dtype)
    dev = get_device(device)
    if stream is None and _stream_entered[0]:  # inside `with kspec.Stream(...)`: allocate in its order
        stream = current_stream()
    handle = 0 if stream is None else stream_handle(stream)
    owner = None if stream is None or type(stream) is int else stream
    nbytes = int(np.prod(shape_t, dtype=np.int64)) * dt.itemsize
    block = allocate(nbytes, dev, handle, owner)
    return DeviceArray._wrap(block.ptr, shape_t, dt, dev.id, block, handle, stream_owner=owner)


def zeros(shape: Any, dtype: Any = np.float64, *, device: int | Device | None = None, stream: object = None) -> DeviceArray:
    """A C-contiguous DeviceArray filled with zeros."""
    out = empty(shape, dtype, device=device, stream=stream)
    if out.nbytes:
        cu = _driver.driver_for(out._device_id)
        _driver.check(cu.cuMemsetD8Async(out._ptr, 0, out.nbytes, cu_stream(out._stream)), "cuMemsetD8Async")
    return out


def asarray(obj: Any, dtype: Any = None, *, device: int | Device | None = None, stream: object = None) -> DeviceArray:
    """A DeviceArray for ``obj``.

    Host data (NumPy arrays, lists, scalars) is copied to the device. Device arrays of any library are
    wrapped without a copy (the DeviceArray keeps the original alive); asking such an array for another
    dtype or device is an error rather than a hidden kernel or transfer.
    """
    handle = None if stream is None else stream_handle(stream)
    # a NumPy array is copied on the CPU device too (where it is a device array), as on a GPU
    if isinstance(obj, DeviceArray) or (is_device_array(obj) and not isinstance(obj, (np.ndarray, np.generic))):
        info = array_info(obj, param="obj", stream=handle)
        if dtype is not None and np.dtype(dtype) != info.dtype:
            raise KspecValueError(
                f"dtype: the device array is {info.dtype}; asarray does not convert device data to {np.dtype(dtype)}"
            )
        if device is not None and Device(device).id != info.device_id:
            raise KspecValueError(
                f"device: the array is on device {info.device_id}; asarray does not move it to device {Device(device).id}"
            )
        if isinstance(obj, DeviceArray):
            return obj
        owner = None if stream is None or type(stream) is int else stream
        return DeviceArray._wrap(
            info.ptr, info.shape, info.dtype, info.device_id, info.keepalive, handle or 0, info.strides, owner
        )
    if isinstance(obj, np.ndarray) or np.isscalar(obj) or isinstance(obj, (list, tuple)):
        host = np.asarray(obj, dtype=dtype, order="C")  # not ascontiguousarray: it makes a 0-d array 1-d
    else:
        try:
            host = np.asarray(obj, dtype=dtype, order="C")
        except Exception as exc:
            raise KspecTypeError(f"obj: cannot make an array of {type(obj).__name__} ({exc})") from None
    out = empty(host.shape, host.dtype, device=device, stream=stream)
    _copy_from_host(out._ptr, host, out._device_id, out._stream)
    return out


def device_array_from_pointer(
    ptr: int, nbytes: int, dtype: Any, shape: Any, device_id: int, owner: Any
) -> DeviceArray:
    """A DeviceArray over memory kspec does not own (``owner`` keeps it alive); shape must fit ``nbytes``."""
    dt = _normalize_dtype(dtype)
    if shape is None:
        if nbytes % dt.itemsize:
            raise KspecValueError(f"dtype: {nbytes} bytes are not a whole number of {dt} items")
        shape_t: tuple[int, ...] = (nbytes // dt.itemsize,)
    else:
        shape_t = _normalize_shape(shape)
    needed = int(np.prod(shape_t, dtype=np.int64)) * dt.itemsize
    if needed > nbytes:
        raise KspecValueError(f"shape: {shape_t} of {dt} needs {needed} bytes but the memory has {nbytes}")
    return DeviceArray._wrap(ptr, shape_t, dt, device_id, owner, 0)

