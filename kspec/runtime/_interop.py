"""Arrays from any library: CuPy, PyTorch, kspec's own, and anything exposing ``__cuda_array_interface__``
(v3) or ``__dlpack__``.

Each argument's *type* is classified once (a dict lookup afterwards) into a kind that says how to read its
pointer and device cheaply: CuPy and PyTorch through their own attributes (building the interface dict per
call would cost more than the launch), everything else through the protocols, which cuda.core's
``StridedMemoryView`` reads (:mod:`._generic`; cuda.core is imported on the first such array). Neither CuPy
nor PyTorch is ever imported by kspec: a type is recognised through ``sys.modules`` only when one of its
objects shows up.
"""

from __future__ import annotations

import math

import sys
from typing import Any

import numpy as np

from .._named_tuple import NamedTuple
from .._errors import KspecTypeError, KspecValueError, LaunchError
from ..dtypes import c_strides
from . import _device_kind, _generic

KSPEC = "kspec"  # DeviceArray and the pointers RawModule.get_global returns
CUPY = "cupy"
TORCH = "torch"
CAI = "cai"
DLPACK = "dlpack"
# Libraries whose arrays come in through the protocols (DLPack, CAI) and whose outputs go back as theirs:
# kspec allocates a DeviceArray, launches, then hands it over zero-copy (kspec/runtime/_export.py).
JAX = "jax"
NUMBA = "numba"
NUMPY = "numpy"  # the library of NumPy arrays used as device arrays on the CPU device (outputs go back as NumPy)
HOST = "host"  # NumPy arrays and other host-memory containers: a clear error, never a silent copy

ARRAY_KINDS = frozenset({KSPEC, CUPY, TORCH, CAI, DLPACK})

_kinds: dict[type, str | None] = {}
_kspec_types: set[type] = set()


def register_kspec_type(tp: type) -> None:
    """Declare a kspec type with ``_ptr`` / ``_device_id`` slots (DeviceArray, DeviceGlobal)."""
    _kspec_types.add(tp)
    _kinds.pop(tp, None)


def _classify(tp: type) -> str | None:
    if any(issubclass(tp, k) for k in _kspec_types):
        return KSPEC
    root = tp.__module__.partition(".")[0]
    if root == "cupy":
        cupy = sys.modules.get("cupy")
        if cupy is not None and issubclass(tp, cupy.ndarray):
            return CUPY
    if root == "torch":
        torch = sys.modules.get("torch")
        if torch is not None and issubclass(tp, torch.Tensor):
            return TORCH
    if issubclass(tp, np.ndarray):
        return HOST
    if hasattr(tp, "__cuda_array_interface__"):
        return CAI
    if hasattr(tp, "__dlpack__") and hasattr(tp, "__dlpack_device__"):
        return DLPACK
    if hasattr(tp, "__array_interface__") or hasattr(tp, "__array__"):
        return HOST
    return None


def kind_of(tp: type) -> str | None:
    """The array kind of a type (see the module constants), or None when it is not an array type."""
    try:
        return _kinds[tp]
    except KeyError:
        kind = _kinds[tp] = _classify(tp)
        return kind


def kind_of_object(obj: object) -> str | None:
    """:func:`kind_of` for an object: also sees an interface set as an *instance* attribute (simple
    wrappers do that), which the type alone cannot show. Not cached: used when a packer is built."""
    kind = kind_of(type(obj))
    if kind is None:
        if hasattr(obj, "__cuda_array_interface__"):
            return CAI
        if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
            return DLPACK
    return kind


_TEXTURE_TYPE_NAMES = ("TextureObject", "SurfaceObject")


def is_texture_type(tp: type) -> bool:
    """CuPy's ``cupy.cuda.texture.TextureObject`` / ``SurfaceObject`` (or any such type with an int ``.ptr``
    handle): passed to kernels by value as ``cudaTextureObject_t`` / ``cudaSurfaceObject_t``."""
    return tp.__name__ in _TEXTURE_TYPE_NAMES and tp.__module__.partition(".")[0] in ("cupy", "kspec")


