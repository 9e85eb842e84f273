"""The compiled call path: a spec kernel's dispatcher and prepared launch in C (issue [Q]).

A call that hits a prepared signature runs the same steps in Python (kspec/kernels/_arguments.py's generated
dispatcher, kspec/kernels/_launch_code.py's generated launch) or, with this module's extension, in C:
``_fastcall.cc``, built once by kspec's host compiler into a CPython extension and kept in the binary cache
(as the JAX FFI handler and the CPU device's fault guard are). What the C code does is described by the
kernels layer, which keeps the Python path for what C does not take (outputs exported to another framework)
and as the whole path where the extension is not available:

- ``KSPEC_CALL_PATH=python`` (``c`` is the default);
- no host compiler or no Python headers: the Python path, with one :class:`kspec.PerformanceWarning`.

Loaded on the first prepared call of a process, never at import: from a warm cache it costs a cache read and
a ``dlopen``; a cold cache builds it in a background thread (about a second of the host compiler), the calls
planned meanwhile keeping the Python path. :func:`direct_launch_address` gives the C code the driver's ``cuLaunchKernel`` where launches go
to a GPU; on the CPU device it launches through the host driver's Python ``cuLaunchKernel`` instead.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
import warnings
from types import ModuleType

from .._errors import KspecValueError

CALL_PATH_ENV = "KSPEC_CALL_PATH"
_lock = threading.Lock()
_state: dict[str, object] = {}  # "module": the extension or None once decided; "building": a Thread
_launch_address: list[int] = []
_SOURCE = os.path.join(os.path.dirname(__file__), "_fastcall.cc")


def call_path_choice() -> str:
    """``"c"`` or ``"python"``: ``KSPEC_CALL_PATH`` (default ``c``)."""
    value = os.environ.get(CALL_PATH_ENV, "").strip().lower() or "c"
    if value not in ("c", "python"):
        raise KspecValueError(f"{CALL_PATH_ENV}: expected 'c' or 'python', got {value!r}")
    return value


def fastcall_module(wait: bool = False) -> ModuleType | None:
    """The extension (``fast_launch``, ``dispatcher``), or None where calls take the Python path.

    From a warm cache it is loaded on the first call. On a cold one it is built in a background thread and
    calls take the Python path until it is loaded (no call waits for the host compiler); ``wait``: wait for
    that build (tests, ``kspec warm``)."""
    if "module" in _state:
        return _state["module"]  # type: ignore[return-value]
    with _lock:
        if "module" not in _state and "building" not in _state:
            if call_path_choice() == "python":
                _state["module"] = None
            else:
                _start()
        building = _state.get("building")
    if wait and isinstance(building, threading.Thread):
        building.join()
    return _state.get("module")  # type: ignore[return-value]


def reset_call_path() -> None:
    """Decide again on the next prepared call (tests switching ``KSPEC_CALL_PATH``); kernels planned before
    keep the path they were planned with."""
    with _lock:
        building = _state.get("building")
    if isinstance(building, threading.Thread):
        building.join()
    with _lock:
        _state.clear()


def python_identity() -> str:
    """What the extension's binary depends on besides its source: this interpreter's version, ABI and platform
    (the cache key names them instead of hashing the headers, which a warm process should not read)."""
    return "\0".join((sys.version, sys.implementation.cache_tag or "", sys.abiflags, sys.platform, sys.base_prefix))


def _python_include() -> str:
    """The interpreter's header directory: where a posix install puts it (no sysconfig data to load), else
    what sysconfig says."""
    major, minor = sys.version_info[:2]
    guess = os.path.join(sys.base_prefix, "include", f"python{major}.{minor}{sys.abiflags}")
    if os.path.isfile(os.path.join(guess, "Python.h")):
        return guess
    return sysconfig.get_paths()["include"]


def _start() -> None:
    """Load the extension from the cache now, or start building it (under ``_lock``)."""
    from .._errors import KspecError
    from ..compiler import cached_host_extension

    try:
        with open(_SOURCE, encoding="utf-8") as f:
            source = f.read()
        program = cached_host_extension(source, python_identity())
    except (KspecError, OSError) as exc:
        _give_up(exc)
        return
    if program is not None:
        try:
            _state["module"] = _module_from(program.binary)
        except (OSError, ImportError) as exc:
            _give_up(exc)
        return
    thread = threading.Thread(target=_build, args=(source,), name="kspec-fastcall-build", daemon=True)
    _state["building"] = thread
    thread.start()


def _build(source: str) -> None:
    from .._errors import KspecError
    from ..compiler import compile_host_extension

    try:
        include = _python_include()
        if not os.path.isfile(os.path.join(include, "Python.h")):
            raise FileNotFoundError(f"no Python.h in {include} (the interpreter's development headers)")
        program = compile_host_extension(source, "kspec_fastcall", [include], python_identity())
        module = _module_from(program.binary)
    except (KspecError, OSError, ImportError) as exc:
        with _lock:
            _give_up(exc)
        return
    with _lock:
        _state["module"] = module


def _give_up(exc: BaseException) -> None:
    from .._errors import PerformanceWarning

    _state["module"] = None
    warnings.warn(f"kspec calls take the Python path (about 1 us more per call than the compiled one): building "
                  f"kspec/runtime/_fastcall.cc failed: {exc}", PerformanceWarning, stacklevel=2)  # fmt: skip


def _module_from(binary: bytes) -> ModuleType:
    """The extension loaded from its bytes (written to a private file, mapped, unlinked)."""
    import importlib.machinery
    import importlib.util
    import tempfile

    directory = tempfile.mkdtemp(prefix="kspec-fastcall-")
    path = os.path.join(directory, "kspec_fastcall.so")
    try:
        with open(path, "wb") as f:
            f.write(binary)
        loader = importlib.machinery.ExtensionFileLoader("kspec_fastcall", path)
        spec = importlib.util.spec_from_file_location("kspec_fastcall", path, loader=loader)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    finally:  # mapped now: nothing to clean up at exit
        os.unlink(path)
        os.rmdir(directory)
    return module


def direct_launch_address(launch: object) -> int:
    """The address of the CUDA driver's ``cuLaunchKernel``, for launches from C, where ``launch`` is
    cuda.bindings' (which calls it); 0 for any other (the CPU device's host driver, a test's recorder), or
    where it cannot be found: the C launch then calls ``launch`` itself."""
    bindings = sys.modules.get("cuda.bindings.driver")
    if bindings is None or launch is not getattr(bindings, "cuLaunchKernel", None):
        return 0
    if not _launch_address:
        from .._errors import NoDeviceError

        try:
            _launch_address.append(_find_launch())
        except NoDeviceError:  # nothing launches here; a prepared call made without a driver (tests) keeps Python's
            return 0
    return _launch_address[0]


def _find_launch() -> int:
    from . import _driver

    cu = _driver.cuda_driver()
    flags = cu.CUdriverProcAddress_flags
    # the entry cuda.bindings' own cuLaunchKernel resolves: the per-thread default stream's when its variable asks
    per_thread = os.environ.get("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", "0") != "0"
    flag = flags.CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM if per_thread else flags.CU_GET_PROC_ADDRESS_DEFAULT
    try:
        err, address, _status = cu.cuGetProcAddress(b"cuLaunchKernel", 12000, flag)
    except Exception:  # an older binding's signature: the Python launch serves
        return 0
    return int(address or 0) if not err else 0
