"""Texture and surface objects: what ``cupy.cuda.texture`` gives, on the driver API (``cuTexObjectCreate``,
``cuSurfObjectCreate``), for code without CuPy.

The descriptors are plain validated records: making one touches no driver, so mistakes show up where they
are made, and on a machine without a GPU. The objects hold what they read (the descriptors, the CUDA array or
the device array behind them), so that memory lives as long as a kernel may be handed the handle. Kernels
take a :class:`TextureObject` or :class:`SurfaceObject` by value as ``cudaTextureObject_t`` /
``cudaSurfaceObject_t`` (``kspec.runtime.is_texture_type`` recognises these class names).
"""

from __future__ import annotations

from typing import Any

from .._errors import KspecNotImplementedError, KspecTypeError, KspecValueError
from . import _driver
from ._channelformat import ChannelFormatDescriptor, enum_value, nonnegative_int
from ._cudaarray import SURFACE_LOAD_STORE, CUDAArray, release_quietly
from ._device import Device
from ._interop import array_info

# The numbers are CUDA's (cudaResourceType, cudaTextureAddressMode, ...), so CuPy's constants work too.
RESOURCE_TYPES = {"array": 0, "mipmapped_array": 1, "linear": 2, "pitch2d": 3}
ADDRESS_MODES = {"wrap": 0, "clamp": 1, "mirror": 2, "border": 3}
FILTER_MODES = {"point": 0, "linear": 1}
READ_MODES = {"element_type": 0, "normalized_float": 1}
ARRAY, LINEAR, PITCH2D = 0, 2, 3


