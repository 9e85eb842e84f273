"""Split reductions in one pass on a GPU: the last block of each tile of outputs merges the tile's partials,
counted by arrival counters that reset themselves (kspec/runtime/_split_counters.py). Against NumPy, for
the two split strategies ("split": a block per segment of long rows; "cols split": column tiles over
several blocks), types of 1, 4, 8 and 16 bytes, a reduction without identity, repeated and concurrent calls,
CUDA graph captures by CuPy and PyTorch replayed on other streams, and the memset fallback.

Every case checks first that the call runs one kernel with counters (the planner's real answer on this
device), so a silent fallback to two passes cannot make it pass.
"""

from __future__ import annotations

import numpy as np
import pytest

import kspec
from kspec.kernels._bind import bind
from kspec.kernels._plan_reduction import plan_reduction
from kspec.kernels._planner_reduction import reduction_steps
from kspec.runtime import _split_counters

pytestmark = pytest.mark.gpu

# (shape, axis): each a split on an H100 / H200 (132 SMs), checked per call by _one_pass below
FULL = ((1 << 22,), None)  # "split": one output, rows of 2^22 over a wave of blocks
COLS = ((64, 16, 256, 16), (0, 2))  # "cols split": 256 outputs, tiles of 16 over 16 chunks
ROWS = ((8, 1 << 18), 1)  # "split": 8 outputs of 2^18


@pytest.fixture
def cp():
    return pytest.importorskip("cupy")


@pytest.fixture(scope="module")
def l2():
    return kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2_one_pass")


def _one_pass(cp, kernel, x, axis):
    """Assert that ``kernel(x, axis=axis)`` runs in one pass with arrival counters; return the counters."""
    bound = bind(kernel.spec, (x,), None)
    plan = plan_reduction(kernel.spec, bound, kernel._specializer, axis=axis, keepdims=False)
    steps, _workspace, counters = reduction_steps(kernel, plan, x.device.id, cp.cuda.get_current_stream().ptr,
                                                  one_pass=True)  # fmt: skip
    assert len(steps) == 1 and counters > 0, (x.shape, axis, [s.what for s in steps])
    return counters


def _l2_ref(a, axis):
    return np.sqrt((a.astype(np.float64) ** 2).sum(axis=axis))


@pytest.mark.parametrize(("shape", "axis"), [FULL, COLS, ROWS], ids=["full", "cols", "rows"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_one_pass_split_matches_numpy(cp, l2, shape, axis, dtype):
    a = np.random.default_rng(1).standard_normal(shape).astype(dtype)
    x = cp.asarray(a)
    _one_pass(cp, l2, x, axis)
    ref = _l2_ref(a, axis)
    for _ in range(3):  # the counters are zero again after each launch
        np.testing.assert_allclose(cp.asnumpy(l2(x, axis=axis)), ref, rtol=1e-5 if dtype == "float32" else 1e-12)


def test_types_of_1_8_and_16_bytes_and_no_identity(cp):
    any_k = kspec.ReductionKernel("T x", "bool y", "x != 0", "a || b", "y = a", "false", "any_one_pass",
                                  reduce_type="bool")  # fmt: skip
    max_k = kspec.ReductionKernel("T x", "T y", "x", "max(a, b)", "y = a", None, "max_one_pass")
    csum = kspec.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "csum_one_pass")
    rng = np.random.default_rng(2)
    for shape, axis in (FULL, COLS, ROWS):
        ints = rng.integers(-(1 << 30), 1 << 30, size=shape, dtype=np.int64)
        x = cp.asarray(ints)
        _one_pass(cp, max_k, x, axis)
        np.testing.assert_array_equal(cp.asnumpy(max_k(x, axis=axis)), ints.max(axis=axis))
        sparse = np.zeros(shape, np.int32)
        sparse.reshape(-1)[rng.integers(0, sparse.size, 3)] = 1
        xs = cp.asarray(sparse)
        _one_pass(cp, any_k, xs, axis)
        np.testing.assert_array_equal(cp.asnumpy(any_k(xs, axis=axis)), sparse.any(axis=axis))
        c = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex128)
        xc = cp.asarray(c)
        _one_pass(cp, csum, xc, axis)
        np.testing.assert_allclose(cp.asnumpy(csum(xc, axis=axis)), c.sum(axis=axis), rtol=1e-10)


def test_shapes_one_after_another_share_a_streams_counters(cp, l2):
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(shape).astype(np.float32) for shape, _ in (FULL, COLS, ROWS)]
    xs = [cp.asarray(a) for a in arrays]
    outs = [l2(x, axis=axis) for _round in range(4) for x, (_, axis) in zip(xs, (FULL, COLS, ROWS))]
    for k, out in enumerate(outs):
        np.testing.assert_allclose(cp.asnumpy(out), _l2_ref(arrays[k % 3], (FULL, COLS, ROWS)[k % 3][1]), rtol=1e-5)


