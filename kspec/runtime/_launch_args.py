"""What a raw launch's arguments become: grid and block as three extents, each argument a parameter slot.

Argument rules (CuPy's RawKernel): device arrays -> their pointer; Python int -> int64; float -> double;
complex -> complex128; bool -> bool; NumPy scalars keep their dtype; None -> NULL; a texture or surface
object -> its 64-bit handle; one of CuPy's by-value parameter objects (a ``cupy.cuda.function.CPointer``: a
``CArray``, ``mdspan``, or a struct a CuPy routine fills, such as its random generators' Feistel parameters) ->
the struct its ``ptr`` points to, copied by the driver at launch as CuPy passes it. Where the driver can report the kernel's parameter sizes (CUDA >= 12.4), a
wrong argument count or a value whose size cannot match its parameter (a Python float for a ``float``
parameter, a float32 for a ``double``) is a TypeError before anything runs, rather than garbage in the
kernel (*improve*: CuPy passes them through). A Python int may still fill a narrower integer parameter, as
the CuPy examples do with ``int n``.

The messages of the argument errors the generated packers (:mod:`._packer`) raise are here too: a packer
calls them only on its error branches.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._errors import KspecOverflowError, KspecTypeError, KspecValueError, about_kernel, kernel_label
from . import _device_kind, _generic, _interop

# -- grid / block ----------------------------------------------------------------------------------------


def dim3(value: object, what: str) -> tuple[int, int, int]:
    """An int or a 1-3 tuple -> (x, y, z), each at least 1; TypeError / ValueError naming ``what`` otherwise."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        dims = [int(value)]
    elif isinstance(value, (tuple, list)) and 1 <= len(value) <= 3:
        dims = []
        for v in value:
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise KspecTypeError(f"{what}: expected ints, got {type(v).__name__} in {value!r}")
            dims.append(int(v))
    else:
        raise KspecTypeError(f"{what}: expected an int or a tuple of 1 to 3 ints, got {value!r}")
    for v in dims:
        if not 0 <= v < 2**31:
            raise KspecValueError(f"{what}: every extent must be between 0 and 2**31-1, got {value!r}")
    while len(dims) < 3:
        dims.append(1)
    # CuPy launches an extent of 0 as 1 (an empty input still runs one block, which its bounds check idles)
    return max(1, dims[0]), max(1, dims[1]), max(1, dims[2])


# -- argument kinds --------------------------------------------------------------------------------------

_NUMPY_FORMATS = {
    "b": "b", "i1": "b", "i2": "h", "i4": "i", "i8": "q",
    "u1": "B", "u2": "H", "u4": "I", "u8": "Q",
    "f2": "e", "f4": "f", "f8": "d",
}  # fmt: skip


class _Arg:
    """How one argument position is read and packed, for one argument type."""

    __slots__ = ("kind", "fmt", "size", "label")

    def __init__(self, kind: str, fmt: str, size: int, label: str) -> None:
        self.kind = kind  # an _interop array kind, or "scalar", "int", "complex", "bf16", "none", "handle", "struct"
        self.fmt = fmt  # struct format of the slot's value, without padding
        self.size = size  # bytes the kernel should read from the slot
        self.label = label  # for messages: "float32", "Python float (double)", "cupy.ndarray (pointer)"


