"""Outputs a kernel allocates, in the array library of its inputs: CuPy, PyTorch, NumPy (the CPU device),
or a kspec DeviceArray (kspec's own, and JAX / Numba inputs, whose outputs are exported after the launch)."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from .._errors import KspecValueError
from ._device import get_device
from ._devicearray import _normalize_dtype, _normalize_shape, empty
from ._interop import CUPY, JAX, NUMBA, NUMPY, TORCH, numpy_dtype_to_torch
from ._stream import Stream, stream_handle


def allocate_like(library: str | None, shape: Any, dtype: Any, stream: object, device: int | None = None) -> Any:
    """A new C-contiguous array in ``library``'s own type ('cupy', 'torch', or None for a DeviceArray).

    Kernels that allocate their outputs use it so outputs come back in the inputs' library. ``stream`` is
    where the array will be written first; the library's allocator is told, so its caching is ordered right.
    """
    shape_t = _normalize_shape(shape)
    dt = _normalize_dtype(dtype)
    if library == NUMPY:  # NumPy inputs on the CPU device: NumPy outputs
        return np.empty(shape_t, dtype=dt)
    handle = 0 if stream is None else stream_handle(stream)
    device_id = get_device(device).id
    if library == CUPY:
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(device_id):
            if cupy.cuda.get_current_stream().ptr == handle:
                return cupy.empty(shape_t, dtype=dt)
            from_external = getattr(cupy.cuda.Stream, "from_external", None)  # CuPy >= 14
            if from_external is not None:
                external = from_external(Stream.from_handle(handle, device=device_id))
            else:
                external = cupy.cuda.ExternalStream(handle)
            with external:
                return cupy.empty(shape_t, dtype=dt)
    if library == TORCH:
        torch = sys.modules["torch"]
        tensor = torch.empty(shape_t, dtype=numpy_dtype_to_torch(dt), device=torch.device("cuda", device_id))
        if torch._C._cuda_getCurrentRawStream(device_id) != handle and tensor.numel():
            # The caching allocator must not hand this block out again before work on `handle` is done.
            tensor.record_stream(torch.cuda.ExternalStream(handle, device=torch.device("cuda", device_id)))
        return tensor
    if library is not None and library not in (JAX, NUMBA):  # NUMPY returned above  # those two get a DeviceArray, exported later
        raise KspecValueError(f"library: expected 'cupy', 'torch', 'jax', 'numba' or None, got {library!r}")
    return empty(shape_t, dt, device=device_id, stream=stream)  # the object, not the handle: it owns the stream


def allocator_like(library: str | None, dtype: Any, device: int | None = None) -> Any:
    """``new(shape)``: :func:`allocate_like` for one library, dtype and device, with what it normalises done once,
    for arrays first written on the library's current stream (a caller that allocates per call: kspec.grad)."""
    dt = _normalize_dtype(dtype)
    if library == NUMPY:
        return lambda shape: np.empty(shape, dtype=dt)
    if library == TORCH:
        torch = sys.modules["torch"]
        tdtype, tdevice = numpy_dtype_to_torch(dt), torch.device("cuda", get_device(device).id)
        return lambda shape: torch.empty(shape, dtype=tdtype, device=tdevice)
    device_id = get_device(device).id
    return lambda shape: allocate_like(library, shape, dt, None, device_id)