class ResourceDescriptor:
    """What a texture or surface reads, as CuPy's ``ResourceDescriptor`` (``cudaResourceDesc``).

    ``restype`` is ``'array'`` (a :class:`CUDAArray` as ``cuArr``), ``'linear'`` (a device array ``arr`` of any
    library as one range of ``sizeInBytes`` bytes, default all of it; kernels read it with ``tex1Dfetch``) or
    ``'pitch2d'`` (a 2-d device array ``arr`` as ``height`` rows of ``width`` elements, ``pitchInBytes``
    apart; by default the array's own shape and row stride), or CUDA's numbers 0, 2, 3. ``chDesc`` is the
    element format of ``arr``; by default one channel of its dtype.
    """

    def __init__(
        self,
        restype: str | int,
        cuArr: CUDAArray | None = None,
        arr: Any = None,
        chDesc: ChannelFormatDescriptor | None = None,
        sizeInBytes: int = 0,
        width: int = 0,
        height: int = 0,
        pitchInBytes: int = 0,
    ) -> None:
        kind = enum_value(restype, RESOURCE_TYPES, "restype")
        name = next(n for n, v in RESOURCE_TYPES.items() if v == kind)
        if kind == RESOURCE_TYPES["mipmapped_array"]:
            raise KspecNotImplementedError("restype: mipmapped arrays are not supported (CuPy has none either)")
        self.restype = kind
        self.cuArr = cuArr
        self.arr = arr
        self.sizeInBytes = self.width = self.height = self.pitchInBytes = 0
        if kind == ARRAY:
            if not isinstance(cuArr, CUDAArray):
                raise KspecTypeError(f"cuArr: restype 'array' needs a kspec CUDAArray, got {type(cuArr).__name__}")
            if arr is not None:
                raise KspecValueError("arr: restype 'array' reads cuArr, not a device array")
            if chDesc is not None and chDesc != cuArr.desc:
                raise KspecValueError(f"chDesc: cuArr holds {cuArr.desc!r}, not {chDesc!r}")
            self.chDesc = cuArr.desc
            self._device_id = cuArr.device.id
            self._ptr = 0
            return
        if cuArr is not None:
            raise KspecValueError(f"cuArr: restype '{name}' reads a device array (arr), not a CUDAArray")
        if arr is None:
            raise KspecTypeError(f"arr: restype '{name}' needs a device array")
        info = array_info(arr, param="arr")
        if chDesc is None:
            chDesc = ChannelFormatDescriptor.from_dtype(info.dtype)
        elif not isinstance(chDesc, ChannelFormatDescriptor):
            raise KspecTypeError(f"chDesc: expected a kspec ChannelFormatDescriptor, got {type(chDesc).__name__}")
        if chDesc.dtype != info.dtype:
            raise KspecValueError(f"chDesc: {chDesc!r} reads {chDesc.dtype} channels but arr is {info.dtype}")
        self.chDesc = chDesc
        self._device_id = info.device_id
        self._ptr = info.ptr
        self._keepalive = info.keepalive  # what owns the memory (the array, or cuda.core's view of it)
        nbytes = info.size * info.dtype.itemsize
        if kind == LINEAR:
            if not info.is_c_contiguous:
                raise KspecValueError("arr: restype 'linear' reads one range of memory; arr must be C-contiguous")
            size = nonnegative_int(sizeInBytes, "sizeInBytes") or nbytes
            if size > nbytes or size % chDesc.itemsize:
                raise KspecValueError(
                    f"sizeInBytes: expected a multiple of {chDesc.itemsize} (the element size) up to arr's {nbytes} "
                    f"bytes, got {size}"
                )
            self.sizeInBytes = size
            return
        if len(info.shape) != 2 or info.strides[1] != info.dtype.itemsize or info.strides[0] <= 0:
            raise KspecValueError(
                f"arr: restype 'pitch2d' reads rows of contiguous elements; expected a 2-d array with contiguous "
                f"rows, got shape {info.shape} strides {info.strides}"
            )
        rows, row_items = info.shape
        self.height = nonnegative_int(height, "height") or rows
        self.width = nonnegative_int(width, "width") or row_items // chDesc.num_channels
        self.pitchInBytes = nonnegative_int(pitchInBytes, "pitchInBytes") or info.strides[0]
        row_bytes = self.width * chDesc.itemsize
        span = (rows - 1) * info.strides[0] + row_items * info.dtype.itemsize
        if self.pitchInBytes < row_bytes:
            raise KspecValueError(f"pitchInBytes: {self.pitchInBytes} is less than a row ({row_bytes} bytes)")
        if (self.height - 1) * self.pitchInBytes + row_bytes > span:
            raise KspecValueError(
                f"width, height, pitchInBytes: {self.height} rows of {self.width} elements, {self.pitchInBytes} "
                f"bytes apart, reach past arr (shape {info.shape}, {span} bytes)"
            )

    def get_resource_desc(self) -> dict[str, Any]:
        """The description as a dict, as CuPy's method returns it."""
        fmt = self.chDesc.get_channel_format()
        if self.restype == ARRAY:
            return {"resType": ARRAY, "array": {"array": self.cuArr.ptr if self.cuArr is not None else 0}}
        if self.restype == LINEAR:
            return {"resType": LINEAR, "linear": {"devPtr": self._ptr, "desc": fmt, "sizeInBytes": self.sizeInBytes}}
        pitch2d = {"devPtr": self._ptr, "desc": fmt, "width": self.width, "height": self.height}
        return {"resType": PITCH2D, "pitch2D": {**pitch2d, "pitchInBytes": self.pitchInBytes}}

    def _to_driver(self, cu: Any) -> Any:
        """The ``CUDA_RESOURCE_DESC`` (``cu`` is ``cuda.bindings.driver``)."""
        desc = cu.CUDA_RESOURCE_DESC()
        desc.resType = cu.CUresourcetype(self.restype)
        if self.cuArr is not None:  # restype 'array'
            self.cuArr._check_open()
            desc.res.array.hArray = self.cuArr._handle
            return desc
        fmt = getattr(cu.CUarray_format, self.chDesc.format_name)
        target = desc.res.linear if self.restype == LINEAR else desc.res.pitch2D
        target.devPtr, target.format, target.numChannels = self._ptr, fmt, self.chDesc.num_channels
        if self.restype == LINEAR:
            target.sizeInBytes = self.sizeInBytes
        else:
            target.width, target.height, target.pitchInBytes = self.width, self.height, self.pitchInBytes
        return desc

    def _check_alignment(self, device: Device) -> None:
        """CUDA's alignment rules for textures over linear memory, checked here to name what is wrong."""
        if self.restype == ARRAY:
            return
        alignment = device.attribute("texture_alignment")
        if self._ptr % alignment:
            raise KspecValueError(
                f"arr: a texture over linear memory must start at a multiple of {alignment} bytes (this device's "
                f"texture alignment); arr starts at 0x{self._ptr:x}"
            )
        pitch_alignment = device.attribute("texture_pitch_alignment")
        if self.restype == PITCH2D and self.pitchInBytes % pitch_alignment:
            raise KspecValueError(
                f"pitchInBytes: must be a multiple of {pitch_alignment} (this device's texture pitch alignment), "
                f"got {self.pitchInBytes}"
            )

    def __repr__(self) -> str:
        name = next(n for n, v in RESOURCE_TYPES.items() if v == self.restype)
        return f"<kspec ResourceDescriptor {name} {self.chDesc!r}>"


