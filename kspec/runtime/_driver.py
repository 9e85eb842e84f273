"""The CUDA driver, loaded on first use.

Importing kspec never imports ``cuda.bindings.driver`` nor calls into libcuda: the first call of
:func:`driver` does (``cuInit``), and a machine without a driver or a device gets a :class:`NoDeviceError`
that says what was looked for, never a traceback from inside the bindings.
"""

from __future__ import annotations

import os
import threading
from types import ModuleType
from typing import Any

from .._errors import LaunchError, NoDeviceError
from . import _device_kind

_lock = threading.Lock()
_driver: ModuleType | None = None
_failure: str | None = None  # why the driver is unusable, remembered so every later call says the same
_device_count = 0

_COMPILE_HINT = (
    "Launching needs an NVIDIA GPU and its driver; without one, kernels run on kspec's CPU device: set "
    "KSPEC_DEVICE=cpu or call kspec.use_device('cpu') (NumPy arrays in and out). Compiling needs no GPU (`kspec build`, "
    "RawModule.compile(arch='sm_90'), kspec.compiler all work on a machine without one)."
)


def _visible_devices_note() -> str:
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    return "" if value is None else f" (CUDA_VISIBLE_DEVICES={value!r})"


def _init() -> ModuleType:
    global _driver, _failure, _device_count
    try:
        from cuda.bindings import driver as cu
    except ImportError as exc:
        _failure = (
            f"the cuda-bindings package is not importable ({exc}); kspec talks to the CUDA driver through it "
            "(pip install cuda-bindings)"
        )
        raise NoDeviceError(f"no CUDA device: {_failure.rstrip('.')}. {_COMPILE_HINT}") from None
    try:
        (err,) = cu.cuInit(0)
    except Exception as exc:  # cuda.pathfinder raises its own error types when libcuda is missing
        _failure = (
            "the NVIDIA driver library libcuda.so.1 could not be loaded; kspec looked for it through "
            f"cuda.bindings (the system library search path): {type(exc).__name__}: {exc}"
        )
        raise NoDeviceError(f"no CUDA device: {_failure.rstrip('.')}. {_COMPILE_HINT}") from None
    if err != cu.CUresult.CUDA_SUCCESS:
        version = _driver_version(cu)
        _failure = (
            f"the NVIDIA driver{version} was found but cuInit failed with {_result_name(cu, err)}"
            f"{_visible_devices_note()}"
        )
        raise NoDeviceError(f"no CUDA device: {_failure.rstrip('.')}. {_COMPILE_HINT}")
    err, count = cu.cuDeviceGetCount()
    if err != cu.CUresult.CUDA_SUCCESS or count == 0:
        _failure = (
            f"the NVIDIA driver{_driver_version(cu)} reports no CUDA device{_visible_devices_note()}"
        )
        raise NoDeviceError(f"no CUDA device: {_failure.rstrip('.')}. {_COMPILE_HINT}")
    _device_count = int(count)
    _driver = cu
    return cu


def import_bindings() -> None:
    """Import ``cuda.bindings.driver`` now, without initialising CUDA (no ``cuInit``: a process that forks later
    keeps usable children), so that the first launch does not pay for it (16-18 ms on an H200 host). Nothing
    happens where the bindings are missing: the first launch then says so."""
    if _driver is None and _failure is None:
        try:
            import cuda.bindings.driver  # noqa: F401
        except ImportError:
            pass


def _driver_version(cu: Any) -> str:
    version = cuda_version(cu)
    return f" ({version})" if version else ""


def cuda_version(cu: Any = None) -> str:
    """The CUDA version the driver supports, as ``"CUDA 13.0"`` ("" where it cannot say); ``cu``: the driver
    module (default: the initialised one)."""
    cu = cu if cu is not None else cuda_driver()
    try:
        err, version = cu.cuDriverGetVersion()
    except Exception:
        return ""
    if err != cu.CUresult.CUDA_SUCCESS:
        return ""
    return f"CUDA {version // 1000}.{version % 1000 // 10}"


_NVIDIA_VERSION_FILE = "/proc/driver/nvidia/version"  # Linux: the kernel module's release, no driver call


