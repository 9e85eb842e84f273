"""Shared test configuration.

GPU tests carry ``@pytest.mark.gpu``; when no CUDA device is usable they are skipped with the reason
kspec itself gives ("no CUDA device: ..."). Detection never crashes on a machine without the driver
library, and runs only when a GPU test was collected.
"""

from __future__ import annotations

import functools
import os

import pytest


@functools.lru_cache(maxsize=1)
def _no_gpu_reason() -> str | None:
    try:
        from kspec.runtime import why_no_device

        return why_no_device()
    except Exception as exc:  # a broken install must skip GPU tests, not error every one of them
        return f"no CUDA device: probing failed with {type(exc).__name__}: {exc}"


def pytest_configure(config: pytest.Config) -> None:
    # Tests compile into a cache of their own, never into the user's ~/.cache/kspec (a test may set its own).
    if "KSPEC_CACHE_DIR" not in os.environ:
        import tempfile

        os.environ["KSPEC_CACHE_DIR"] = tempfile.mkdtemp(prefix="kspec-test-cache-")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    reason = _no_gpu_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in gpu_items:
        item.add_marker(skip)


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