class TextureDescriptor:
    """How a texture is sampled, as CuPy's ``TextureDescriptor`` (``cudaTextureDesc``), same arguments.

    ``addressModes``: up to 3 (one per dimension, the rest ``'wrap'``, CUDA's default) of ``'wrap'``,
    ``'clamp'``, ``'mirror'``, ``'border'`` (CUDA: wrap and mirror need ``normalizedCoords``; it clamps
    otherwise). ``filterMode``: ``'point'`` or ``'linear'`` (linear needs float results: a float format, or
    ``readMode='normalized_float'``). ``readMode``: ``'element_type'`` or ``'normalized_float'`` (8- and
    16-bit integers read as floats in [0, 1], signed in [-1, 1]). ``borderColors``: up to 4 floats, the value
    outside the texture in ``'border'`` mode. Each enum also takes CUDA's number (CuPy's constants).
    """

    def __init__(
        self,
        addressModes: Any = None,
        filterMode: str | int = 0,
        readMode: str | int = 0,
        sRGB: bool | None = None,
        borderColors: Any = None,
        normalizedCoords: bool | None = None,
        maxAnisotropy: int | None = None,
    ) -> None:
        modes = [] if addressModes is None else _sequence(addressModes, 3, "addressModes")
        self.addressModes = tuple(enum_value(m, ADDRESS_MODES, "addressModes") for m in modes) + (0,) * (3 - len(modes))
        self.filterMode = enum_value(filterMode, FILTER_MODES, "filterMode")
        self.readMode = enum_value(readMode, READ_MODES, "readMode")
        self.sRGB = bool(sRGB)
        colors = [] if borderColors is None else _sequence(borderColors, 4, "borderColors")
        try:
            self.borderColors = tuple(float(c) for c in colors) + (0.0,) * (4 - len(colors))
        except (TypeError, ValueError):
            raise KspecTypeError(f"borderColors: expected up to 4 numbers, got {borderColors!r}") from None
        self.normalizedCoords = bool(normalizedCoords)
        self.maxAnisotropy = 0 if maxAnisotropy is None else nonnegative_int(maxAnisotropy, "maxAnisotropy")

    def get_texture_desc(self) -> dict[str, Any]:
        """The description as a dict, as CuPy's method returns it."""
        return {
            "addressMode": self.addressModes, "filterMode": self.filterMode, "readMode": self.readMode,
            "sRGB": int(self.sRGB), "borderColor": self.borderColors, "normalizedCoords": int(self.normalizedCoords),
            "maxAnisotropy": self.maxAnisotropy,
        }  # fmt: skip

    def _check_for(self, resource: ResourceDescriptor) -> None:
        """Refuse what CUDA refuses for this resource, before the driver is asked: linear filtering of values
        read as integers (linear memory is never filtered: it is fetched, ``tex1Dfetch``)."""
        fmt = resource.chDesc
        if resource.restype != LINEAR and self.filterMode == FILTER_MODES["linear"] and fmt.kind != "float":
            if self.readMode == READ_MODES["element_type"] or fmt.bits == 32:
                raise KspecValueError(
                    f"filterMode: linear filtering returns floats; the texture reads {fmt.dtype} as itself "
                    "(use readMode 'normalized_float' on 8- or 16-bit integers, or a float format)"
                )

    def _to_driver(self, cu: Any, channel_format: ChannelFormatDescriptor) -> Any:
        """The ``CUDA_TEXTURE_DESC`` for a resource of ``channel_format``. The driver spells the read mode as a
        flag: without ``CU_TRSF_READ_AS_INTEGER`` it promotes 8- and 16-bit integers to normalised floats."""
        desc = cu.CUDA_TEXTURE_DESC()
        desc.addressMode = [cu.CUaddress_mode(m) for m in self.addressModes]
        desc.filterMode = cu.CUfilter_mode(self.filterMode)
        flags = 0
        if self.readMode == READ_MODES["element_type"] and channel_format.kind != "float":
            flags |= cu.CU_TRSF_READ_AS_INTEGER
        if self.normalizedCoords:
            flags |= cu.CU_TRSF_NORMALIZED_COORDINATES
        if self.sRGB:
            flags |= cu.CU_TRSF_SRGB
        desc.flags = flags
        desc.borderColor = list(self.borderColors)
        desc.maxAnisotropy = self.maxAnisotropy
        return desc

    def __repr__(self) -> str:
        modes = tuple(next(n for n, v in ADDRESS_MODES.items() if v == m) for m in self.addressModes)
        filter_name = next(n for n, v in FILTER_MODES.items() if v == self.filterMode)
        read_name = next(n for n, v in READ_MODES.items() if v == self.readMode)
        return (
            f"<kspec TextureDescriptor addressModes={modes} filterMode={filter_name!r} readMode={read_name!r} "
            f"normalizedCoords={self.normalizedCoords}>"
        )


