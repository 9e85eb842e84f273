"""CUDA arrays, the memory of textures and surfaces: what ``cupy.cuda.texture.CUDAarray`` gives, on the driver.

A CUDA array is device memory laid out for the texture units; it has no pointer a kernel could index, so
kernels read it through a texture object and write it through a surface object (``_texture.py``). Data gets
in and out by copies (``cuMemcpy3DAsync``) from and to NumPy arrays and device arrays of any library kspec
reads.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from .._errors import KspecTypeError, KspecValueError
from . import _driver
from ._channelformat import ChannelFormatDescriptor, nonnegative_int
from ._device import Device, get_device
from ._interop import array_info, is_device_array, library_of
from ._stream import cu_stream, current_stream, default_stream_getter, stream_handle

# cuArray3DCreate's flags, with the values of cudaMalloc3DArray's cudaArrayLayered, ...SurfaceLoadStore, ...
LAYERED, SURFACE_LOAD_STORE, CUBEMAP, TEXTURE_GATHER = 0x1, 0x2, 0x4, 0x8
_ALL_FLAGS = LAYERED | SURFACE_LOAD_STORE | CUBEMAP | TEXTURE_GATHER


def check_data_shape(shape: tuple[int, ...], expected: tuple[int, ...], channels: int, param: str) -> None:
    """``shape`` is ``expected`` or, for several channels, ``expected`` with the channels as a last axis."""
    split = (*expected[:-1], expected[-1] // channels, channels)
    if shape == expected or (channels > 1 and shape == split):
        return
    also = f" (or {split}, the channels as a last axis)" if channels > 1 else ""
    raise KspecValueError(f"{param}: expected shape {expected}{also}, got {shape}")


def row_layout(
    shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int, channels: int, extents: tuple[int, int], param: str
) -> tuple[int, int]:
    """(bytes from one row to the next, rows from one slice to the next) of linear memory of ``shape`` (one that
    :func:`check_data_shape` accepted) holding ``extents = (depth, height)``. Rows must be contiguous; the
    distances between them are free (a pitched or sliced array copies without a detour)."""
    depth, height = extents
    outer = (1 if depth else 0) + (1 if height else 0)
    if len(shape) == outer + 2:  # the channels as a last axis: fold them into the row
        if (shape[-1] > 1 and strides[-1] != itemsize) or (shape[-2] > 1 and strides[-2] != channels * itemsize):
            raise KspecValueError(f"{param}: its rows must be contiguous (strides {strides}); copy it first")
        shape, strides = (*shape[:-2], shape[-2] * shape[-1]), (*strides[:-2], itemsize)
    row_bytes = shape[-1] * itemsize
    if shape[-1] > 1 and strides[-1] != itemsize:
        raise KspecValueError(f"{param}: its rows must be contiguous (strides {strides}); copy it first")
    rows = 1
    pitch = strides[outer - 1] if outer and shape[outer - 1] > 1 else row_bytes
    if depth and height:  # slices of rows: the slice distance must be a whole number of rows
        slice_bytes = strides[0] if depth > 1 else pitch * height
        rows = slice_bytes // pitch if pitch > 0 else 0
        if pitch <= 0 or slice_bytes % pitch or rows < height:
            raise KspecValueError(f"{param}: its slices overlap or are out of order (strides {strides}); copy it first")
    elif height:
        rows = height
    if pitch < row_bytes:
        raise KspecValueError(f"{param}: its rows overlap or are out of order (strides {strides}); copy it first")
    return pitch, rows


def release_quietly(destroy: str, handle: Any, device_id: int) -> None:
    """Call the driver's ``destroy`` (``'cuArrayDestroy'``...) on ``handle`` from a finalizer: in a thread
    without a current context it makes the owner's current and retries; at interpreter shutdown it gives up."""
    cu = _driver._driver
    if cu is None:
        return
    try:
        for _attempt in range(2):
            (err,) = getattr(cu, destroy)(handle)
            if err != cu.CUresult.CUDA_ERROR_INVALID_CONTEXT:
                break
            Device(device_id).activate()
    except Exception:  # interpreter shutdown: the context may already be gone
        pass


