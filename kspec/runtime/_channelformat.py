"""Channel formats of CUDA arrays and textures (``cudaChannelFormatDesc``), and the enum arguments of the
texture API: kspec's names (``'float'``, ``'clamp'``) or CUDA's numbers, which are CuPy's ``cudaX`` constants.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from .._errors import KspecTypeError, KspecValueError

# cudaChannelFormatKind (cupy.cuda.runtime.cudaChannelFormatKindSigned/Unsigned/Float)
CHANNEL_KINDS = {"signed": 0, "unsigned": 1, "float": 2}
# (kind, bits per channel) -> (the driver's CUarray_format member, the NumPy dtype of one channel): every
# plain format CUDA has (the packed video and block-compressed ones are not for kernels' data)
_FORMATS = {
    ("signed", 8): ("CU_AD_FORMAT_SIGNED_INT8", "int8"),
    ("signed", 16): ("CU_AD_FORMAT_SIGNED_INT16", "int16"),
    ("signed", 32): ("CU_AD_FORMAT_SIGNED_INT32", "int32"),
    ("unsigned", 8): ("CU_AD_FORMAT_UNSIGNED_INT8", "uint8"),
    ("unsigned", 16): ("CU_AD_FORMAT_UNSIGNED_INT16", "uint16"),
    ("unsigned", 32): ("CU_AD_FORMAT_UNSIGNED_INT32", "uint32"),
    ("float", 16): ("CU_AD_FORMAT_HALF", "float16"),
    ("float", 32): ("CU_AD_FORMAT_FLOAT", "float32"),
}


def enum_value(value: object, names: dict[str, int], param: str) -> int:
    """A CUDA enum argument given by kspec's name (``'clamp'``) or by CUDA's number (``1``), as a number."""
    listing = ", ".join(f"'{name}' ({number})" for name, number in names.items())
    if isinstance(value, str):
        number = names.get(value.lower())
        if number is not None:
            return number
    elif isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        if int(value) in names.values():
            return int(value)
    else:
        raise KspecTypeError(f"{param}: expected one of {listing}, got {type(value).__name__}")
    raise KspecValueError(f"{param}: expected one of {listing}, got {value!r}")


def nonnegative_int(value: object, param: str) -> int:
    """``value`` as an int >= 0 (a bool is refused: ``True`` bits or layers are a mistake)."""
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise KspecTypeError(f"{param}: expected an int >= 0, got {type(value).__name__}") from None
    if number < 0 or isinstance(value, bool):
        raise KspecValueError(f"{param}: expected an int >= 0, got {value!r}")
    return number


class ChannelFormatDescriptor:
    """The format of one element of a CUDA array or texture, as CuPy's ``ChannelFormatDescriptor(x, y, z, w, f)``
    and CUDA's ``cudaChannelFormatDesc``.

    ``x``, ``y``, ``z``, ``w`` are the bits of each channel (0: no such channel). CUDA has elements of 1, 2 or
    4 channels of one width, given from ``x`` on; ``kind`` is ``'signed'``, ``'unsigned'`` or ``'float'`` (or
    CUDA's 0, 1, 2: CuPy's ``runtime.cudaChannelFormatKind*``). The formats are 8-, 16- and 32-bit signed and
    unsigned integers and 16- and 32-bit floats; any other combination is a ValueError.
    ``ChannelFormatDescriptor.from_dtype(np.float32, 2)`` is the float2 format.
    """

    __slots__ = ("x", "y", "z", "w", "kind", "bits", "num_channels", "dtype", "format_name")

    def __init__(self, x: int, y: int, z: int, w: int, kind: str | int) -> None:
        widths = tuple(nonnegative_int(v, name) for v, name in zip((x, y, z, w), "xyzw"))
        number = enum_value(kind, CHANNEL_KINDS, "kind")
        kind_name = next(name for name, n in CHANNEL_KINDS.items() if n == number)
        present = [b for b in widths if b]
        if not present:
            raise KspecValueError("x: a channel format needs at least one channel (x > 0 bits)")
        channels = len(present)
        if widths[:channels] != tuple(present) or len(set(present)) > 1:
            raise KspecValueError(
                f"x, y, z, w: CUDA's channels are given from x on, all of one width, e.g. (32, 32, 0, 0); got {widths}"
            )
        if channels == 3:
            raise KspecValueError(f"x, y, z, w: CUDA arrays and textures have 1, 2 or 4 channels, not 3 ({widths})")
        entry = _FORMATS.get((kind_name, present[0]))
        if entry is None:
            valid = ", ".join(str(b) for k, b in _FORMATS if k == kind_name)
            raise KspecValueError(
                f"x: CUDA has no {present[0]}-bit {kind_name} channel format; {kind_name} channels are {valid} bits"
            )
        self.x, self.y, self.z, self.w = widths
        self.kind = kind_name
        self.bits = present[0]
        self.num_channels = channels
        self.format_name = entry[0]  # the CUarray_format member
        self.dtype = np.dtype(entry[1])  # of one channel: a float2 element is two float32

    @classmethod
    def from_dtype(cls, dtype: Any, num_channels: int = 1) -> ChannelFormatDescriptor:
        """The format of elements of ``num_channels`` channels of ``dtype`` (int8 ... uint32, float16, float32)."""
        try:
            dt = np.dtype(dtype)
        except TypeError:
            raise KspecTypeError(f"dtype: {dtype!r} is not a dtype") from None
        for (kind, bits), (_name, channel_dtype) in _FORMATS.items():
            if np.dtype(channel_dtype) == dt:
                channels = nonnegative_int(num_channels, "num_channels")
                if channels not in (1, 2, 4):
                    raise KspecValueError(f"num_channels: CUDA has 1, 2 or 4 channels, got {channels}")
                widths = [bits] * channels + [0] * (4 - channels)
                return cls(widths[0], widths[1], widths[2], widths[3], kind)
        names = ", ".join(d for _f, d in _FORMATS.values())
        raise KspecValueError(f"dtype: CUDA arrays and textures hold {names}; got {dt}")

    @property
    def itemsize(self) -> int:
        """Bytes of one element (all its channels)."""
        return self.dtype.itemsize * self.num_channels

    def get_channel_format(self) -> dict[str, int]:
        """``{'x', 'y', 'z', 'w', 'f'}`` as CuPy returns it (``f`` is CUDA's number for the kind)."""
        return {"x": self.x, "y": self.y, "z": self.z, "w": self.w, "f": CHANNEL_KINDS[self.kind]}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ChannelFormatDescriptor):
            return NotImplemented
        return (self.bits, self.num_channels, self.kind) == (other.bits, other.num_channels, other.kind)

    def __hash__(self) -> int:
        return hash((self.bits, self.num_channels, self.kind))

    def __repr__(self) -> str:
        return f"ChannelFormatDescriptor({self.x}, {self.y}, {self.z}, {self.w}, {self.kind!r})"