def library_of(obj: object) -> str | None:
    """``'cupy'``, ``'torch'``, or None (kspec arrays and other libraries): which library outputs go to."""
    kind = kind_of(type(obj))
    return kind if kind in (CUPY, TORCH) else None


def is_device_array(obj: object) -> bool:
    return accepts_kind(kind_of_object(obj))


def accepts_kind(kind: str | None) -> bool:
    """Whether arrays of ``kind`` are device arrays now: NumPy arrays are, on the CPU device."""
    return kind in ARRAY_KINDS or (kind == HOST and _device_kind.host_active)


# -- PyTorch dtypes --------------------------------------------------------------------------------------

_torch_to_numpy: dict[Any, np.dtype] = {}
_numpy_to_torch: dict[np.dtype, Any] = {}


def _torch_tables() -> None:
    torch = sys.modules["torch"]
    pairs = [
        ("bool", "bool"), ("int8", "int8"), ("int16", "int16"), ("int32", "int32"), ("int64", "int64"),
        ("uint8", "uint8"), ("uint16", "uint16"), ("uint32", "uint32"), ("uint64", "uint64"),
        ("float16", "float16"), ("float32", "float32"), ("float64", "float64"),
        ("complex64", "complex64"), ("complex128", "complex128"),
    ]
    for tname, nname in pairs:
        tdtype = getattr(torch, tname, None)
        if tdtype is not None:
            _torch_to_numpy[tdtype] = np.dtype(nname)
            _numpy_to_torch[np.dtype(nname)] = tdtype
    try:
        import ml_dtypes

        _torch_to_numpy[torch.bfloat16] = np.dtype(ml_dtypes.bfloat16)
        _numpy_to_torch[np.dtype(ml_dtypes.bfloat16)] = torch.bfloat16
    except ImportError:
        pass


def torch_dtype_to_numpy(tdtype: Any) -> np.dtype:
    if not _torch_to_numpy:
        _torch_tables()
    try:
        return _torch_to_numpy[tdtype]
    except KeyError:
        hint = " (install ml_dtypes for bfloat16)" if str(tdtype) == "torch.bfloat16" else ""
        raise KspecTypeError(f"PyTorch dtype {tdtype} has no NumPy dtype kspec supports{hint}") from None


def numpy_dtype_to_torch(dtype: np.dtype) -> Any:
    if not _numpy_to_torch:
        _torch_tables()
    try:
        return _numpy_to_torch[np.dtype(dtype)]
    except KeyError:
        raise KspecTypeError(f"dtype {dtype} has no PyTorch equivalent") from None


# -- full description ------------------------------------------------------------------------------------


class ArrayInfo(NamedTuple):
    """Everything kspec needs to know about a device array. ``strides`` are in bytes.

    ``keepalive`` holds what must stay referenced while the memory is used: the array itself, or for other
    libraries cuda.core's view of it (which holds the producer and, for DLPack, the capsule).

    A NamedTuple, not a dataclass: one is made per array argument of a call, and building a tuple is faster;
    defining it costs a tenth at import.
    """

    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: np.dtype
    device_id: int
    library: str | None
    readonly: bool
    keepalive: Any

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def is_c_contiguous(self) -> bool:
        return self.size <= 1 or self.strides == c_strides(self.shape, self.dtype.itemsize)


def _where(param: str | None) -> str:
    return f"{param}: " if param else ""