def _sequence(value: Any, most: int, param: str) -> list[Any]:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        value = [value]  # one mode or colour for the first dimension, as a convenience
    items = list(value)
    if len(items) > most:
        raise KspecValueError(f"{param}: expected at most {most} values, got {len(items)}")
    return items


class _HandleObject:
    """A driver object (texture or surface) made from descriptors: its handle, and its lifetime."""

    _destroy = ""  # the driver's destructor
    _kind = ""

    def __init__(self, ResDesc: ResourceDescriptor) -> None:
        self._handle: Any = None  # first: __del__ runs even when a check below raises
        if not isinstance(ResDesc, ResourceDescriptor):
            raise KspecTypeError(f"ResDesc: expected a kspec ResourceDescriptor, got {type(ResDesc).__name__}")
        self.ResDesc = ResDesc
        self._device_id = ResDesc._device_id

    def _created(self, handle: Any) -> None:
        self._handle = handle
        if self.ResDesc.cuArr is not None:
            self.ResDesc.cuArr._users.add(self)  # the array refuses close() while this is open

    @property
    def ptr(self) -> int:
        """The 64-bit handle (``cudaTextureObject_t`` / ``cudaSurfaceObject_t``) kernels take by value."""
        if self._handle is None:
            raise KspecValueError(f"the {self._kind} is closed; its handle must not reach a kernel")
        return int(self._handle)

    @property
    def closed(self) -> bool:
        return self._handle is None

    def close(self) -> None:
        """Destroy the object now (closing twice is harmless)."""
        if self._handle is None:
            return
        cu = _driver.driver()
        Device(self._device_id).activate()
        handle, self._handle = self._handle, None
        _driver.check(getattr(cu, self._destroy)(handle), self._destroy)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_handle", None) is not None:
            release_quietly(self._destroy, self._handle, self._device_id)
            self._handle = None

    def __repr__(self) -> str:
        state = "closed" if self._handle is None else f"0x{int(self._handle):x} on device {self._device_id}"
        return f"<kspec.{type(self).__name__} {state}>"


class TextureObject(_HandleObject):
    """A texture object (``cudaTextureObject_t``) over ``ResDesc`` sampled as ``TexDesc``, as CuPy's
    ``TextureObject(ResDesc, TexDesc)``. Pass it to a RawKernel (parameter ``cudaTextureObject_t``) or to an
    ElementwiseKernel input typed by a placeholder of its own (``'U texObj'``); ``.ptr`` is the handle.
    Destroyed by :meth:`close` or when garbage-collected.
    """

    _destroy = "cuTexObjectDestroy"
    _kind = "TextureObject"

    def __init__(self, ResDesc: ResourceDescriptor, TexDesc: TextureDescriptor) -> None:
        super().__init__(ResDesc)
        if not isinstance(TexDesc, TextureDescriptor):
            raise KspecTypeError(f"TexDesc: expected a kspec TextureDescriptor, got {type(TexDesc).__name__}")
        self.TexDesc = TexDesc
        TexDesc._check_for(ResDesc)
        cu = _driver.driver()
        device = Device(self._device_id)
        device.activate()
        ResDesc._check_alignment(device)
        tex = TexDesc._to_driver(cu, ResDesc.chDesc)
        self._created(_driver.check(cu.cuTexObjectCreate(ResDesc._to_driver(cu), tex, None), "cuTexObjectCreate"))


class SurfaceObject(_HandleObject):
    """A surface object (``cudaSurfaceObject_t``) over a CUDA array made with ``CUDAArray.SURFACE_LOAD_STORE``,
    as CuPy's ``SurfaceObject(ResDesc)``: kernels write (``surf2Dwrite``) and read it. ``.ptr`` is the handle.
    Destroyed by :meth:`close` or when garbage-collected.
    """

    _destroy = "cuSurfObjectDestroy"
    _kind = "SurfaceObject"

    def __init__(self, ResDesc: ResourceDescriptor) -> None:
        super().__init__(ResDesc)
        if ResDesc.restype != ARRAY or ResDesc.cuArr is None:
            raise KspecValueError("ResDesc: a surface reads and writes a CUDAArray (restype 'array')")
        if not ResDesc.cuArr.flags & SURFACE_LOAD_STORE:
            raise KspecValueError("ResDesc: the CUDAArray needs flags=CUDAArray.SURFACE_LOAD_STORE to back a surface")
        cu = _driver.driver()
        Device(self._device_id).activate()
        self._created(_driver.check(cu.cuSurfObjectCreate(ResDesc._to_driver(cu)), "cuSurfObjectCreate"))
