"""Arrays of any other library, read through cuda.core's ``StridedMemoryView``: whatever exposes ``__dlpack__``
or ``__cuda_array_interface__`` and is not CuPy, PyTorch or kspec (those have direct reads in :mod:`._interop`).

cuda.core is imported on the first such read, never by ``import kspec`` nor on the CuPy / PyTorch / kspec
paths: the import costs ~260 ms, which a process serving precompiled kernels on CuPy arrays should not pay
(tests/kernels_tests/test_serving_imports.py). A view costs ~4 us per read on an H100, where kspec's own ctypes DLPack
parser took ~18 us and its CAI reader ~7 us.

What cuda.core 1.2 does, which the callers rely on:

* ``stream_ptr`` is the *consumer* stream as the protocols spell it (the legacy default stream is 1). For
  CAI, a producer ``stream`` other than it is ordered before it with an event; for DLPack it is passed to
  ``__dlpack__(stream=...)``, and a falsy one (0) is passed as ``stream=None``. ``-1``: no ordering at all.
* ``strides`` count elements, not bytes, and are None where the producer gave none (C-contiguous).
* a view keeps the exporter alive (``exporting_obj``) and, for DLPack, holds the capsule, calling its
  deleter when the view is freed: the view is what must stay referenced while the memory is used.
* ``device_id`` of a CAI array comes from ``cuPointerGetAttribute`` (``cuCtxGetDevice`` for NULL).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from .._errors import KspecError, KspecTypeError, KspecValueError
from . import _driver
from ..dtypes import c_strides

# DLPack's DLDeviceType values kspec deals with (what a producer's __dlpack_device__ answers).
KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3
KDL_CUDA_MANAGED = 13
DEVICE_ACCESSIBLE = (KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED)

_VIEW: Any = None  # cuda.core.utils.StridedMemoryView, once imported


def _view_type() -> Any:
    global _VIEW
    if _VIEW is None:
        try:
            from cuda.core.utils import StridedMemoryView
        except ImportError as exc:  # a dependency of kspec: only a broken install gets here
            raise KspecError(
                "reading an array through __cuda_array_interface__ or DLPack needs cuda.core, which could not be "
                f"imported ({exc}); install it: pip install 'cuda-core>=1.2,<2'"
            ) from exc
        _VIEW = StridedMemoryView
    return _VIEW


class _Interface:
    """The CAI dict kspec has already read and checked, handed to cuda.core so that a producer whose
    ``__cuda_array_interface__`` is a property (Numba builds the dict per access) builds it once."""

    __slots__ = ("owner", "__cuda_array_interface__")

    def __init__(self, owner: object, cai: dict[str, Any]) -> None:
        self.owner = owner  # the view's exporting_obj is this wrapper: it keeps the producer alive
        self.__cuda_array_interface__ = cai


def cai_view(obj: object, cai: dict[str, Any], stream_ptr: int) -> Any:
    """A view of ``obj`` from its CAI dict ``cai`` (version and mask already checked by the caller)."""
    if cai.get("version") == 2 or cai.get("stream") == 0:
        # cuda.core takes v3 only, and v2 differs from it by the stream field alone; it also asserts a
        # producer stream > 0, where kspec has always read 0 as the legacy default stream (1 in the protocol).
        cai = {**cai, "version": max(cai["version"], 3)}
        if cai.get("stream") == 0:
            cai["stream"] = 1
    _driver.driver()  # cuInit done, or NoDeviceError on a machine without a driver (as before cuda.core)
    ptr = cai["data"][0] or 0
    if not ptr:
        # cuda.core asks the current context for the device of a NULL pointer (an empty array)
        from ._device import Device, current_device_id

        Device(current_device_id()).activate()
    try:
        return _view_type().from_cuda_array_interface(_Interface(obj, cai), stream_ptr)
    except Exception as exc:
        # cuda.core's CUDAError (not public, hence the name) is a driver call failing: the pointer's device
        # attribute, or the event ordering the producer's stream. Anything else (a field missing or of the
        # wrong type) is the producer's bug and goes on as it was.
        if type(exc).__name__ != "CUDAError":
            raise
        if stream_ptr == -1 or cai.get("stream") is None:
            raise KspecValueError(f"0x{ptr:x} is not a CUDA device pointer ({exc})") from None
        raise KspecValueError(f"0x{ptr:x}: the producer's stream {cai['stream']} could not be ordered ({exc})") from None


def dlpack_view(obj: object, stream_ptr: int) -> Any:
    """A view of ``obj`` through ``__dlpack__`` (its device type already checked by the caller)."""
    try:
        return _view_type().from_dlpack(obj, stream_ptr)
    except (AssertionError, BufferError) as exc:
        # cuda.core asserts on (or, in later releases, refuses) what is not a DLPack capsule; a BufferError the
        # producer raised itself goes on as it was
        if isinstance(exc, BufferError) and "capsule" not in str(exc):
            raise
        raise KspecTypeError(
            "__dlpack__() did not return a DLPack capsule ('dltensor' or 'dltensor_versioned')"
        ) from None


def layout(view: Any, *, dlpack: bool) -> tuple[int, tuple[int, ...], tuple[int, ...], np.dtype]:
    """(pointer, shape, strides in bytes, dtype) of a view. A DLPack dtype with no NumPy equivalent is a
    KspecTypeError; a CAI typestr NumPy does not know is NumPy's TypeError, as it always was."""
    try:
        dtype = view.dtype
    except (NotImplementedError, TypeError) as exc:
        if not dlpack:
            raise
        raise KspecTypeError(_dtype_message(str(exc))) from None
    shape = view.shape
    strides = view.strides
    itemsize = dtype.itemsize
    strides = c_strides(shape, itemsize) if strides is None else tuple([s * itemsize for s in strides])
    return view.ptr, shape, strides, dtype


def _dtype_message(text: str) -> str:
    """kspec's message for a DLPack dtype cuda.core cannot map to NumPy (its own message, in parentheses,
    where kspec has none)."""
    if "bfloat" in text:
        return "a bfloat16 DLPack tensor needs the ml_dtypes package for its NumPy dtype"
    lanes = re.search(r"lanes=(\d+)", text)
    if lanes:
        return f"DLPack dtype with {lanes.group(1)} lanes is not supported"
    return f"DLPack dtype is not supported ({text})"