def array_info(obj: object, *, param: str | None = None, stream: int | None = None) -> ArrayInfo:
    """Describe a device array of any supported library; KspecTypeError when ``obj`` is not one.

    ``stream`` (a handle) is the stream the caller will use the memory on: producers that report their own
    stream (CAI v3 ``stream``, DLPack) get ordered before it.
    """
    kind = kind_of_object(obj)
    if kind == KSPEC:
        a: Any = obj
        return ArrayInfo(a._ptr, a.shape, a.strides, a.dtype, a._device_id, None, False, obj)
    if kind == CUPY:
        a = obj
        return ArrayInfo(a.data.ptr, a.shape, a.strides, a.dtype, a.data.device_id, CUPY, False, obj)
    if kind == TORCH:
        t: Any = obj
        device_id = t.get_device()
        if device_id < 0:
            if _device_kind.host_active:  # kspec's CPU device takes NumPy arrays (kspec.torch runs kernel calls on
                # CPU tensors through their views: this is a tensor that reached the launch path some other way)
                raise KspecTypeError(
                    f"{_where(param)}a PyTorch tensor on {t.device}: kspec's CPU device runs kernels on NumPy arrays: "
                    "pass t.numpy() (it shares the tensor's memory)"
                )
            raise KspecTypeError(
                f"{_where(param)}a PyTorch tensor on {t.device} (host memory); move it with .cuda(), or run on kspec's "
                "CPU device (kspec.use_device('cpu')) through kspec.torch.register(kernel)"
            )
        dtype = torch_dtype_to_numpy(t.dtype)
        strides = tuple(s * dtype.itemsize for s in t.stride())
        return ArrayInfo(t.data_ptr(), tuple(t.shape), strides, dtype, device_id, TORCH, False, obj)
    if kind == CAI:
        return _cai_info(obj, param, stream)
    if kind == DLPACK:
        return _dlpack_info(obj, param, stream)
    if kind == HOST and _device_kind.host_active and isinstance(obj, np.ndarray):
        return ArrayInfo(obj.ctypes.data, obj.shape, obj.strides, obj.dtype, _device_kind.HOST_DEVICE_ID, NUMPY,
                         not obj.flags.writeable, obj)  # fmt: skip
    if kind == HOST:
        raise KspecTypeError(
            f"{_where(param)}a {type(obj).__module__}.{type(obj).__name__} lives in host memory; copy it to the "
            "device first (kspec.asarray(x), cupy.asarray(x) or torch.as_tensor(x, device='cuda'))"
        )
    raise KspecTypeError(
        f"{_where(param)}expected a device array (CuPy, PyTorch, kspec, or an object with "
        f"__cuda_array_interface__ / __dlpack__), got {type(obj).__name__}"
    )


def array_dtype_ndim(obj: object) -> tuple[np.dtype, int] | None:
    """(NumPy dtype, ndim) of a device or NumPy array, or None for anything else. Reads the cheap attributes
    of NumPy, CuPy, kspec and PyTorch arrays; other libraries through ``__cuda_array_interface__`` / DLPack.
    For typing a call once (kspec.fuse, kspec.jit), not for the per-call path."""
    a: Any = obj
    module = type(obj).__module__.partition(".")[0]
    if module == "torch":
        return torch_dtype_to_numpy(a.dtype), int(a.dim())
    if isinstance(obj, np.ndarray) or module in ("cupy", "kspec"):
        if hasattr(obj, "dtype") and hasattr(obj, "ndim"):
            return np.dtype(a.dtype), int(a.ndim)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return np.dtype(cai["typestr"]), len(cai["shape"])
    if hasattr(obj, "__dlpack__"):
        info = array_info(obj)
        return info.dtype, len(info.shape)
    return None


def _cai_info(obj: Any, param: str | None, stream: int | None) -> ArrayInfo:
    # kspec's own checks first, on the dict (their messages, and v2, which cuda.core refuses); the layout is
    # cuda.core's view (kspec/runtime/_generic.py); the producer's stream is ordered before ``stream`` here
    try:
        cai = obj.__cuda_array_interface__
    except AttributeError:  # a type that has the interface only for GPU buffers (a JAX array in host memory)
        if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
            return _dlpack_info(obj, param, stream)
        raise KspecTypeError(f"{_where(param)}{type(obj).__name__} has no __cuda_array_interface__ here (host memory?); "
                             "copy it to the device first") from None
    version = cai.get("version", 0)
    if version < 2:
        raise KspecTypeError(f"{_where(param)}__cuda_array_interface__ version {version} is too old (need 2 or 3)")
    if cai.get("mask") is not None:
        raise KspecTypeError(f"{_where(param)}masked __cuda_array_interface__ arrays are not supported")
    typestr = cai["typestr"]
    if typestr[:1] in (">", "!") and np.dtype(typestr).byteorder == ">":  # no dtype parse for the usual '<f4'
        raise KspecTypeError(f"{_where(param)}big-endian dtype {np.dtype(typestr)} is not supported on the device")
    view = _generic.cai_view(obj, cai, -1)
    producer = cai.get("stream")
    if stream is not None and producer is not None:
        order_cai_producer(producer, stream, view.device_id)
    ptr, shape, strides, dtype = _generic.layout(view, dlpack=False)
    return ArrayInfo(ptr, shape, strides, dtype, view.device_id, protocol_library(obj), bool(view.readonly), view)


