"""Device arrays seen through one protocol only, as arrays of other libraries arrive (GPU tests share them)."""

from __future__ import annotations


class CaiOnly:
    """A device array seen only through ``__cuda_array_interface__`` v3, with its producer's stream."""

    def __init__(self, base, stream=None) -> None:
        self.base = base
        self.__cuda_array_interface__ = {
            "shape": base.shape, "typestr": base.dtype.str, "data": (base.ptr, False), "strides": None,
            "version": 3, "stream": stream,
        }  # fmt: skip


class DLOnly:
    """A device array seen only through DLPack; records the stream each export was asked for."""

    def __init__(self, base) -> None:
        self.base = base
        self.streams: list[object] = []

    def __dlpack_device__(self):
        return self.base.__dlpack_device__()

    def __dlpack__(self, *, stream=None, **kwargs):
        self.streams.append(stream)
        return self.base.__dlpack__(stream=stream, **kwargs)  # kspec's own: orders its stream before `stream`
