"""Issue [Z], checked mode: on the CPU device, `KSPEC_CHECKED=1` / `with kspec.checked():` places every argument
buffer against an inaccessible guard page, so that an access just past a NumPy array or a kspec allocation (a
raw or jit kernel's pointer, or an integer that holds one) raises kspec.KernelFaultError naming the kernel, the
block and thread and the address against the buffer, instead of writing into the Python heap. A write just
before a buffer is found after the launch. Every fault leaves a process whose later launches are correct.

kspec's own tests run checked by default (tests/conftest.py); these pin it on. CPU device only; skipped without
a host C++ compiler."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

import kspec
from helpers.device_arrays import host_compiler_missing
from kspec import jit


@pytest.fixture(autouse=True)
def cpu_device_checked():
    reason = host_compiler_missing()
    if reason is not None:
        pytest.skip(reason)
    with kspec.use_device("cpu"), kspec.checked():
        yield


def _where(block: int, thread: int) -> str:
    return rf"block \({block}, 0, 0\), thread \({thread}, 0, 0\)"


SMALL_WRITE = r"""
extern "C" __global__ void small_write(float* a) { a[threadIdx.x + 1000] = 1.0f; }
"""
READ_PAST = r"""
extern "C" __global__ void read_past(const float* a, float* out) {
    out[threadIdx.x] = a[threadIdx.x + (blockIdx.x == 1 && threadIdx.x == 3 ? 1 : 0)];
}
"""
WRITE_BEFORE = r"""
extern "C" __global__ void write_before(float* a) { if (threadIdx.x == 2) a[-1] = 5.0f; }
"""
FAR_WRITE = r"""
extern "C" __global__ void far_write(float* a, long long far) {
    if (blockIdx.x == 1 && threadIdx.x == 3) a[far] = 1.0f;
}
"""
THROUGH_INT = r"""
extern "C" __global__ void through_int(unsigned long long p, int n) {
    float* a = reinterpret_cast<float*>(p);
    a[threadIdx.x] = (float)(n + threadIdx.x);
}
"""
SCALE = r"""
extern "C" __global__ void scale(const float* x, float* y, int n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""
DIVIDE = r"""
extern "C" __global__ void divide(const int* a, const int* b, int* out) {
    out[threadIdx.x] = a[threadIdx.x] / b[threadIdx.x];
}
"""


def test_the_tests_run_checked_by_default():
    assert os.environ.get("KSPEC_CHECKED") == "1"  # tests/conftest.py, unless a run set it otherwise


@pytest.mark.parametrize(("value", "checked"), [(None, True), ("", True), ("1", True), ("on", True), ("0", False),
                                                 ("off", False), ("false", False), ("no", False)])
def test_checked_mode_is_the_default_unless_turned_off(monkeypatch, value, checked):
    from kspec.runtime.host import _checked as _host_checked

    if value is None:
        monkeypatch.delenv("KSPEC_CHECKED", raising=False)
    else:
        monkeypatch.setenv("KSPEC_CHECKED", value)
    assert _host_checked._from_environment() is checked


def test_a_write_a_thousand_elements_past_a_small_array_is_a_fault_and_the_process_goes_on():
    a = np.arange(4, dtype=np.float32)
    kernel = kspec.RawKernel(SMALL_WRITE, "small_write")
    with pytest.raises(kspec.KernelFaultError) as caught:
        kernel((1,), (4,), (a,))
    text = str(caught.value)
    assert text.startswith("kernel 'small_write': SIGSEGV (invalid memory access) "), text
    assert re.search(_where(0, 0), text), text
    assert f"{a.ctypes.data + 4000:#x}" in text, text  # the address the kernel meant, not the staging copy's
    assert f"3984 bytes past the end of argument 0 (16 bytes at {a.ctypes.data:#x})" in text, text
    assert "element 1000 of its 4 float32 elements" in text, text  # the index the kernel wrote, in its terms
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0]  # the array is whole
    y = np.zeros(64, dtype=np.float32)
    kspec.RawKernel(SCALE, "scale")((2,), (32,), (np.ones(64, dtype=np.float32), y, np.int32(64)))
    assert (y == 2.0).all()


