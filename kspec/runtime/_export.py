"""Outputs handed back to the inputs' library when that library came in through a protocol (JAX through
DLPack, Numba through ``__cuda_array_interface__``).

CuPy and PyTorch outputs are allocated by those libraries directly (``allocate_like``). JAX arrays are
immutable and Numba has no allocator kspec can call with a stream, so for them a kernel allocates a
:class:`DeviceArray`, launches into it, and only then exports it, zero-copy:

* JAX: ``jax.dlpack.from_dlpack(array)``. JAX passes its stream to ``DeviceArray.__dlpack__``, which orders
  it after the stream the kernel ran on (an event, no host wait), so JAX reads the finished result.
* Numba: ``numba.cuda.as_cuda_array(array)``; the DeviceArray's CAI v3 ``stream`` tells Numba where it was
  written. Either way the new array keeps the DeviceArray (so its memory) alive.
"""

from __future__ import annotations

from typing import Any

from ._interop import JAX, NUMBA

EXPORTED = frozenset({JAX, NUMBA})


def export_array(obj: Any, library: str | None) -> Any:
    """``obj`` (a DeviceArray a kernel wrote) as an array of ``library``; other objects pass unchanged."""
    if library == JAX:
        import jax.dlpack  # binds jax; the submodule is not always imported with jax

        return jax.dlpack.from_dlpack(obj)
    if library == NUMBA:
        from numba import cuda

        return cuda.as_cuda_array(obj)
    return obj


def export_outputs(allocated: dict[str, Any], library: str | None) -> dict[str, Any]:
    """Every output a call allocated, exported to ``library`` (a no-op dict copy for other libraries)."""
    if library not in EXPORTED:
        return allocated
    return {name: export_array(obj, library) for name, obj in allocated.items()}