class CUDAArray:
    """A 1-, 2- or 3-d CUDA array (``cudaArray_t``), as CuPy's ``CUDAarray(desc, width, height=0, depth=0,
    flags=0)``; made with ``cuArray3DCreate`` on ``device`` (default: the current one).

    ``width``, ``height``, ``depth`` count elements; ``height=0`` makes a 1-d array, ``depth=0`` a 2-d one.
    ``flags`` combines ``CUDAArray.LAYERED`` (``depth`` is then the number of layers of 1-d or 2-d arrays),
    ``SURFACE_LOAD_STORE`` (needed by a :class:`SurfaceObject`), ``CUBEMAP`` and ``TEXTURE_GATHER``, with the
    values of CUDA's ``cudaArray*`` flags. Freed by :meth:`close` or when garbage-collected; a texture or
    surface object made over it keeps it alive.
    """

    LAYERED = LAYERED
    SURFACE_LOAD_STORE = SURFACE_LOAD_STORE
    CUBEMAP = CUBEMAP
    TEXTURE_GATHER = TEXTURE_GATHER

    desc: ChannelFormatDescriptor
    width: int
    height: int
    depth: int
    flags: int

    def __init__(
        self,
        desc: ChannelFormatDescriptor,
        width: int,
        height: int = 0,
        depth: int = 0,
        flags: int = 0,
        *,
        device: int | Device | None = None,
    ) -> None:
        self._handle: Any = None  # first: __del__ runs even when a check below raises
        if not isinstance(desc, ChannelFormatDescriptor):
            raise KspecTypeError(f"desc: expected a kspec ChannelFormatDescriptor, got {type(desc).__name__}")
        width, height, depth = (
            nonnegative_int(value, name) for value, name in zip((width, height, depth), ("width", "height", "depth"))
        )
        flags = nonnegative_int(flags, "flags")
        if flags & ~_ALL_FLAGS:
            raise KspecValueError(
                f"flags: expected a combination of CUDAArray.LAYERED (1), SURFACE_LOAD_STORE (2), CUBEMAP (4) "
                f"and TEXTURE_GATHER (8), got {flags:#x}"
            )
        if width == 0:
            raise KspecValueError("width: a CUDA array needs width >= 1")
        if flags & LAYERED and depth == 0:
            raise KspecValueError("depth: a layered CUDA array gives its number of layers as depth (>= 1), got 0")
        if not flags & LAYERED and depth and not height:
            raise KspecValueError(f"height: a 3-d CUDA array (depth={depth}) needs height >= 1, got 0")
        if flags & CUBEMAP and (height != width or depth % 6 or not depth or (depth != 6 and not flags & LAYERED)):
            raise KspecValueError(
                f"width, height, depth: a cubemap is width x width x 6 (layered: 6 per layer), got "
                f"{width} x {height} x {depth}"
            )
        self.desc, self.width, self.height, self.depth, self.flags = desc, width, height, depth, flags
        cu = _driver.driver()
        dev = get_device(device)
        dev.activate()
        spec = cu.CUDA_ARRAY3D_DESCRIPTOR()
        spec.Width, spec.Height, spec.Depth = width, height, depth
        spec.Format = getattr(cu.CUarray_format, desc.format_name)
        spec.NumChannels = desc.num_channels
        spec.Flags = flags
        self._handle = _driver.check(cu.cuArray3DCreate(spec), "cuArray3DCreate")
        self._device_id = dev.id
        self._users: weakref.WeakSet[Any] = weakref.WeakSet()  # texture/surface objects over this array

    # -- description -------------------------------------------------------------------------------------

    @property
    def ptr(self) -> int:
        """The ``CUarray`` handle as an int (0 once closed)."""
        return 0 if self._handle is None else int(self._handle)

    @property
    def ndim(self) -> int:
        """The number of axes of :attr:`shape` (2 for a layered 1-d array, 3 for a layered 2-d one)."""
        return len(self.shape)

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of the data :meth:`copy_from` and :meth:`copy_to` take, as CuPy's:
        ``(channels * width,)``, ``(height, channels * width)``, ``(depth, height, channels * width)``."""
        return tuple(e for e in (self.depth, self.height) if e) + (self.desc.num_channels * self.width,)

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype of one channel, which copies take."""
        return self.desc.dtype

    @property
    def device(self) -> Device:
        return Device(self._device_id)

    @property
    def closed(self) -> bool:
        return self._handle is None

    def __repr__(self) -> str:
        state = "closed" if self._handle is None else f"on device {self._device_id}"
        return f"<kspec.CUDAArray {self.desc!r} shape={self.shape} flags={self.flags:#x} {state}>"

    # -- lifetime ----------------------------------------------------------------------------------------

    def close(self) -> None:
        """Free the array now (closing twice is harmless); refused while a texture or surface object over
        it is open, since a kernel reading it would read freed memory."""
        if self._handle is None:
            return
        open_users = [u for u in self._users if not u.closed]
        if open_users:
            raise KspecValueError(
                f"close: {len(open_users)} texture/surface object(s) still read this CUDAArray; close them first"
            )
        cu = _driver.driver()
        Device(self._device_id).activate()
        handle, self._handle = self._handle, None
        _driver.check(cu.cuArrayDestroy(handle), "cuArrayDestroy")

    def __enter__(self) -> CUDAArray:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_handle", None) is not None:
            release_quietly("cuArrayDestroy", self._handle, self._device_id)
            self._handle = None

    def _check_open(self) -> None:
        if self._handle is None:
            raise KspecValueError("the CUDAArray is closed")

    # -- copies ------------------------------------------------------------------------------------------

    def copy_from(self, in_arr: Any, stream: object = None) -> None:
        """Copy a NumPy array or a device array (kspec, CuPy, PyTorch, ...) of :attr:`shape` and :attr:`dtype`
        into this array. On ``stream`` (default: the current kspec stream, else the current stream of the
        array's library, else the legacy default stream); a copy from host memory is finished on return."""
        self._copy(in_arr, stream, into_array=True, param="in_arr")

    def copy_to(self, out_arr: Any, stream: object = None) -> None:
        """Copy this array into a NumPy array (C-contiguous, writable) or a device array of :attr:`shape` and
        :attr:`dtype`; streams as :meth:`copy_from`. A copy into host memory is finished on return."""
        self._copy(out_arr, stream, into_array=False, param="out_arr")

    def _copy(self, arr: Any, stream: object, *, into_array: bool, param: str) -> None:
        self._check_open()
        expected = self.shape
        host = isinstance(arr, np.ndarray)
        if not host and not is_device_array(arr):
            raise KspecTypeError(
                f"{param}: expected a NumPy array or a device array (kspec, CuPy, PyTorch, or one with "
                f"__cuda_array_interface__ / __dlpack__), got {type(arr).__name__}"
            )
        if stream is not None:
            handle = stream_handle(stream)
        else:
            entered = current_stream()
            handle = entered.handle if entered is not None else default_stream_getter(library_of(arr))(self._device_id)
        if host:
            if into_array:
                arr = np.asarray(arr, order="C")  # keeps a 0-d array 0-d
            elif not (arr.flags.c_contiguous and arr.flags.writeable):
                raise KspecValueError(f"{param}: a NumPy array to copy into must be C-contiguous and writable")
            shape, strides, dtype, ptr = arr.shape, arr.strides, arr.dtype, arr.ctypes.data
        else:
            info = array_info(arr, param=param, stream=handle)
            if info.device_id != self._device_id:
                raise KspecValueError(
                    f"{param}: the array is on device {info.device_id}, the CUDAArray on device {self._device_id}"
                )
            shape, strides, dtype, ptr = info.shape, info.strides, info.dtype, info.ptr
        if dtype != self.dtype:
            raise KspecValueError(
                f"{param}: expected dtype {self.dtype} (the CUDAArray holds {self.desc.bits}-bit {self.desc.kind} "
                f"channels), got {dtype}"
            )
        check_data_shape(tuple(shape), expected, self.desc.num_channels, param)
        pitch, rows = row_layout(
            tuple(shape), tuple(strides), dtype.itemsize, self.desc.num_channels, (self.depth, self.height), param
        )
        cu = _driver.driver()
        Device(self._device_id).activate()
        copy = memcpy3d(cu, self, ptr, host, pitch, rows, into_array)
        _driver.check(cu.cuMemcpy3DAsync(copy, cu_stream(handle)), "cuMemcpy3DAsync")
        if host:  # pageable memory: the caller may reuse (or read) it as soon as this returns
            _driver.check(cu.cuStreamSynchronize(cu_stream(handle)), "cuStreamSynchronize")


def memcpy3d(cu: Any, array: CUDAArray, ptr: int, host: bool, pitch: int, rows: int, into_array: bool) -> Any:
    """The ``CUDA_MEMCPY3D`` of a whole CUDA array from or to linear memory at ``ptr`` (rows ``pitch`` bytes
    apart, slices ``rows`` rows apart). 1-d and 2-d arrays are copied as one slice of one or more rows."""
    copy = cu.CUDA_MEMCPY3D()
    copy.WidthInBytes = array.width * array.desc.itemsize
    copy.Height, copy.Depth = max(array.height, 1), max(array.depth, 1)
    side, other = ("dst", "src") if into_array else ("src", "dst")
    kinds = cu.CUmemorytype
    linear = {"Host": ptr} if host else {"Device": ptr}
    fields = {
        side + "MemoryType": kinds.CU_MEMORYTYPE_ARRAY, side + "Array": array._handle,
        other + "MemoryType": kinds.CU_MEMORYTYPE_HOST if host else kinds.CU_MEMORYTYPE_DEVICE,
        **{other + name: value for name, value in linear.items()}, other + "Pitch": pitch, other + "Height": rows,
    }  # fmt: skip
    for name, value in fields.items():
        setattr(copy, name, value)
    return copy
