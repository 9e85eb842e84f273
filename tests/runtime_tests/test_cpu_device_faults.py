"""Issue [Z]: a CPU-device kernel thread that takes a hardware fault (SIGSEGV, SIGBUS, SIGFPE) raises
kspec.KernelFaultError naming the kernel, the block and thread, the signal and the faulting address against the
nearest argument buffer; the process goes on and later launches give correct results. Before, a write far out
of bounds killed the Python process with SIGSEGV and no traceback.

The faults here are far from any buffer (a write 2**40 elements out, a null pointer, an integer division by
zero): an overrun of a few elements lands in memory the process owns and is not a fault on the host. CPU device
only; skipped without a host C++ compiler."""

from __future__ import annotations

import re

import numpy as np
import pytest

import kspec
from helpers.device_arrays import host_compiler_missing


@pytest.fixture(autouse=True)
def cpu_device():
    reason = host_compiler_missing()
    if reason is not None:
        pytest.skip(reason)
    # unchecked (the tests' default is checked mode, tests/conftest.py): arrays stay where NumPy put them, so a
    # write 2**40 floats out is still a canonical address, which the CPU reports (tests/runtime_tests/test_cpu_checked.py: the
    # same faults in checked mode)
    with kspec.use_device("cpu"), kspec.checked(False):
        yield


FAR_WRITE = r"""
extern "C" __global__ void far_write(float* a, long long far) {
    unsigned t = threadIdx.x;
    if (blockIdx.x == 1 && t == 3) a[far] = 1.0f;
}
"""
FAR_READ = r"""
extern "C" __global__ void far_read(const float* a, float* out, long long far) {
    out[threadIdx.x] = a[threadIdx.x + (threadIdx.x == 2 ? far : 0)];
}
"""
DIVIDE = r"""
extern "C" __global__ void divide(const int* a, const int* b, int* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = a[i] / b[i];
}
"""
SYNCED_WRITE = r"""
extern "C" __global__ void synced_write(float* a, long long far) {
    __shared__ float tile[64];
    tile[threadIdx.x] = a[threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 5) a[far] = tile[0];  // on a fiber: the block's threads run together
    a[threadIdx.x] = tile[63 - threadIdx.x];
}
"""


