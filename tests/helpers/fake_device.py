"""The fake driver installed for a test (the ``fake`` fixture), and array producers over fake device pointers
(``DL``: DLPack only, ``Cai``: ``__cuda_array_interface__`` only) that the fake driver's tests share."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from kspec.dtypes import c_strides
from kspec.runtime import _dlpack, _driver
from kspec.runtime._device import Device

from .fake_driver import FakeDriver


@pytest.fixture
def fake(monkeypatch):
    """Install a fake driver with a few kernels; restore the real state afterwards."""
    drv = FakeDriver({"k1": (8, 8, 8, 8), "narrow": (4, 4, 8), "cplx": (8, 16, 1, 2), "none": ()})
    monkeypatch.setattr(_driver, "_driver", drv)
    monkeypatch.setattr(_driver, "_failure", None)
    monkeypatch.setattr(_driver, "_device_count", 1)
    for dev in Device._instances.values():
        monkeypatch.setattr(dev, "_ctx", None)
        monkeypatch.setattr(dev, "_attrs", {})
    from kspec.runtime import _stream

    monkeypatch.setattr(_stream, "_cu_streams", {})
    # Arrays of other libraries are read by cuda.core's StridedMemoryView, which calls the driver through its
    # own module's `driver` (cuda.bindings.driver), not kspec's: point that at the fake too.
    from cuda.core.utils import StridedMemoryView

    monkeypatch.setattr(sys.modules[StridedMemoryView.__module__], "driver", drv)
    return drv


class DL:
    """A DLPack-only producer over a fake device pointer; records the ``stream`` each export was asked for."""

    def __init__(self, ptr=0xD000, shape=(4, 3), strides=None, dtype=np.float32, *, device_type=_dlpack.KDL_CUDA,
                 readonly=False, byte_offset=0, dl_dtype=None, capsule=True):  # fmt: skip
        self.ptr, self.shape, self.dtype = ptr, shape, np.dtype(dtype)
        self.strides = strides or c_strides(shape, self.dtype.itemsize)
        self.device_type, self.readonly, self.byte_offset = device_type, readonly, byte_offset
        self.dl_dtype, self.capsule = dl_dtype, capsule
        self.streams: list[object] = []

    def __dlpack_device__(self):
        return (self.device_type, 0)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        self.streams.append(stream)
        if not self.capsule:
            return object()
        versioned = max_version is not None and max_version[0] >= 1
        capsule = _dlpack.make_capsule(
            ptr=self.ptr, shape=self.shape, strides=self.strides, dtype=self.dtype, device_id=0, owner=self,
            versioned=versioned, readonly=self.readonly, device_type=self.device_type,
        )  # fmt: skip
        if self.byte_offset or self.dl_dtype:
            address = next(reversed(_dlpack._exported))  # the struct make_capsule just registered
            managed = _dlpack._exported[address][0]
            managed.dl_tensor.byte_offset = self.byte_offset
            if self.dl_dtype:
                t = managed.dl_tensor.dtype
                t.code, t.bits, t.lanes = self.dl_dtype
        return capsule


class Cai:
    def __init__(self, ptr=0xC000, shape=(4,), typestr="<f4", **extra):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False), "version": 3,
                                         "strides": None, **extra}  # fmt: skip
