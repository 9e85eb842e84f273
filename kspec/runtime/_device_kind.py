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
host_active = False  # read by the driver on every call: a module attribute, not a function
_decided = False


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
    """Read ``KSPEC_DEVICE`` once (unless ``use_device`` chose first); True when the CPU device is active."""
    global host_active, _decided
    if not _decided:
        with _lock:
            if not _decided:
                host_active = _parse(os.environ.get(DEVICE_ENV, ""), DEVICE_ENV)
                _decided = True
    return host_active


def device_kind() -> str:
    """``'cpu'`` or ``'cuda'``: where kernels launched now run."""
    return "cpu" if decide() else "cuda"


class use_device:
    """Make kernels run on ``device`` (``'cpu'`` or ``'cuda'``) from now on; as a context manager, until the
    block ends (then the previous choice is back). Arrays made on one device are not usable on the other."""

    def __init__(self, device: str) -> None:
        global host_active, _decided
        host = _parse(device, "device")
        with _lock:
            self._previous = decide() if _decided else _parse(os.environ.get(DEVICE_ENV, ""), DEVICE_ENV)
            host_active, _decided = host, True
        self.device = "cpu" if host else "cuda"

    def __enter__(self) -> use_device:
        return self

    def __exit__(self, *exc: object) -> None:
        global host_active
        with _lock:
            host_active = self._previous

    def __repr__(self) -> str:
        return f"kspec.use_device({self.device!r})"
