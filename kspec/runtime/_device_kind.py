"""Which device kernels run on: the GPU (CUDA) or kspec's CPU device.

One switch for the process: ``KSPEC_DEVICE=cpu`` in the environment (read on first use), or
``kspec.use_device("cpu")`` in code (also a context manager that restores the previous choice). Everything
below kspec.kernels asks this module once per driver call; kernels, fuse and jit never ask: the device of the
arguments (NumPy arrays and host-memory kspec arrays on the CPU device) decides.
"""

from __future__ import annotations

import os
import threading

from .._errors import KspecTypeError, KspecValueError

HOST_DEVICE_ID = -1  # the CPU device's ordinal (PyTorch's get_device() says -1 for host tensors too)
DEVICE_ENV = "KSPEC_DEVICE"

_CUDA_NAMES = ("cuda", "gpu")
_HOST_NAMES = ("cpu", "host")

_lock = threading.Lock()


def _from_environment() -> tuple[bool, str | None]:
    """(the CPU device is chosen, the error of a bad KSPEC_DEVICE or None): read at import (no driver is
    touched), so that every reader of :data:`host_active` sees the choice; a bad value raises on first use."""
    try:
        return _parse(os.environ.get(DEVICE_ENV, ""), DEVICE_ENV), None
    except KspecValueError as exc:
        return False, str(exc)


def _parse(value: object, param: str) -> bool:
    """True for the CPU device, False for CUDA; a typed error naming ``param`` otherwise."""
    if not isinstance(value, str):
        raise KspecTypeError(f"{param}: expected 'cpu' or 'cuda', got {type(value).__name__}")
    name = value.strip().lower()
    if name in _HOST_NAMES:
        return True
    if name in _CUDA_NAMES or name == "":
        return False
    raise KspecValueError(f"{param}: expected 'cpu' or 'cuda' (or 'gpu'), got {value!r}")


def decide() -> bool:
    """True when the CPU device is active; the KspecValueError of a bad ``KSPEC_DEVICE`` (until
    ``use_device`` chooses)."""
    if _env_error is not None:
        raise KspecValueError(_env_error)
    return host_active


def device_kind() -> str:
    """``'cpu'`` or ``'cuda'``: where kernels launched now run."""
    return "cpu" if decide() else "cuda"


class use_device:
    """Make kernels run on ``device`` (``'cpu'`` or ``'cuda'``) from now on; as a context manager, until the
    block ends (then the previous choice is back). Arrays made on one device are not usable on the other."""

    def __init__(self, device: str) -> None:
        global host_active, _env_error
        host = _parse(device, "device")
        with _lock:
            self._previous = host_active
            host_active, _env_error = host, None  # an explicit choice overrides a bad KSPEC_DEVICE
        self.device = "cpu" if host else "cuda"

    def __enter__(self) -> use_device:
        return self

    def __exit__(self, *exc: object) -> None:
        global host_active
        with _lock:
            host_active = self._previous

    def __repr__(self) -> str:
        return f"kspec.use_device({self.device!r})"


host_active, _env_error = _from_environment()  # host_active: read by the runtime on every driver call