def _classify_arg(obj: object) -> _Arg | None:
    tp = type(obj)
    if tp is type(None):
        return _Arg("none", "Q", 8, "None (NULL pointer)")
    if _interop.is_texture_type(tp):  # a texture/surface object: its 64-bit handle, by value
        return _Arg("handle", "Q", 8, f"{tp.__module__}.{tp.__qualname__} (cudaTextureObject_t)")
    kind = _interop.kind_of_object(obj)
    if kind is not None and _interop.accepts_kind(kind) and not issubclass(tp, np.generic):  # NumPy scalars look like host arrays
        return _Arg(kind, "Q", 8, f"{tp.__module__}.{tp.__qualname__} (pointer)")
    if issubclass(tp, np.generic):
        dt = np.dtype(tp)
        if dt.kind == "b":
            return _Arg("scalar", "?", 1, "numpy.bool_")
        if dt.kind == "c" and dt.itemsize in (8, 16):
            half = "f" if dt.itemsize == 8 else "d"
            return _Arg("complex", half + half, dt.itemsize, dt.name)
        if dt.name == "bfloat16":
            return _Arg("bf16", "H", 2, "bfloat16")
        fmt = _NUMPY_FORMATS.get(f"{dt.kind}{dt.itemsize}")
        if fmt is None:
            return None
        return _Arg("scalar", fmt, dt.itemsize, dt.name)
    if issubclass(tp, bool):
        return _Arg("scalar", "?", 1, "Python bool (bool)")
    if issubclass(tp, int):
        return _Arg("int", "q", 8, "Python int (int64)")
    if issubclass(tp, float):
        return _Arg("scalar", "d", 8, "Python float (double)")
    if issubclass(tp, complex):
        return _Arg("complex", "dd", 16, "Python complex (complex128)")
    if _is_cupy_struct(tp):  # no bytes in the parameter buffer: the slot's pointer is the object's own ptr
        return _Arg("struct", "", 0, f"{tp.__module__}.{tp.__qualname__} (struct by value)")
    return None


def _is_cupy_struct(tp: type) -> bool:
    """Whether ``tp`` is one of CuPy's by-value kernel parameters (``CPointer``: ``ptr`` is the address of the
    struct in host memory). Read only where CuPy is already imported: kspec never imports it."""
    base = getattr(sys.modules.get("cupy.cuda.function"), "CPointer", None)
    return isinstance(base, type) and issubclass(tp, base)


def classify_args(kernel: str, args: Sequence[Any]) -> list[_Arg]:
    """Each argument's slot; a TypeError naming the position for one kspec cannot pass."""
    specs: list[_Arg] = []
    for position, obj in enumerate(args):
        arg = _classify_arg(obj)
        if arg is None:
            raise KspecTypeError(_unsupported_message(kernel, position, type(obj)))
        specs.append(arg)
    return specs


def _unsupported_message(kernel: str, position: int, tp: type) -> str:
    kind = _interop.kind_of(tp)
    if kind == _interop.HOST:
        what = (
            f"a {tp.__module__}.{tp.__qualname__} in host memory; copy it to the device first "
            "(kspec.asarray(x), cupy.asarray(x), torch.as_tensor(x, device='cuda'))"
        )
    else:
        what = f"of unsupported type {tp.__module__}.{tp.__qualname__}"
    return about_kernel(
        kernel,
        f"args[{position}] is {what}. RawKernel arguments are device arrays (CuPy, PyTorch, "
        "kspec, or anything with __cuda_array_interface__ / __dlpack__), Python int/float/complex/bool, "
        "NumPy scalars, None, or CuPy's by-value parameter objects (cupy.cuda.function.CPointer)",
    )


_INTEGER_FORMATS = frozenset("bBhHiIlLqQ")  # struct formats of the integer scalars


def _size_mismatch(arg: _Arg, param_size: int) -> bool:
    if arg.size == param_size or arg.kind == "struct":  # a struct's size is its type's, known to the kernel alone
        return False
    # CuPy's examples pass a Python int to `int n` / `unsigned int N`, and cupyx.scipy a NumPy int64 (from
    # numpy.ravel_multi_index) to `const int iidx`: the low bytes of an integer are its value on a little-endian
    # GPU, so CuPy lets any integer fill a narrower parameter, and so does kspec.
    integer = arg.kind == "int" or (arg.kind == "scalar" and arg.fmt in _INTEGER_FORMATS)
    return not (integer and param_size < arg.size)


