"""The compiled call path: a spec kernel's dispatcher and prepared launch in C.

A call that hits a prepared signature runs the same steps in Python (kspec/kernels/callpath/_signature.py's generated
dispatcher, kspec/kernels/callpath/_launch_code.py's generated launch) or, with this module's extension, in C:
``_fastcall_c/`` (one translation unit of several files), built once by kspec's host compiler into a CPython extension and kept in the binary cache
(as the JAX FFI handler and the CPU device's fault guard are). What the C code does is described by the
kernels layer, which keeps the Python path for what C does not take (outputs exported to another framework)
and as the whole path where the extension is not available:

- ``KSPEC_CALL_PATH=python`` (``c`` is the default);
- no host compiler or no Python headers: the Python path, with one :class:`kspec.PerformanceWarning`;
- ``KSPEC_COMPILE=never`` and a cache without it: the Python path.

Loaded on the first prepared call of a process, never at import: from a warm cache it costs a cache read and
a ``dlopen``. On a cold cache a child process builds it (about a second of the host compiler; ``kspec warm``
builds it ahead, and ``KSPEC_COMPILE=never`` builds nothing), the calls planned meanwhile keeping the Python
path; the serving process imports none of the host compiler's modules. :func:`direct_launch_address` gives
the C code the driver's ``cuLaunchKernel`` where launches go to a GPU; on the CPU device it launches through
the host driver's Python ``cuLaunchKernel`` instead.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from types import ModuleType

from .._errors import KspecValueError

CALL_PATH_ENV = "KSPEC_CALL_PATH"
CALL_PATH_NAME = "kspec_fastcall"  # the module's name (its PyInit_ function's)
_lock = threading.Lock()
_state: dict[str, object] = {}  # "module": the extension or None once decided; "building": a Thread
_launch_address: list[int] = []


def call_path_choice() -> str:
    """``"c"`` or ``"python"``: ``KSPEC_CALL_PATH`` (default ``c``)."""
    value = os.environ.get(CALL_PATH_ENV, "").strip().lower() or "c"
    if value not in ("c", "python"):
        raise KspecValueError(f"{CALL_PATH_ENV}: expected 'c' or 'python', got {value!r}")
    return value


def fastcall_module(wait: bool = False, *, build: bool = True) -> ModuleType | None:
    """The extension (``fast_launch``, ``dispatcher``), or None where calls take the Python path.

    From a warm cache it is loaded on the first call. On a cold one a child process builds it and calls take
    the Python path until it is loaded (no call waits for the host compiler; under ``KSPEC_COMPILE=never``
    nothing is built); ``wait``: wait for that build (tests). ``build=False`` loads it from the cache only and
    otherwise leaves the decision to the next call (kspec.cupy's ``enable()``: no thread or child process at a
    program's start, which may fork)."""
    if "module" in _state:
        return _state["module"]  # type: ignore[return-value]
    with _lock:
        if "module" not in _state and "building" not in _state:
            if call_path_choice() == "python":
                _state["module"] = None
            else:
                _start(build)
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


def _start(build: bool = True) -> None:
    """Load the extension from the cache now, or have it built (under ``_lock``; ``build=False``: only load)."""
    from .._errors import KspecError
    from ..compiler import cached_call_path_image, call_path_source

    try:
        source = call_path_source()
        image = cached_call_path_image(source)
    except (KspecError, OSError) as exc:
        _give_up(f"reading it failed: {exc}")
        return
    if image is not None:
        try:
            _state["module"] = _module_from(image)
        except (OSError, ImportError) as exc:
            _give_up(f"loading it failed: {exc}")
        return
    from ..compiler import current_policy

    if current_policy() == "never":  # no compile at run time; `kspec warm` builds it ahead
        _state["module"] = None  # decided now, even at a program's start: nothing would build it later
        return
    if not build:
        return  # undecided: the first prepared call looks again, and builds
    # A child process builds it (this one imports nothing of the host compiler's, and a process that ends
    # sooner leaves the build to finish); a daemon thread waits for it and loads the result.
    thread = threading.Thread(target=_build_in_child, args=(source,), name="kspec-fastcall-build", daemon=True)
    _state["building"] = thread
    thread.start()


def _build_in_child(source: str) -> None:
    import subprocess
    import tempfile

    from ..compiler import cached_call_path_image

    module, why = None, ""
    # the child imports this kspec, wherever this process found it (a checkout beside a script, say)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    try:
        with tempfile.TemporaryFile() as log:
            code = "from kspec.compiler import build_call_path; build_call_path()"
            done = subprocess.run([sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                  env=env, start_new_session=True, check=False)  # fmt: skip
            log.seek(0)
            output = log.read().decode(errors="replace").strip().splitlines()
        why = output[-1] if output else f"exit status {done.returncode}"
        image = cached_call_path_image(source) if done.returncode == 0 else None
        module = _module_from(image) if image is not None else None
    except (OSError, ImportError) as exc:
        why = str(exc)
    with _lock:
        if module is None:
            _give_up(f"building it failed: {why}")
        else:
            _state["module"] = module


def _give_up(why: str) -> None:
    from .._errors import PerformanceWarning

    _state["module"] = None
    warnings.warn(f"kspec calls take the Python path (about 1 us more per call than the compiled one): "
                  f"kspec/_fastcall_c/: {why}", PerformanceWarning, stacklevel=2)  # fmt: skip


_loaded_module: list[ModuleType] = []  # a process loads the extension once (its types are compared by identity)


def _module_from(binary: bytes) -> ModuleType:
    """The extension loaded from its bytes: from an anonymous memory file where the system has them (no
    temporary file, no ``tempfile`` import), else from a private file, unlinked once mapped."""
    import importlib.machinery
    import importlib.util

    if _loaded_module:
        return _loaded_module[0]
    memfd = getattr(os, "memfd_create", None)
    fd, directory = -1, None
    try:
        if memfd is not None:
            fd = memfd(CALL_PATH_NAME)
            path = f"/proc/self/fd/{fd}"
        else:
            import tempfile

            directory = tempfile.mkdtemp(prefix="kspec-fastcall-")
            path = os.path.join(directory, f"{CALL_PATH_NAME}.so")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        view = memoryview(binary)
        while view:
            view = view[os.write(fd, view):]
        loader = importlib.machinery.ExtensionFileLoader(CALL_PATH_NAME, path)
        spec = importlib.util.spec_from_file_location(CALL_PATH_NAME, path, loader=loader)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    finally:  # mapped now: nothing to clean up at exit
        if fd >= 0:
            os.close(fd)
        if directory is not None:
            os.unlink(os.path.join(directory, f"{CALL_PATH_NAME}.so"))
            os.rmdir(directory)
    _loaded_module.append(module)
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
