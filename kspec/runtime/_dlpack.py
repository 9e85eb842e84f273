"""DLPack through ctypes: building capsules for kspec's DeviceArray (``__dlpack__``).

Only the C structs of the DLPack ABI (v0.8 unversioned ``dltensor`` and v1.x ``dltensor_versioned``) are
needed; no DLPack package exists to import. Reading other producers' capsules is cuda.core's
``StridedMemoryView`` (:mod:`._generic`), which is faster than parsing them here was.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from .._errors import KspecTypeError

from ._generic import DEVICE_ACCESSIBLE, KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED  # noqa: F401

# Imported when a DeviceArray is exported (its __dlpack__), not before: its ctypes structs cost ~1-2 ms of
# a process's start-up.

# DLDataTypeCode
_INT, _UINT, _FLOAT, _BFLOAT, _COMPLEX, _BOOL = 0, 1, 2, 4, 5, 6

_FLAG_READ_ONLY = 1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _Deleter)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", _Deleter),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


_api = ctypes.pythonapi
# Our own function objects, never ctypes.pythonapi's attributes: those are shared by the whole process, and
# other libraries set their argtypes (jax.ffi.pycapsule declares PyCapsule_New's destructor a CFUNCTYPE,
# after which an address, as passed here, was refused).
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", _api)
)

# Raw-pointer flavours for the capsule destructor, which receives the capsule as a PyObject*.
_capsule_is_valid_raw = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _api)
)
_capsule_get_pointer_raw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api)
)

_NAME = b"dltensor"
_NAME_VERSIONED = b"dltensor_versioned"




# -- writing ---------------------------------------------------------------------------------------------


def _dl_from_dtype(dtype: np.dtype) -> tuple[int, int]:
    if dtype.kind == "b":
        return _BOOL, 8
    if dtype.name == "bfloat16":
        return _BFLOAT, 16
    code = {"i": _INT, "u": _UINT, "f": _FLOAT, "c": _COMPLEX}.get(dtype.kind)
    if code is None:
        raise KspecTypeError(f"dtype {dtype} has no DLPack equivalent")
    return code, dtype.itemsize * 8


# Everything a capsule we made points into, kept alive until its consumer (or the capsule's destructor)
# calls the deleter: address of the managed struct -> (struct, shape array, strides array, owner).
_exported: dict[int, tuple[Any, ...]] = {}
_exported_lock = threading.Lock()


def _release(address: int) -> None:
    try:
        with _exported_lock:
            _exported.pop(address, None)
    except Exception:  # interpreter shutdown
        pass


@_Deleter
def _deleter(address: int) -> None:
    _release(address)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule_address: int) -> None:
    # An unconsumed capsule still carries its original name: nobody took ownership, so release here. A
    # consumer renames it ('used_dltensor'...) and calls the deleter itself when it is done.
    try:
        for name in (_NAME, _NAME_VERSIONED):
            if _capsule_is_valid_raw(capsule_address, name):
                _release(_capsule_get_pointer_raw(capsule_address, name))
                return
    except Exception:
        pass


# The two callbacks must outlive every capsule, including ones freed during interpreter shutdown after this
# module's globals are cleared: take one extra reference that is never dropped.
ctypes.pythonapi.Py_IncRef(ctypes.py_object(_deleter))
ctypes.pythonapi.Py_IncRef(ctypes.py_object(_capsule_destructor))
_DESTRUCTOR_ADDRESS = ctypes.cast(_capsule_destructor, ctypes.c_void_p).value


def make_capsule(
    *,
    ptr: int,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    dtype: np.dtype,
    device_id: int,
    owner: Any,
    versioned: bool,
    readonly: bool = False,
    device_type: int = KDL_CUDA,
) -> Any:
    """A DLPack capsule over device memory ``ptr`` that keeps ``owner`` alive until the consumer is done."""
    code, bits = _dl_from_dtype(dtype)
    ndim = len(shape)
    shape_arr = (ctypes.c_int64 * max(ndim, 1))(*shape)
    # DLPack strides count elements, not bytes.
    strides_arr = (ctypes.c_int64 * max(ndim, 1))(*(s // dtype.itemsize for s in strides))
    managed: Any
    if versioned:
        managed = DLManagedTensorVersioned()
        managed.version.major, managed.version.minor = 1, 0
        managed.flags = _FLAG_READ_ONLY if readonly else 0
        name = _NAME_VERSIONED
    else:
        managed = DLManagedTensor()
        name = _NAME
    t = managed.dl_tensor
    t.data = ptr or None
    t.device.device_type = device_type
    t.device.device_id = device_id
    t.ndim = ndim
    t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, 1
    t.shape = ctypes.cast(shape_arr, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.cast(strides_arr, ctypes.POINTER(ctypes.c_int64))
    t.byte_offset = 0
    managed.deleter = _deleter
    address = ctypes.addressof(managed)
    managed.manager_ctx = address
    with _exported_lock:
        _exported[address] = (managed, shape_arr, strides_arr, owner)
    return _capsule_new(address, name, _DESTRUCTOR_ADDRESS)


def exported_count() -> int:
    """How many capsules kspec made are still held by a consumer (tests use it to check for leaks)."""
    return len(_exported)