def test_a_read_one_element_past_the_end_is_a_fault():
    a = np.arange(8, dtype=np.float32)
    out = np.zeros(16, dtype=np.float32)
    kernel = kspec.RawKernel(READ_PAST, "read_past")
    with pytest.raises(kspec.KernelFaultError) as caught:
        kernel((2,), (4,), (a[4:], out))  # a view: its 16 bytes end against the guard, not a's 32
    text = str(caught.value)
    assert re.search(r"SIGSEGV \(invalid memory access\) (reading|at) address", text), text
    assert re.search(_where(1, 3), text), text
    assert f"just past the end of argument 0 (16 bytes at {a[4:].ctypes.data:#x})" in text, text
    kspec.RawKernel(SCALE, "scale")((1,), (8,), (a, out, np.int32(8)))
    np.testing.assert_array_equal(out[:8], 2 * a)


def test_a_write_just_before_the_start_is_found_after_the_launch():
    for a in (np.zeros(4, dtype=np.float32), kspec.asarray(np.zeros(4, dtype=np.float32))):
        with pytest.raises(kspec.KernelFaultError) as caught:
            kspec.RawKernel(WRITE_BEFORE, "write_before")((1,), (4,), (a,))
        text = str(caught.value)
        assert "kernel 'write_before': checked mode found a write 4 bytes before the start of argument 0 (16 bytes" in text, text
        assert "which block and thread wrote it is not known" in text, text


def test_a_write_2_to_the_40_elements_out_is_a_fault_in_checked_mode_too():
    a = np.zeros(4, dtype=np.float32)
    kernel = kspec.RawKernel(FAR_WRITE, "far_write")
    with pytest.raises(kspec.KernelFaultError) as caught:
        kernel((2,), (8,), (a, np.int64(1 << 40)))
    text = str(caught.value)
    # from a staging copy near the top of the address space, 4 TiB out is not even a canonical address: the CPU
    # then does not say which address it was
    assert text.startswith("kernel 'far_write': SIGSEGV") and re.search(_where(1, 3), text), text
    kernel((2,), (8,), (a, np.int64(2)))
    assert a.tolist() == [0.0, 0.0, 1.0, 0.0]


def test_an_integer_that_points_into_an_argument_moves_with_it():
    a = np.zeros(8, dtype=np.float32)
    kernel = kspec.RawKernel(THROUGH_INT, "through_int")
    # `a` is an argument (a dummy int beside it would do): the integer points 4 floats into it
    two = kspec.RawKernel(r"""
extern "C" __global__ void two(float* a, unsigned long long p) { reinterpret_cast<float*>(p)[threadIdx.x] = 7.0f; }
""", "two")  # fmt: skip
    two((1,), (4,), (a, np.uint64(a.ctypes.data + 16)))
    assert a.tolist() == [0.0] * 4 + [7.0] * 4  # written through the staging copy and copied back
    with pytest.raises(kspec.KernelFaultError) as caught:
        two((1,), (5,), (a, np.uint64(a.ctypes.data + 16)))
    assert re.search(_where(0, 4), str(caught.value)) and "just past the end of argument 0 (32 bytes" in str(caught.value)
    # a kspec allocation, passed only as an integer: the allocation itself ends against a guard page
    d = kspec.zeros(4, dtype=np.float32)
    kernel((1,), (4,), (np.uint64(d.ptr), np.int32(1)))
    assert d.get().tolist() == [1.0, 2.0, 3.0, 4.0]
    with pytest.raises(kspec.KernelFaultError) as caught:
        kernel((1,), (5,), (np.uint64(d.ptr), np.int32(1)))
    text = str(caught.value)
    assert re.search(_where(0, 4), text) and f"just past the end of argument 0 (16 bytes at {d.ptr:#x})" in text, text


@jit.rawkernel()
def jit_overrun(dst, src, size):
    g = jit.cg.this_thread_block()
    jit.cg.memcpy_async(g, dst, 0, src, 0, size)  # size in bytes, not checked against dst: a raw write
    jit.cg.wait(g)