def check_param_sizes(kernel: str, sizes: Sequence[int], specs: Sequence[_Arg]) -> None:
    """A TypeError when the arguments cannot fill the kernel's parameters (their count, or a slot's size)."""
    if len(sizes) != len(specs):
        raise KspecTypeError(f"{kernel_label(kernel)} takes {len(sizes)} argument(s), got {len(specs)}")
    for position, (arg, size) in enumerate(zip(specs, sizes)):
        if _size_mismatch(arg, size):
            hint = ""
            if arg.label.startswith("Python float") and size == 4:
                hint = "; pass numpy.float32(x) for a float parameter"
            elif arg.label.startswith("Python"):
                hint = "; pass a NumPy scalar of the parameter's type"
            raise KspecTypeError(
                about_kernel(
                    kernel,
                    f"args[{position}] is a {arg.label}, {arg.size} byte(s), but the "
                    f"kernel's parameter {position} takes {size} byte(s){hint}",
                )
            )


# -- reading a value (called by the packers) -------------------------------------------------------------


def _bf16_bits(value: Any) -> int:
    return int(np.asarray(value).view(np.uint16))


def _cai_pointer(obj: Any) -> tuple[int, Any]:
    # Two dict reads, not cuda.core's view as array_info takes: a packer needs only the pointer and the
    # producer's stream, and a view costs a driver call (the pointer's device) and ~1 us more per launch.
    cai = obj.__cuda_array_interface__
    return cai["data"][0] or 0, cai.get("stream")


def _dlpack_view(obj: Any, stream: int) -> Any:
    """cuda.core's view of a DLPack producer (``.ptr``); the packer holds it until the launch is queued."""
    return _generic.dlpack_view(obj, _interop.protocol_stream(stream))


# -- the packers' error branches -------------------------------------------------------------------------


def _mismatched_devices(kernel: str, args: Sequence[Any]) -> Exception:
    named = []
    for position, a in enumerate(args):
        if _interop.accepts_kind(_interop.kind_of(type(a))):
            try:
                device = _interop.array_info(a).device_id
            except Exception:
                continue
            named.append((f"args[{position}] ({type(a).__name__})", device))
    try:
        _interop.check_same_device(named)
    except KspecValueError as exc:
        return KspecValueError(about_kernel(kernel, str(exc)))
    return KspecValueError(about_kernel(kernel, "arrays on different devices in one call"))


def _host_tensor(kernel: str, position: int, tensor: Any) -> Exception:
    if _device_kind.host_active:  # a raw kernel on kspec's CPU device takes NumPy arrays
        return KspecTypeError(about_kernel(
            kernel, f"args[{position}] is a PyTorch tensor on {tensor.device}: a raw kernel on kspec's CPU device takes "
            "NumPy arrays; pass t.numpy() (it shares the tensor's memory, so the kernel writes into the tensor)"))
    return KspecTypeError(
        about_kernel(kernel, f"args[{position}] is a PyTorch tensor on {tensor.device} (host memory); move it to the GPU with .cuda()")
    )


def _host_dlpack(kernel: str, position: int, obj: Any, device_type: int) -> Exception:
    return KspecTypeError(
        about_kernel(
            kernel,
            f"args[{position}] ({type(obj).__name__}) is on DLPack device type "
            f"{device_type}, not a CUDA device; copy it to the device first",
        )
    )


def _bad_scalar(kernel: str, args: Sequence[Any], specs: Sequence[_Arg]) -> Exception:
    for position, (a, spec) in enumerate(zip(args, specs)):
        if spec.kind == "int":
            if not -(2**63) <= a < 2**63:
                return KspecOverflowError(
                    about_kernel(
                        kernel,
                        f"args[{position}] = {a} does not fit the int64 a Python int is passed "
                        "as; pass a NumPy scalar (numpy.uint64(x)) for other types",
                    )
                )
    return KspecValueError(about_kernel(kernel, "an argument could not be packed"))


def _bad_launch_value(kernel: str, exc: Exception, grid: object, block: object, shared_mem: object) -> Exception:
    """The error for a grid, block or shared_mem the bindings refused (TypeError / OverflowError)."""
    dim3(grid, "grid")
    dim3(block, "block")
    if isinstance(shared_mem, bool) or not isinstance(shared_mem, (int, np.integer)) or not 0 <= shared_mem < 2**32:
        return KspecValueError(f"shared_mem: expected a number of bytes (int >= 0), got {shared_mem!r}")
    return KspecTypeError(about_kernel(kernel, f"the launch arguments were refused ({exc})"))