def driver_release(text: str | None = None) -> str:
    """The NVIDIA driver's release, as ``"580.159.04"`` ("" where it cannot say: not Linux, no NVIDIA module):
    what the CUDA version alone does not tell apart (two 580 drivers both support CUDA 13.0). ``text``: the
    version file's contents (default: read it)."""
    if text is None:
        try:
            with open(_NVIDIA_VERSION_FILE, encoding="utf-8", errors="replace") as f:
                text = f.read(4096)
        except OSError:
            return ""
    for line in text.splitlines():
        if "Kernel Module" in line:  # "... Kernel Module  580.159.04  ..." or "... Open Kernel Module for x86_64  580..."
            for word in line.split("Kernel Module", 1)[1].split():
                parts = word.split(".")
                if len(parts) > 1 and all(part.isdigit() for part in parts):
                    return word
    return ""


def driver_description() -> str:
    """The driver as a tuning record states it: ``"580.159.04 (CUDA 13.0)"``, whichever parts are known ("" for
    none)."""
    release, version = driver_release(), cuda_version()
    if release and version:
        return f"{release} ({version})"
    return release or version


def driver() -> ModuleType:
    """The driver of the device kernels run on now: ``cuda.bindings.driver``, initialised (a
    :class:`NoDeviceError` when there is no usable GPU), or on the CPU device (``kspec.use_device("cpu")``,
    ``KSPEC_DEVICE=cpu``) the host driver that answers the same calls (kspec/runtime/host/_driver.py)."""
    if _device_kind.decide():
        from .host import host_driver

        return host_driver()  # type: ignore[return-value]  # the same calls, answered on the host
    return cuda_driver()


def driver_for(device_id: int) -> ModuleType:
    """The driver owning ``device_id``'s memory and modules, whichever device is active now."""
    if device_id == _device_kind.HOST_DEVICE_ID:
        from .host import host_driver

        return host_driver()  # type: ignore[return-value]
    return cuda_driver()


def cuda_driver() -> ModuleType:
    """``cuda.bindings.driver``, initialised; :class:`NoDeviceError` when there is no usable GPU."""
    if _driver is not None:
        return _driver
    with _lock:
        if _driver is not None:
            return _driver
        if _failure is not None:
            raise NoDeviceError(f"no CUDA device: {_failure.rstrip('.')}. {_COMPILE_HINT}")
        return _init()


def device_count() -> int:
    """Number of visible CUDA devices; 0 (never an exception) when there is no driver or device. On the CPU
    device: 1."""
    if _device_kind.decide():
        return 1
    try:
        driver()
    except NoDeviceError:
        return 0
    return _device_count


def initialized_device_count() -> int:
    """The device count the driver's initialisation found; 0 before it (never initialises the driver). On the
    CPU device: 1."""
    return 1 if _device_kind.host_active else _device_count


def why_no_device() -> str | None:
    """None when a device is usable, else the reason (the text of the NoDeviceError a launch would raise)."""
    if _device_kind.decide():
        return None
    try:
        driver()
    except NoDeviceError as exc:
        return str(exc)
    return None


def why_no_gpu() -> str | None:
    """None when a CUDA device is usable, else why not; unlike :func:`why_no_device`, whichever device is
    active (the CPU device does not count)."""
    try:
        cuda_driver()
    except NoDeviceError as exc:
        return str(exc)
    return None


def is_initialized() -> bool:
    """True once the driver was loaded and initialised in this process (tests use it)."""
    return _driver is not None


def _result_name(cu: Any, err: Any) -> str:
    try:
        return cu.CUresult(int(err)).name
    except Exception:
        return f"CUresult {int(err)}"


def describe(err: Any) -> str:
    """``CUDA_ERROR_X (the driver's description)`` for a CUresult."""
    cu = _driver
    if cu is None:
        return f"CUresult {int(err)}"
    name = _result_name(cu, err)
    try:
        res, text = cu.cuGetErrorString(err)
        if res == cu.CUresult.CUDA_SUCCESS and text:
            return f"{name} ({text.decode() if isinstance(text, bytes) else text})"
    except Exception:
        pass
    return name


def check(result: tuple, what: str) -> Any:
    """Unpack a bindings call's ``(err, *values)``; raise LaunchError naming ``what`` when err is not success.

    Returns None for no values, the value for one, the tuple for several.
    """
    err = result[0]
    if err:  # CUresult is an int enum; CUDA_SUCCESS is 0
        raise LaunchError(f"{what} failed: {describe(err)}")
    if len(result) == 1:
        return None
    if len(result) == 2:
        return result[1]
    return result[1:]
