"""Shared test configuration.

GPU tests carry ``@pytest.mark.gpu``; when no CUDA device is usable they are skipped. kspec's reason for
that ("no CUDA device: ...", a paragraph on what was looked for) is printed once, above the short test
summary; each skip carries only its first clause, and all of them fold into one line of ``-ra``'s summary
(they are raised from one place here), so that the summary fits on a screen and failures stand out.
Detection never crashes on a machine without the driver library, and runs only when a GPU test was collected.
"""

from __future__ import annotations

import functools
import os
import sys

import pytest


@functools.lru_cache(maxsize=1)
def _no_gpu_reason() -> str | None:
    try:
        from kspec.runtime import why_no_gpu

        return why_no_gpu()  # the GPU's reason even under KSPEC_DEVICE=cpu
    except Exception as exc:  # a broken install must skip GPU tests, not error every one of them
        return f"no CUDA device: probing failed with {type(exc).__name__}: {exc}"


def pytest_configure(config: pytest.Config) -> None:
    # Tests compile into a cache of their own, never into the user's ~/.cache/kspec (a test may set its own).
    if "KSPEC_CACHE_DIR" not in os.environ:
        import tempfile

        os.environ["KSPEC_CACHE_DIR"] = tempfile.mkdtemp(prefix="kspec-test-cache-")
    # ... and keep their memos (call records among them: kspec/kernels/records/_call_store.py) apart from the user's and
    # from earlier runs': a kernel's first call in a test is the session's, whatever ran on this machine before.
    if "KSPEC_MEMO_DIR" not in os.environ:
        import tempfile

        os.environ["KSPEC_MEMO_DIR"] = tempfile.mkdtemp(prefix="kspec-test-memo-")
    # JAX takes 75% of the GPU at its first use; test workers (and their subprocesses) share one GPU.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    # The CPU device's checked mode (buffers against guard pages, docs/guide/cpu-device.md) unless a run asks
    # otherwise: a kernel test that overruns a buffer by one element fails instead of corrupting the run.
    os.environ.setdefault("KSPEC_CHECKED", "1")


def _short(reason: str) -> str:
    """The first clause of kspec's reason: what is missing, without where it was looked for."""
    first = min((reason.find(cut) for cut in ("; ", ". ") if cut in reason), default=len(reason))
    return reason[:first]


_gpu_tests_skipped = 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if any(item.get_closest_marker("gpu") is not None for item in items):
        _no_gpu_reason()  # the driver is probed (and on a GPU machine initialised) before any test runs


@pytest.hookimpl(tryfirst=True)  # before fixtures are set up: a GPU test's fixtures may touch the device
def pytest_runtest_setup(item: pytest.Item) -> None:
    global _gpu_tests_skipped
    if item.get_closest_marker("gpu") is None:
        return
    reason = _no_gpu_reason()
    if reason is not None:
        _gpu_tests_skipped += 1
        pytest.skip(f"{_short(reason)} (GPU test; the full reason is printed once, under 'GPU tests skipped')")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    reason = _no_gpu_reason() if _gpu_tests_skipped else None
    if reason is not None:
        terminalreporter.write_sep("-", f"{_gpu_tests_skipped} GPU tests skipped")
        terminalreporter.write_line(reason)


@pytest.fixture(autouse=True)
def _constructor_calls_forgotten():
    """Each test starts as a process where no CuPy-style constructor ran yet: an identical constructor call
    shares the state an earlier one built (kspec/kernels/records/_constructor_memo.py), and tests that check a kernel's first
    call (what it compiles, loads or plans, often through a fake driver) must get a kernel of their own.
    Objects made before (module-level kernels) keep their state."""
    memo = sys.modules.get("kspec.kernels.records._constructor_memo")
    if memo is not None:
        memo.clear_constructor_memos()
    yield


@pytest.fixture(autouse=True)
def _device_0_current_after_gpu_tests(request: pytest.FixtureRequest):
    """After a GPU test on a machine with several devices, device 0 is current again, as in a fresh process.

    A kspec launch makes the device of its arrays current and leaves it so (kspec/runtime/_device.py,
    ``activate_if_several``), so a test on device 1 would otherwise change where the next test's
    allocations go. Only GPU tests touch the driver here.
    """
    yield
    if request.node.get_closest_marker("gpu") is None or _no_gpu_reason() is not None:
        return
    from kspec.runtime import Device, device_count

    if device_count() > 1:
        Device(0).use()


@pytest.fixture(params=[pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=pytest.mark.gpu)])
def xp(request: pytest.FixtureRequest):
    """The array library of the device the test runs on (tests/helpers/device_arrays.py): NumPy on kspec's CPU
    device, CuPy on a GPU. Kernel tests take it so that CI (no GPU) checks kernel results too."""
    if request.param == "cuda":
        yield pytest.importorskip("cupy")
        return
    from helpers.device_arrays import HostArrays

    request.getfixturevalue("on_cpu_device")
    yield HostArrays()


@pytest.fixture(scope="module")
def needs_host_compiler() -> None:
    """Skips the module without a host C++ compiler (``pytestmark = pytest.mark.usefixtures(...)``)."""
    from helpers.device_arrays import host_compiler_missing

    reason = host_compiler_missing()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture
def on_cpu_device():
    """Inside ``kspec.use_device("cpu")``; skipped without a host C++ compiler."""
    from helpers.device_arrays import host_compiler_missing

    reason = host_compiler_missing()
    if reason is not None:
        pytest.skip(reason)
    import kspec

    with kspec.use_device("cpu"):
        yield
