"""kspec.fuse on kspec's CPU device: functions of NumPy arrays trace into kernels and run them.

On a GPU machine a fused function called with NumPy arrays runs the plain Python function (CuPy's rule); on the
CPU device NumPy arrays are the device's arrays, so the function is traced once per signature and its kernels
(compiled by the host C++ compiler) run. Here: proof that kernels run (the function is not called again, a
full reduction returns a 0-d array as on a GPU, not NumPy's scalar), results against NumPy for elementwise
work with every reduction, several kernels, float16 and broadcasting; the plain function again once the
``use_device("cpu")`` block is left; and ``KSPEC_DEVICE=cpu`` in a fresh process. Skipped without a host
compiler.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kspec

from helpers.child_env import child_env

pytestmark = pytest.mark.usefixtures("needs_host_compiler")


@pytest.fixture
def cpu_device():
    with kspec.use_device("cpu"):
        yield


def _traced_types(record: list[type]):
    """A fused function that records the type of its first argument each time Python runs it."""

    @kspec.fuse
    def scaled_sum(x, y):
        record.append(type(x))
        return x * y + 1, (x * y).sum()

    return scaled_sum


def test_numpy_arguments_run_kernels_not_the_function(cpu_device) -> None:
    seen: list[type] = []
    f = _traced_types(seen)
    x, y = np.arange(12, dtype=np.float32).reshape(3, 4), np.full(4, 0.5, np.float32)
    for _ in range(3):
        elementwise, total = f(x, y)
    assert len(seen) == 1 and seen[0] is not np.ndarray  # traced once, with kspec's traced arrays
    # a full reduction's result is a 0-d device array, as on a GPU (NumPy's own sum returns a scalar)
    assert type(total) is np.ndarray and total.shape == () and total.dtype == np.float32
    assert type(elementwise) is np.ndarray and elementwise.dtype == np.float32
    np.testing.assert_array_equal(elementwise, x * y + 1)
    np.testing.assert_allclose(total, (x * y).sum(), rtol=1e-6)


REDUCTIONS = ["sum", "prod", "max", "min", "all", "any"]
AXES = [(None, False), (1, True), (-1, False), ((0, 2), False), ((0, 2), True)]


def _reduced(op: str, axis, keepdims: bool):
    if op in ("all", "any"):
        return lambda x, y: getattr(x > y, op)(axis=axis, keepdims=keepdims)
    return lambda x, y: getattr(1 + 0.01 * (x * 0.5 - y), op)(axis=axis, keepdims=keepdims)


@pytest.mark.parametrize("op", REDUCTIONS)
def test_elementwise_then_reduction_matches_numpy(cpu_device, op: str) -> None:
    # float32 only: each (op, axis) is a kernel of its own, ~0.7 s of host compiling (float64 is tested below)
    rng = np.random.default_rng(sum(map(ord, op)))
    x = rng.standard_normal((4, 5, 6)).astype(np.float32)
    y = rng.standard_normal(6).astype(np.float32)
    for axis, keepdims in AXES:
        fn = _reduced(op, axis, keepdims)
        got, want = kspec.fuse(fn)(x, y), np.asarray(fn(x, y))
        assert type(got) is np.ndarray, (axis, keepdims)
        assert got.dtype == want.dtype and got.shape == want.shape, (axis, keepdims, got.dtype, got.shape)
        np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=f"{op} axis={axis} keepdims={keepdims}")


def test_integer_reductions_match_numpy(cpu_device) -> None:
    x = np.arange(-30, 30, dtype=np.int32).reshape(3, 4, 5)
    fused = kspec.fuse(lambda v: (v.sum(axis=1), (v % 3 + 1).prod(axis=(0, 2)), v.max(axis=0), v.min(), (v != 0).all(axis=2)))
    for got, want in zip(fused(x), (x.sum(axis=1), (x % 3 + 1).prod(axis=(0, 2)), x.max(axis=0), x.min(), (x != 0).all(axis=2))):
        want = np.asarray(want)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_two_reductions_run_as_several_kernels(cpu_device) -> None:
    @kspec.fuse
    def centered_max(x):
        return (x - x.sum(axis=1, keepdims=True)).max(axis=1)

    @kspec.fuse
    def both_sums(x, y):
        return x.sum() + y.sum(), x.max(axis=0).min()

    rng = np.random.default_rng(7)
    x, y = rng.standard_normal((20, 30)), rng.standard_normal(7)
    assert len(centered_max.specs(x)) == 2
    assert len(both_sums.specs(x, y)) >= 2
    np.testing.assert_allclose(centered_max(x), (x - x.sum(axis=1, keepdims=True)).max(axis=1), rtol=1e-13)
    total, lowest = both_sums(x, y)
    np.testing.assert_allclose(total, x.sum() + y.sum(), rtol=1e-13)
    assert float(lowest) == x.max(axis=0).min()


def test_float16_inputs(cpu_device) -> None:
    rng = np.random.default_rng(16)
    x = rng.standard_normal((8, 33)).astype(np.float16)
    y = (np.abs(rng.standard_normal(33)) + 0.1).astype(np.float16)

    @kspec.fuse
    def f(x, y):
        return np.sqrt(y) * x - 2.5, (x * y).sum(axis=1), np.maximum(x, y).max(axis=0)

    got = f(x, y)
    with np.errstate(all="ignore"):
        want = (np.sqrt(y) * x - 2.5, (x * y).sum(axis=1), np.maximum(x, y).max(axis=0))
    for g, w in zip(got, want):
        assert g.dtype == np.float16 and g.shape == w.shape
        np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), rtol=5e-3, atol=5e-3)


def test_broadcasting_views_and_scalars(cpu_device) -> None:
    rng = np.random.default_rng(8)
    x, y, z = rng.standard_normal((3, 1, 5)), rng.standard_normal((4, 1)), np.asarray(1.5)
    f = kspec.fuse(lambda a, b, c, k: (a * b - c) / k)
    np.testing.assert_allclose(f(x, y, z, 4.0), (x * y - z) / 4.0, rtol=1e-14)
    w, v = rng.standard_normal((40, 30)), rng.standard_normal(80)
    g = kspec.fuse(lambda a, b: (a * 2 - b).sum(axis=0))  # a transposed view, b reversed, strided, broadcast
    np.testing.assert_allclose(g(w.T, v[::-2]), (w.T * 2 - v[::-2]).sum(axis=0), rtol=1e-12)


def test_leaving_the_cpu_device_runs_the_plain_function_again() -> None:
    seen: list[type] = []
    f = _traced_types(seen)
    x, y = np.arange(6, dtype=np.float64), np.full(6, 2.0)
    with kspec.use_device("cuda"):  # a GPU machine's rule, whatever KSPEC_DEVICE says; no GPU is touched
        with kspec.use_device("cpu"):
            on_device = f(x, y)
            f(x, y)  # the repeat goes through the fused kernels' prepared calls
        assert len(seen) == 1 and seen[0] is not np.ndarray
        plain = f(x, y)
        assert seen[1:] == [np.ndarray]  # the function itself ran, on NumPy arrays
        assert isinstance(plain[1], np.float64) and not isinstance(plain[1], np.ndarray)  # NumPy's scalar
        np.testing.assert_array_equal(plain[0], on_device[0])
        np.testing.assert_allclose(plain[1], on_device[1], rtol=1e-15)
        f(x, y)
        assert seen[1:] == [np.ndarray, np.ndarray]
        with kspec.use_device("cpu"):  # back on the CPU device: the traced kernels, not a new trace
            again = f(x, y)
        assert len(seen) == 3 and type(again[1]) is np.ndarray and again[1].shape == ()


def test_one_elementwise_kernel_repeated_across_the_switch() -> None:
    # a single elementwise kernel has a fast path keyed by the arguments' shapes and strides alone (see
    # FusedFunction.__call__); the device switch must still send NumPy arrays to the plain function
    calls: list[int] = []

    @kspec.fuse
    def f(x, y):
        calls.append(1)
        return (x - y) * (x - y)

    x, y = np.arange(8, dtype=np.float32), np.full(8, 3.0, np.float32)
    with kspec.use_device("cuda"):
        with kspec.use_device("cpu"):
            for _ in range(3):
                np.testing.assert_array_equal(f(x, y), (x - y) ** 2)
        assert len(calls) == 1
        np.testing.assert_array_equal(f(x, y), (x - y) ** 2)
        assert len(calls) == 2


def test_kspec_device_environment_variable_selects_the_cpu_device(tmp_path) -> None:
    script = textwrap.dedent("""
        import numpy as np
        import kspec

        calls = []

        @kspec.fuse
        def f(x, y):
            calls.append(type(x))
            return x * y + 1, (x * y).sum(axis=0), (x * y).sum()

        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        y = np.full(4, 0.5, np.float32)
        for _ in range(2):
            elementwise, columns, total = f(x, y)
        assert kspec.device_kind() == "cpu", kspec.device_kind()
        assert len(calls) == 1 and calls[0] is not np.ndarray, calls
        assert type(total) is np.ndarray and total.shape == (), type(total)
        np.testing.assert_array_equal(elementwise, x * y + 1)
        np.testing.assert_allclose(columns, (x * y).sum(axis=0), rtol=1e-6)
        np.testing.assert_allclose(total, (x * y).sum(), rtol=1e-6)
        print("ran on", kspec.device_kind())
    """)
    env = child_env(KSPEC_DEVICE="cpu")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0 and "ran on cpu" in done.stdout, done.stdout + done.stderr
