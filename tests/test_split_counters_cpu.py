"""The arrival counters of one-pass split reductions (kspec/runtime/_split_counters.py), through the fake
driver: which launches share counters and which never do. The kernels that use them run on a GPU:
tests/test_reduction_one_pass_gpu.py."""

from __future__ import annotations

import threading

import pytest
import test_runtime_launch_cpu as launch_cpu

from kspec.runtime import _split_counters as sc

fake = launch_cpu.fake  # noqa: F811  (the fixture: the fake driver)


class _Workspace:
    ptr = 0x5000_0000


@pytest.fixture
def counters(fake, monkeypatch):
    monkeypatch.setattr(sc, "_devices", {})
    return fake


def test_a_stream_keeps_its_counters_and_streams_never_share(counters):
    first = sc.split_counters(0, 0x10, 64, _Workspace(), 256)
    assert sc.split_counters(0, 0x10, 64, _Workspace(), 256) == first  # zero again after each launch: reused
    other = sc.split_counters(0, 0x20, 64, _Workspace(), 256)
    assert abs(other - first) >= 4 * sc.STREAM_SLICE
    assert sc.split_counters(0, 1, 8, _Workspace(), 0) == sc.split_counters(0, 0, 8, _Workspace(), 0)  # legacy
    allocs = [c for c in counters.calls if c[0] == "alloc"]
    memsets = [c for c in counters.calls if c[0] == "memset"]
    assert allocs == [("alloc", 4 * sc.ARENA)] and memsets[0][2] == sc.ARENA  # one arena, zeroed once
    assert ("sync", 0x10) in counters.calls  # zero before any launch reads it


def test_the_per_thread_default_stream_is_a_different_stream_in_each_thread(counters):
    mine = sc.split_counters(0, 2, 16, _Workspace(), 0)
    theirs = []
    thread = threading.Thread(target=lambda: theirs.append(sc.split_counters(0, 2, 16, _Workspace(), 0)))
    thread.start()
    thread.join()
    assert theirs[0] != mine and sc.split_counters(0, 2, 16, _Workspace(), 0) == mine


def test_each_captured_launch_takes_counters_of_its_own(counters):
    eager = sc.split_counters(0, 0x10, 40, _Workspace(), 0)
    counters.capturing.add(0x10)
    a = sc.split_counters(0, 0x10, 40, _Workspace(), 0)
    b = sc.split_counters(0, 0x10, 40, _Workspace(), 0)
    assert len({eager, a, b}) == 3 and b - a == 4 * 64  # 40 counters, rounded up to 32-counter lines
    assert [c for c in counters.calls if c[0] == "alloc"] == [("alloc", 4 * sc.ARENA)]  # nothing allocated


def test_without_counters_to_hand_out_the_launch_zeroes_its_own(counters, monkeypatch):
    counters.capturing.add(0x30)  # captured before any arena exists: no allocation inside a capture
    got = sc.split_counters(0, 0x30, 10, _Workspace(), 512)
    assert got == _Workspace.ptr + 512
    assert counters.calls[-1] == ("memset", _Workspace.ptr + 512, 10, 0x30)
    assert not [c for c in counters.calls if c[0] == "alloc"]
    counters.capturing.clear()
    monkeypatch.setattr(sc, "MAX_STREAMS", 1)
    sc.split_counters(0, 0x40, 10, _Workspace(), 0)
    assert sc.split_counters(0, 0x50, 10, _Workspace(), 512) == _Workspace.ptr + 512  # past the cap


def test_a_refused_arena_falls_back_to_the_memset(counters):
    counters.fail_next.append(2)  # CUDA_ERROR_OUT_OF_MEMORY
    assert sc.split_counters(0, 0x60, 10, _Workspace(), 64) == _Workspace.ptr + 64
    assert sc.split_counters(0, 0x60, 10, _Workspace(), 64) != _Workspace.ptr + 64  # the next call gets one