def _message(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    return str(excinfo.value)


def test_a_write_2_to_the_40_elements_out_is_a_kernel_fault_and_the_process_goes_on():
    a = np.zeros(4, dtype=np.float32)
    kernel = kspec.RawKernel(FAR_WRITE, "far_write")
    with pytest.raises(kspec.KernelFaultError) as caught:
        kernel((2,), (8,), (a, np.int64(1 << 40)))
    text = _message(caught)
    assert "kernel 'far_write'" in text and re.search(r"SIGSEGV \(invalid memory access\) (writing|at) address", text), text
    assert re.search(r"block\W+1\W+0\W+0", text) and re.search(r"thread\W+3\W+0\W+0", text), text
    assert re.search(r"\d+ bytes (past the end|after the start) of argument 0", text), text
    expected = hex(a.ctypes.data + 4 * (1 << 40))
    assert expected in text, text
    # the process goes on: the same kernel, and others, give correct results
    kernel((2,), (8,), (a, np.int64(2)))
    assert a.tolist() == [0.0, 0.0, 1.0, 0.0]


def test_a_far_read_is_a_kernel_fault():
    a = np.arange(8, dtype=np.float32)
    out = np.zeros(8, dtype=np.float32)
    kernel = kspec.RawKernel(FAR_READ, "far_read")
    with pytest.raises(kspec.KernelFaultError) as caught:
        kernel((1,), (8,), (a, out, np.int64(-(1 << 42))))
    text = _message(caught)
    assert re.search(r"SIGSEGV \(invalid memory access\) (reading|at) address", text) and re.search(r"thread\W+2\W+0\W+0", text), text
    assert re.search(r"bytes before the start of argument [01] ", text), text  # the lower of the two buffers
    kernel((1,), (8,), (a, out, np.int64(0)))
    np.testing.assert_array_equal(out, a)


def test_an_allocation_of_the_device_is_named_with_its_size():
    a = kspec.asarray(np.zeros(4, dtype=np.float32))  # the CPU device's own allocation: its size is known
    kernel = kspec.RawKernel(FAR_WRITE, "far_write")
    with pytest.raises(kspec.KernelFaultError) as caught:
        kernel((2,), (8,), (a, np.int64(1 << 40)))
    text = _message(caught)
    assert re.search(r"\d+ bytes past the end of argument 0 \(16 bytes at 0x[0-9a-f]+\)", text), text


def test_integer_division_by_zero_is_a_kernel_fault():
    a = np.arange(64, dtype=np.int32)
    b = np.ones(64, dtype=np.int32)
    b[40] = 0
    out = np.zeros(64, dtype=np.int32)
    kernel = kspec.RawKernel(DIVIDE, "divide")
    with pytest.raises(kspec.KernelFaultError) as caught:
        kernel((2,), (32,), (a, b, out))
    text = _message(caught)
    assert "SIGFPE" in text and re.search(r"block\W+1\W+0\W+0", text) and re.search(r"thread\W+8\W+0\W+0", text), text
    b[40] = 1
    kernel((2,), (32,), (a, b, out))
    np.testing.assert_array_equal(out, a)


def test_a_fault_on_a_fiber_of_a_synchronising_block():
    a = np.arange(64, dtype=np.float32)
    kernel = kspec.RawKernel(SYNCED_WRITE, "synced_write")
    with pytest.raises(kspec.KernelFaultError) as caught:
        kernel((1,), (64,), (a.copy(), np.int64(1 << 40)))
    assert re.search(r"thread\W+5\W+0\W+0", _message(caught)), _message(caught)
    b = a.copy()
    kernel((1,), (64,), (b, np.int64(0)))  # far = 0: thread 5 writes a[0] = tile[0] (a race, as on a GPU)
    np.testing.assert_array_equal(b[1:], a[::-1][1:])


def test_a_fault_in_an_elementwise_body_on_worker_threads():
    # a raw operand's index is bounds-checked (KernelIndexError); a pointer the body makes is not
    kernel = kspec.ElementwiseKernel("float32 x, int64 far", "float32 y",
                                     "y = x; if (i == 70000 && far != 0) y = *((const float*)0 + far);",
                                     "ew_far_read")  # fmt: skip
    x = np.ones(1 << 17, dtype=np.float32)  # large enough for the loop's worker threads
    with pytest.raises(kspec.KernelFaultError) as caught:
        kernel(x, np.int64(1 << 40))
    assert "kernel 'ew_far_read" in _message(caught) and "SIGSEGV" in _message(caught), _message(caught)
    np.testing.assert_array_equal(kernel(x, np.int64(0)), x)


RECURSE = r"""
__device__ int deep(int n, volatile int* sink) {
    volatile char pad[512];
    pad[0] = (char)n;
    sink[0] = pad[0];
    return n <= 0 ? 0 : 1 + deep(n - 1, sink) + sink[0];
}
extern "C" __global__ void recurse(int* out, int n) {
    __syncthreads();  // the block runs as fibers, each on its own stack with a guard page
    out[threadIdx.x] = deep(threadIdx.x == 1 ? n : 1, out);
}
"""


def test_a_fibers_stack_overflow_is_a_kernel_fault():
    out = np.zeros(4, np.int32)
    kernel = kspec.RawKernel(RECURSE, "recurse")
    with pytest.raises(kspec.KernelFaultError) as caught:
        kernel((1,), (4,), (out, np.int32(1 << 20)))  # ~512 MiB of frames on a 256 KiB stack
    assert "SIGSEGV" in _message(caught) and re.search(r"thread\W+1\W+0\W+0", _message(caught)), _message(caught)
    kernel((1,), (4,), (out, np.int32(0)))
    assert out[1:].tolist() == [0, 1, 1]  # deep(0) = 0, deep(1) = 1 (out[0] is the threads' shared sink)