def test_a_jit_kernels_raw_pointer_write_past_an_array_is_a_fault():
    src = np.arange(64, dtype=np.float32)
    dst = np.zeros(4, dtype=np.float32)
    with pytest.raises(kspec.KernelFaultError) as caught:
        jit_overrun((1,), (32,), (dst, src, np.uint64(64)))
    text = str(caught.value)
    assert text.startswith("kernel 'jit_overrun': SIGSEGV"), text
    assert re.search(r"block \(0, 0, 0\), thread \(\d+, 0, 0\)", text), text
    assert f"past the end of argument 0 (16 bytes at {dst.ctypes.data:#x})" in text, text
    jit_overrun((1,), (32,), (dst, src, np.uint64(16)))
    assert dst.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_integer_division_by_zero_is_a_fault_in_checked_mode():
    a, b, out = np.arange(8, dtype=np.int32), np.ones(8, dtype=np.int32), np.zeros(8, dtype=np.int32)
    b[5] = 0
    with pytest.raises(kspec.KernelFaultError) as caught:
        kspec.RawKernel(DIVIDE, "divide")((1,), (8,), (a, b, out))
    assert "SIGFPE" in str(caught.value) and re.search(_where(0, 5), str(caught.value)), str(caught.value)
    b[5] = 1
    kspec.RawKernel(DIVIDE, "divide")((1,), (8,), (a, b, out))
    np.testing.assert_array_equal(out, a)


def test_aliasing_arguments_behave_as_unchecked():
    x = np.arange(64, dtype=np.float32)
    kspec.RawKernel(SCALE, "scale")((2,), (32,), (x, x, np.int32(64)))  # in place: one staging region
    np.testing.assert_array_equal(x, 2 * np.arange(64, dtype=np.float32))
    shift = kspec.RawKernel(r"""
extern "C" __global__ void shift(const float* x, float* y) { if (threadIdx.x == 0) for (int i = 0; i < 7; ++i) y[i] = x[i]; }
""", "shift")  # fmt: skip
    z = np.arange(8, dtype=np.float32)
    shift((1,), (1,), (z[:-1], z[1:]))  # overlapping views, a sequential copy: z[i + 1] = z[i] = ... = z[0]
    assert z.tolist() == [0.0] * 8


def test_a_read_only_array_is_not_copied_back():
    x = np.frombuffer(np.arange(8, dtype=np.float32).tobytes(), dtype=np.float32)  # memory that is read-only
    y = np.zeros(8, dtype=np.float32)
    kspec.RawKernel(SCALE, "scale")((1,), (8,), (x, y, np.int32(8)))
    np.testing.assert_array_equal(y, 2 * x)


def test_checked_is_a_switch_and_a_context_manager():
    from kspec.runtime.host import state

    with kspec.checked(False):
        assert state[0] is False
        with kspec.checked():
            assert state[0] is True
        assert state[0] is False
    assert state[0] is True
    with pytest.raises(TypeError, match="on: expected a bool"):
        kspec.checked("yes")  # type: ignore[arg-type]


def test_a_view_is_staged_with_the_array_that_owns_its_memory():
    # a kernel may reach around a view inside its base (here, before a slice's start), as on a GPU
    around = kspec.RawKernel(r"""
extern "C" __global__ void around(const float* x, float* out) { out[threadIdx.x] = x[(int)threadIdx.x - 4]; }
""", "around")  # fmt: skip
    base = np.arange(16, dtype=np.float32)
    out = np.zeros(16, dtype=np.float32)
    around((1,), (12,), (base[8:], out))
    assert out[:12].tolist() == list(range(4, 16))
    with pytest.raises(kspec.KernelFaultError) as caught:
        around((1,), (13,), (base[8:], out))  # thread 12 reads base[16]: past the end of base, not only of the view
    text = str(caught.value)
    assert re.search(_where(0, 12), text) and f"just past the end of argument 0 (32 bytes at {base[8:].ctypes.data:#x})" in text, text