def test_concurrent_streams(cp, l2):
    rng = np.random.default_rng(4)
    shape, axis = COLS
    arrays = [rng.standard_normal(shape).astype(np.float32) for _ in range(4)]
    xs = [cp.asarray(a) for a in arrays]
    streams = [cp.cuda.Stream(non_blocking=True) for _ in xs]
    cp.cuda.Device().synchronize()
    outs: list[list] = [[] for _ in xs]
    for _round in range(25):  # interleaved launches: without per-stream counters they would race
        for k, (x, stream) in enumerate(zip(xs, streams)):
            with stream:
                outs[k].append(l2(x, axis=axis))
    for stream in streams:
        stream.synchronize()
    for a, results in zip(arrays, outs):
        ref = _l2_ref(a, axis)
        for out in results:
            np.testing.assert_allclose(cp.asnumpy(out), ref, rtol=1e-5)


def test_cupy_capture_replayed_on_another_stream_beside_eager_calls(cp, l2):
    rng = np.random.default_rng(5)
    shape, axis = COLS
    a, b = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    x, y = cp.asarray(a), cp.asarray(b)
    l2(x, axis=axis)  # loads the module outside the capture
    capture = cp.cuda.Stream(non_blocking=True)
    with capture:
        capture.begin_capture()
        out = l2(x, axis=axis)
        graph = capture.end_capture()
    replay, eager = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    for _round in range(10):  # the graph's counters are its own: eager calls on the capture stream beside it
        graph.launch(stream=replay)
        with capture:
            other = l2(y, axis=axis)
        with eager:
            third = l2(y, axis=axis)
    cp.cuda.Device().synchronize()
    np.testing.assert_allclose(cp.asnumpy(out), _l2_ref(a, axis), rtol=1e-5)
    np.testing.assert_allclose(cp.asnumpy(other), _l2_ref(b, axis), rtol=1e-5)
    np.testing.assert_allclose(cp.asnumpy(third), _l2_ref(b, axis), rtol=1e-5)
    x[...] = y  # a replay reads the new values
    graph.launch(stream=replay)
    replay.synchronize()
    np.testing.assert_allclose(cp.asnumpy(out), _l2_ref(b, axis), rtol=1e-5)


def test_torch_graph_capture(l2):
    torch = pytest.importorskip("torch")
    shape, axis = FULL
    x = torch.randn(shape, device="cuda")
    ref = torch.linalg.vector_norm(x.double(), dim=axis).float()
    l2(x, axis=axis)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = l2(x, axis=axis)
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=0)
    x.mul_(2)
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, 2 * ref, rtol=1e-5, atol=0)


def test_no_counters_to_hand_out_zeroes_the_launchs_own(cp, l2, monkeypatch):
    monkeypatch.setattr(_split_counters._DeviceCounters, "counters", lambda self, handle, count: None)
    rng = np.random.default_rng(6)
    for shape, axis in (FULL, COLS, ROWS):
        a = rng.standard_normal(shape).astype(np.float32)
        x = cp.asarray(a)
        for _ in range(2):
            np.testing.assert_allclose(cp.asnumpy(l2(x, axis=axis)), _l2_ref(a, axis), rtol=1e-5)
        stream = cp.cuda.Stream(non_blocking=True)
        with stream:  # captured: a memset node before the kernel
            stream.begin_capture()
            out = l2(x, axis=axis)
            graph = stream.end_capture()
        graph.launch(stream=stream)
        graph.launch(stream=stream)
        stream.synchronize()
        np.testing.assert_allclose(cp.asnumpy(out), _l2_ref(a, axis), rtol=1e-5)


def test_captured_launches_take_counters_of_their_own(cp, l2):
    shape, axis = COLS
    x = cp.asarray(np.random.default_rng(7).standard_normal(shape).astype(np.float32))
    l2(x, axis=axis)
    device = _split_counters._devices[x.device.id]
    eager = device.streams[cp.cuda.get_current_stream().ptr or 0]
    taken = []
    stream = cp.cuda.Stream(non_blocking=True)
    for _ in range(2):
        before = (len(device.arenas), device.free_at)
        with stream:
            stream.begin_capture()
            l2(x, axis=axis)
            stream.end_capture()
        taken.append(before)
        assert (len(device.arenas), device.free_at) != before  # a slice of its own, every capture
    assert eager == device.streams[cp.cuda.get_current_stream().ptr or 0]