def order_cai_producer(producer: int, consumer: int, device_id: int) -> None:
    """Order a CAI v3 producer's ``stream`` (as the interface spells it: 1 is the legacy default stream)
    before stream handle ``consumer``, as the interface asks of a consumer, for an array on ``device_id``.

    kspec's own event wait (:func:`._stream.order_after`, what RawKernel's packer calls too), not cuda.core's:
    one mechanism for every consumer, which the fake driver of the CPU tests records. The event is made in
    the array's device's context (a call may read its arguments before it has made any context current)."""
    producer = normalize_protocol_stream(producer)
    if producer == consumer:
        return
    from ._device import Device
    from ._stream import order_after

    try:
        Device(device_id).activate()
        order_after(producer, consumer)
    except LaunchError as exc:
        raise KspecValueError(f"the producer's stream {producer} could not be ordered before stream {consumer} ({exc})") from None


def _dlpack_info(obj: Any, param: str | None, stream: int | None) -> ArrayInfo:
    device_type, device_id = obj.__dlpack_device__()
    if int(device_type) == _generic.KDL_CPU and _device_kind.host_active:  # host memory is the CPU device's
        host = np.from_dlpack(obj)
        return ArrayInfo(host.ctypes.data, host.shape, host.strides, host.dtype, _device_kind.HOST_DEVICE_ID,
                         protocol_library(obj), not host.flags.writeable, host)  # fmt: skip
    if int(device_type) not in _generic.DEVICE_ACCESSIBLE:
        raise KspecTypeError(
            f"{_where(param)}{type(obj).__name__} is on DLPack device type {int(device_type)} (not CUDA); "
            "copy it to the device first"
        )
    # no stream: 0, which cuda.core passes as __dlpack__(stream=None), what kspec has always asked for there
    view = _generic.dlpack_view(obj, 0 if stream is None else protocol_stream(stream))
    ptr, shape, strides, dtype = _generic.layout(view, dlpack=True)
    return ArrayInfo(ptr, shape, strides, dtype, view.device_id, protocol_library(obj), bool(view.readonly), view)


def protocol_library(obj: object) -> str | None:
    """JAX or Numba for their arrays (whichever protocol they came through: JAX arrays have both), else None."""
    return protocol_library_of(type(obj))


def protocol_library_of(tp: type) -> str | None:
    """:func:`protocol_library` of an array type."""
    root = tp.__module__.partition(".")[0]
    if root in ("jax", "jaxlib"):
        return JAX
    return NUMBA if root == "numba" else None


def protocol_stream(handle: int) -> int:
    """A stream handle as the DLPack / CAI protocols spell it: the legacy default stream is 1, not 0."""
    return 1 if handle == 0 else handle


def normalize_protocol_stream(value: int) -> int:
    """The inverse of :func:`protocol_stream` (1 -> 0)."""
    return 0 if value == 1 else int(value)


def pointer_device(ptr: int) -> int:
    """The device ordinal that owns a device pointer (0 for NULL, and on one-device machines)."""
    from . import _driver

    cu = _driver.driver()
    if ptr == 0 or _driver._device_count == 1:
        return 0
    err, value = cu.cuPointerGetAttribute(cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr)
    if err:
        raise KspecValueError(f"0x{ptr:x} is not a CUDA device pointer ({_driver.describe(err)})")
    return int(value)


def check_same_device(named: list[tuple[str, int]]) -> int:
    """The common device of ``[(param, device_id), ...]``; ValueError naming every parameter otherwise."""
    devices = {d for _, d in named}
    if len(devices) <= 1:
        return named[0][1] if named else -1
    listing = ", ".join(f"{name} on device {dev}" for name, dev in named)
    raise KspecValueError(f"arrays on different devices in one call: {listing}; move them to one device first")
