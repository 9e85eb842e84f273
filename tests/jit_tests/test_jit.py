"""kspec.jit kernels run on both devices (NumPy arrays on kspec's CPU device, CuPy arrays on a GPU): every
builtin against NumPy, both launch styles, device functions, kspec arrays, the seed example. GPU-only:
PyTorch tensors and streams, cooperative grid sync, host arrays refused, and a kernel precompiled by
`kspec build` run with NVRTC blocked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers import jit_kernels as K
import kspec
from kspec import jit

REPO = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(12345)


def dev(xp, a):
    return xp.asarray(np.ascontiguousarray(a))


def test_seed_example(xp):
    size = xp.uint32(2**22)
    x = xp.asarray(RNG.standard_normal(int(size)).astype(np.float32))
    y = xp.empty((size,), dtype=xp.float32)
    K.elementwise_copy((128,), (1024,), (x, y, size))  # RawKernel style
    assert (x == y).all()
    y[:] = 0
    K.elementwise_copy[128, 1024](x, y, size)  # Numba style
    assert (x == y).all()


def test_seed_example_with_kspec_arrays(xp):
    n = 10001
    hx = RNG.standard_normal(n).astype(np.float32)
    x, y = kspec.asarray(hx), kspec.zeros(n, dtype=np.float32)
    K.elementwise_copy[8, 128](x, y, n)
    np.testing.assert_array_equal(y.get(), hx)


def test_saxpy_on_a_strided_view(xp):
    m = xp.asarray(RNG.standard_normal((64, 64)).astype(np.float32))
    col = m[:, 3]  # a transposed-column view: strides are honoured
    out = xp.zeros(64, dtype=np.float32)
    K.saxpy((1,), (64,), (np.float32(1.0), col, col, out, 64))
    np.testing.assert_array_equal(xp.asnumpy(out), 2 * xp.asnumpy(m)[:, 3])


@pytest.mark.gpu
def test_saxpy_with_torch_and_stream():
    torch = pytest.importorskip("torch")
    n = 1 << 16
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        K.saxpy[64, 256, stream.cuda_stream, 0](np.float32(2.5), x, y, out, n)
    stream.synchronize()
    torch.testing.assert_close(out, 2.5 * x + y)
    # a strided (transposed-column) view: strides are honoured
    m = torch.randn(64, 64, device="cuda")
    col = m[:, 3]
    out2 = torch.empty(64, device="cuda")
    K.saxpy((1,), (64,), (np.float32(1.0), col, col, out2, 64))
    torch.cuda.synchronize()
    torch.testing.assert_close(out2, 2 * m[:, 3])


@pytest.mark.gpu
def test_kspec_stream_argument():
    n = 4096
    hx = RNG.standard_normal(n).astype(np.float32)
    x, y, out = kspec.asarray(hx), kspec.asarray(hx), kspec.zeros(n, dtype=np.float32)
    stream = kspec.Stream()
    K.saxpy((16,), (256,), (np.float32(-1), x, y, out, n), stream=stream)
    stream.synchronize()
    np.testing.assert_allclose(out.get(), np.zeros(n, np.float32), atol=0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_arithmetic_matches_cpp_semantics(dtype, xp):
    n = 1000
    if np.dtype(dtype).kind == "f":
        ha = RNG.uniform(-10, 10, n).astype(dtype)
        hb = RNG.uniform(0.5, 5, n).astype(dtype) * RNG.choice([-1, 1], n)
    else:
        ha = RNG.integers(-100, 100, n).astype(dtype)
        hb = RNG.integers(1, 10, n).astype(dtype) * RNG.choice([-1, 1], n).astype(dtype)
    out = xp.zeros((n, 10), dtype=dtype)
    K.arithmetic[(n + 127) // 128, 128](dev(xp, ha), dev(xp, hb), out)
    got = xp.asnumpy(out)
    a, b = ha.astype(np.float64), hb.astype(np.float64)
    if np.dtype(dtype).kind == "f":
        floordiv, mod = np.floor(a / b), np.fmod(a, b)
    else:
        floordiv, mod = np.trunc(a / b), np.fmod(ha, hb)  # C++: toward zero, sign of the dividend
    cmp = (a < b) + (a <= b) * 2 + (a == b) * 4 + (a != b) * 8 + (a >= b) * 16
    expected = [a + b, a - b, a * b, a / b, floordiv, mod, -a, np.maximum(a, b), cmp, a * 3 + 1]
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for k, e in enumerate(expected):
        np.testing.assert_allclose(got[:, k].astype(np.float64), np.asarray(e, np.float64).astype(dtype).astype(np.float64), rtol=rtol, err_msg=f"column {k}")


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64])
def test_integer_ops(dtype, xp):
    n = 512
    lo = 0 if np.dtype(dtype).kind == "u" else -50
    ha, hb = RNG.integers(lo, 50, n).astype(dtype), RNG.integers(0, 50, n).astype(dtype)
    out = xp.zeros((n, 10), dtype=dtype)
    K.integer_ops[4, 128](dev(xp, ha), dev(xp, hb), out)
    got = xp.asnumpy(out)
    with np.errstate(over="ignore"):
        expected = [ha & hb, ha | hb, ha ^ hb, ha << 2, ha >> 1, ~ha, ha ** 3, np.abs(ha),
                    np.minimum(np.minimum(ha, hb), 5), np.maximum(ha, hb)]
    for k, e in enumerate(expected):
        np.testing.assert_array_equal(got[:, k], np.asarray(e).astype(dtype), err_msg=f"column {k}")


def test_control_flow_and_runtime_step(xp):
    n = 300
    hx = RNG.uniform(-1, 1, n).astype(np.float32)
    hx[::7] = 0
    out = xp.zeros(n, dtype=np.int64)
    K.control_flow[3, 128](dev(xp, hx), out, n)
    kind = np.sign(hx).astype(np.int64)
    total = (1 + 3 + 5 + 7 + 9) + (10 + 8 + 6 + 4 + 2) + np.where(kind > 0, 3, 6) + (0 + 2 + 4 + 6) + 4
    total = total + np.where(kind == 0, 3, 4)
    np.testing.assert_array_equal(xp.asnumpy(out), total * 10 + kind)
    u32, i32, u64, i64 = np.uint32, np.int32, np.uint64, np.int64
    cases = [(0, 10, 3), (10, 0, -3), (5, 5, 1), (-4, 4, 2),
             (u32(3), i32(-5), u32(1)),  # compared as Python compares: a negative stop, no iteration
             (i32(10), i32(-10), i32(-7)),
             (u64(2**64 - 10), u64(2**64 - 1), u64(4)),  # near the top of uint64: no wrap-around
             (i64(-2**63), i64(2**63 - 1), i64(2**62))]  # a distance that overflows int64
    for start, stop, step in cases:
        cnt = xp.zeros(1, dtype=np.int64)
        K.runtime_step[1, 1](cnt, start, stop, step)
        assert xp.asnumpy(cnt)[0] == len(range(int(start), int(stop), int(step))), (start, stop, step)
    cnt = xp.zeros(1, dtype=np.int64)
    K.runtime_step[1, 1](cnt, 0, 10, 0)  # a zero step at run time: no iteration (a kernel cannot raise)
    assert xp.asnumpy(cnt)[0] == 0


def test_shapes_strides_and_zero_d(xp):
    hx = RNG.standard_normal((33, 17)).astype(np.float32)
    out = xp.zeros((33, 17), dtype=np.float32)
    K.shapes[(3, 2), (16, 16)](dev(xp, hx), out)
    expected = hx * 2 + 2
    expected[0, 0] = hx.size
    np.testing.assert_allclose(xp.asnumpy(out), expected, rtol=1e-6)
    # 0-d arrays of the device's library (kspec.asarray makes 0-d host arrays 1-d)
    x0, z = xp.asarray(np.float64(2.5)), xp.zeros((), dtype=np.float64)
    assert x0.ndim == 0
    K.zero_d[1, 1](x0, z)
    assert float(z) == 3.5


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_math_functions(dtype, xp):
    n = 256
    hx = RNG.uniform(0.1, 3, n).astype(dtype)
    out = xp.zeros((n, 10), dtype=dtype)
    K.math_functions[2, 128](dev(xp, hx), out)
    x = hx.astype(np.float64)
    expected = [np.sqrt(x), np.exp(x), np.log(x) + np.log2(x), np.sin(x) * np.cos(x), np.floor(x) + np.ceil(x),
                x ** 2 + x ** 0.5, np.arctan2(x, 1) + np.hypot(x, x), 2 * x + np.pi, 0 * x + 2,
                np.tanh(x) + np.maximum(x, 0.5) + np.minimum(x, 0.5) + x * x]
    rtol = 2e-6 if dtype == np.float32 else 1e-12
    for k, e in enumerate(expected):
        np.testing.assert_allclose(xp.asnumpy(out)[:, k], e, rtol=rtol, err_msg=f"column {k}")


def test_casts(xp):
    hx = np.array([-2.7, -0.0, 0.4, 3.9, 250.6], np.float32)
    out = xp.zeros((5, 8), dtype=np.float64)
    K.casts[1, 32](dev(xp, hx), out)
    got = xp.asnumpy(out)
    np.testing.assert_allclose(got[:, 0], hx * np.float32(0.5))
    np.testing.assert_array_equal(got[:, 1], np.trunc(hx))
    np.testing.assert_allclose(got[:, 2], hx.astype(np.float64) / 4)
    np.testing.assert_array_equal(got[:, 3], (hx != 0) + 3)
    np.testing.assert_array_equal(got[:, 4], np.trunc(np.trunc(hx) / 2))
    np.testing.assert_array_equal(got[:, 5], np.uint8(44))  # uint8 wraps: 200 + 100 = 44
    np.testing.assert_array_equal(got[:, 6], 1)
    np.testing.assert_allclose(got[:, 7], (hx.astype(np.float16) + np.float16(1)).astype(np.float64), rtol=1e-3)


def test_thread_index_builtins(xp):
    grid, block = (2, 3, 2), (4, 2, 8)
    total = np.prod(grid) * np.prod(block)
    out = xp.zeros((total, 7), dtype=np.int64)
    K.thread_ids[grid, block](out)
    got = xp.asnumpy(out)
    tz, ty, tx = np.meshgrid(np.arange(block[2]), np.arange(block[1]), np.arange(block[0]), indexing="ij")
    assert sorted(got[:, 6]) == list(range(total))
    rows = {tuple(r) for r in got[:, :4]}
    assert len(rows) == total
    assert set(got[:, 2]) == {4 + 20 + 800} and set(got[:, 3]) == {2 + 30 + 200}
    assert set(got[:, 5]) == {32} and set(got[:, 4]) <= set(range(32))
    # laneid is the linear thread index in the block, mod 32
    lin = got[:, 0] % 10 + (got[:, 0] // 10 % 10) * block[0] + (got[:, 0] // 100) * block[0] * block[1]
    np.testing.assert_array_equal(got[:, 4], lin % 32)


def test_shared_memory_static_reduction(xp):
    n = 256 * 40 - 3
    hx = RNG.standard_normal(n).astype(np.float32)
    out = xp.zeros(40, dtype=np.float32)
    K.block_reduce[40, 256](dev(xp, hx), out)
    expected = np.pad(hx, (0, 3)).reshape(40, 256).sum(axis=1, dtype=np.float64)
    np.testing.assert_allclose(xp.asnumpy(out), expected, rtol=1e-4, atol=1e-4)


def test_shared_memory_dynamic(xp):
    hx = RNG.standard_normal(8 * 64)
    out = xp.zeros(8 * 64, dtype=np.float64)
    K.dynamic_shared((8,), (64,), (dev(xp, hx), out), shared_mem=64 * 8)
    np.testing.assert_array_equal(xp.asnumpy(out), hx.reshape(8, 64)[:, ::-1].ravel())


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64, np.float16, np.float32, np.float64])
def test_warp_shuffles(dtype, xp):
    hx = (RNG.integers(0, 100, 64)).astype(dtype)
    out = xp.zeros((64, 10), dtype=dtype)
    K.warp_shuffles[1, 64](dev(xp, hx), out)
    got = xp.asnumpy(out)[:, :5].reshape(2, 32, 5)
    x = hx.reshape(2, 32)
    lane = np.arange(32)
    for w in range(2):
        np.testing.assert_array_equal(got[w, :, 0], x[w, 0])
        np.testing.assert_array_equal(got[w, :, 1], x[w, np.maximum(lane - 1, 0)])
        np.testing.assert_array_equal(got[w, :, 2], x[w, np.minimum(lane + 1, 31)])
        np.testing.assert_array_equal(got[w, :, 3], x[w, lane ^ 1])
        np.testing.assert_array_equal(got[w, :, 4], x[w, (lane // 8) * 8 + 1])


@pytest.mark.gpu
def test_cooperative_grid_sync():
    n = 1 << 20
    hx = RNG.standard_normal(n).astype(np.float32)
    x, out = kspec.asarray(hx), kspec.zeros(n, dtype=np.float32)
    sms = kspec.get_device().multiprocessor_count
    K.grid_sync[sms, 256](x, out, n)  # every block resident: the launch is cooperative
    np.testing.assert_array_equal(out.get(), hx * 2)
    np.testing.assert_array_equal(x.get(), np.roll(hx * 2, -1))


def test_memcpy_async(xp):
    hx = RNG.standard_normal(4 * 128).astype(np.float32)
    out = xp.zeros(4 * 128, dtype=np.float32)
    K.async_copy[4, 128](dev(xp, hx), out)
    np.testing.assert_array_equal(xp.asnumpy(out), hx.reshape(4, 128)[:, ::-1].ravel() + 1)


def test_device_functions(xp):
    n = 1000
    hx = RNG.standard_normal(n).astype(np.float32)
    out = xp.zeros(n, dtype=np.float32)
    K.uses_device_functions[8, 128](dev(xp, hx), out)
    shifted = np.append(hx[1:], hx[-1])
    np.testing.assert_allclose(xp.asnumpy(out), shifted * shifted + 1 + 7, rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64])
def test_integer_atomics_under_contention(dtype, xp):
    n = 4096
    values = RNG.integers(1, 1 << 12, n).astype(dtype)
    ones = -1 if np.dtype(dtype).kind == "i" else np.iinfo(dtype).max  # every bit set
    start = np.array([0, 1 << 30, 1 << 20, 0, ones, 0, 0, 0, 0], dtype=dtype)
    counters = dev(xp, start)
    K.atomics[n // 256, 256](counters, dev(xp, values))
    got = xp.asnumpy(counters)
    with np.errstate(over="ignore"):
        assert got[0] == values.sum(dtype=dtype)
        assert got[1] == (np.array(1 << 30, dtype) - values.sum(dtype=dtype)).astype(dtype)
    assert got[2] == min(values.min(), 1 << 20) and got[3] == values.max()
    and_all = np.bitwise_and.reduce(values)
    assert got[4] == (start[4] & and_all)
    assert got[5] == np.bitwise_or.reduce(values) and got[6] == np.bitwise_xor.reduce(values)
    assert got[7] in set(values.tolist()) and got[8] in set(values.tolist())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_atomic_add(dtype, xp):
    n = 100_000
    values = RNG.uniform(0, 1, n).astype(dtype)
    total = xp.zeros(2, dtype=dtype)
    K.atomic_float_add[(n + 255) // 256, 256](total, dev(xp, values))
    got = xp.asnumpy(total)
    np.testing.assert_allclose(got[0], values.sum(dtype=np.float64), rtol=1e-4)
    np.testing.assert_allclose(got[1], -values.sum(dtype=np.float64), rtol=1e-4)


def test_float16_atomic_add(xp):
    @jit.rawkernel()
    def half_add(total, values):
        i = jit.grid(1)
        jit.atomic_add(total, i % 4, values[i])

    values = np.full(256, 0.5, np.float16)
    total = xp.zeros(4, dtype=np.float16)
    half_add[2, 128](total, dev(xp, values))
    np.testing.assert_array_equal(xp.asnumpy(total), np.full(4, 32.0, np.float16))


def test_atomic_inc_dec(xp):
    out = xp.zeros(3, dtype=np.uint32)
    K.atomic_counters[4, 64](out, np.uint32(9))
    got = xp.asnumpy(out)
    # inc wraps to 0 after reaching 9: 256 increments -> 256 mod 10; dec from 0 wraps to 9
    assert got[0] == 256 % 10 and got[2] == 256
    assert got[1] == (-256) % 10


def test_complex_values(xp):
    hz = (RNG.standard_normal(100) + 1j * RNG.standard_normal(100)).astype(np.complex128)
    out = xp.zeros((100, 10), dtype=np.float64)
    K.complex_ops[1, 128](dev(xp, hz), out)
    w = hz * hz + 1
    np.testing.assert_allclose(xp.asnumpy(out)[:, 0], w.real, rtol=1e-12)
    np.testing.assert_allclose(xp.asnumpy(out)[:, 1], w.imag, rtol=1e-12)
    np.testing.assert_allclose(xp.asnumpy(out)[:, 2], np.abs(hz), rtol=1e-12)


def test_signature_cache(xp):
    copy = jit.rawkernel()(K.elementwise_copy.func)  # a cache of its own: other tests call elementwise_copy
    x = dev(xp, np.arange(10, dtype=np.float32))
    y = xp.zeros(10, dtype=np.float32)
    copy[1, 32](x, y, 10)
    copy[1, 32](x, y, 10)
    keys = len(copy._cache)
    assert keys == 1
    copy[1, 32](x, y, np.uint32(10))
    assert len(copy._cache) == keys + 1
    np.testing.assert_array_equal(xp.asnumpy(y), np.arange(10, dtype=np.float32))


@pytest.mark.gpu
def test_host_arrays_are_refused_on_a_gpu():
    y = kspec.zeros(10, dtype=np.float32)
    with pytest.raises(TypeError, match="host memory"):
        K.elementwise_copy[1, 32](np.zeros(10, np.float32), y, 10)


_RUN_PREBUILT = r'''
import sys, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.startswith("cuda.bindings.nvrtc") or name.startswith("nvidia.cuda_nvrtc"):
            raise ImportError("NVRTC is blocked in this test")
sys.meta_path.insert(0, Block())
import numpy as np, kspec
sys.path.insert(0, sys.argv[2])
from helpers import jit_kernels as K
K.elementwise_copy.use_binaries(sys.argv[1])
x = kspec.asarray(np.arange(1000, dtype=np.float32)); y = kspec.zeros(1000, dtype=np.float32)
K.elementwise_copy[4, 128](x, y, np.uint32(1000))
assert (y.get() == np.arange(1000, dtype=np.float32)).all()
print("prebuilt ok")
'''


@pytest.mark.gpu
def test_precompiled_kernel_runs_with_nvrtc_blocked(tmp_path):
    from kspec.spec import dumps_json  # the GPU machine has no tomli_w; the CPU test covers TOML

    arch = kspec.get_device().arch
    spec = K.elementwise_copy.spec(np.zeros(1, np.float32), np.zeros(1, np.float32), np.uint32(1))
    spec_file = tmp_path / "jit.json"
    spec_file.write_text(dumps_json([spec]))
    out = tmp_path / "build"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", KSPEC_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-m", "kspec", "build", str(spec_file), "--arch", arch, "-o", str(out)],
                          env=env, capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    env = dict(os.environ, KSPEC_CACHE_DIR=str(tmp_path / "empty-cache"))
    done = subprocess.run([sys.executable, "-c", _RUN_PREBUILT, str(out), str(REPO / "tests")], env=env,
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0 and "prebuilt ok" in done.stdout, done.stdout + done.stderr
