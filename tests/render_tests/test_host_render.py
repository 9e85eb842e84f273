"""The host templates (templates/host/*.cpp.j2, kspec.render.render_host) on kspec's CPU device, without a GPU:
rendered host modules are compiled and launched through kspec's CPU device (kspec.compiler's host path, the
host driver), and calls run through the kernels' own planner (kspec/kernels/planning/_plan.py, _reduction_plan.py) and parameter frames (_frame.py) with NumPy
arrays standing in for device arrays (tests/helpers/host_loops_support.py). Results are compared with NumPy.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import kspec
from kspec.render import render, render_host
from kspec.spec import load_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from helpers.host_build import requires_host_cxx  # noqa: E402
from helpers.host_loops_support import run_elementwise, run_reduction  # noqa: E402

pytestmark = requires_host_cxx

ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(29)


def _spec_kernel(path: str, name: str) -> object:
    spec = next(s for s in load_file(ROOT / "specs" / path) if s.name == name)
    cls = kspec.ElementwiseKernel if spec.KIND == "elementwise" else kspec.ReductionKernel
    return cls.from_spec(spec)


def _rand(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if np.dtype(dtype).kind == "i":
        return RNG.integers(-50, 50, size=shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def _close(got: np.ndarray, want: np.ndarray, dtype: str = "float64") -> None:
    rtol = 1e-4 if np.dtype(dtype) == np.float32 else 1e-10
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


# -- rendering -----------------------------------------------------------------------------------------


def test_host_module_has_the_gpu_modules_entries_and_abi():
    k = kspec.ElementwiseKernel("T x, raw T y, T s", "T z", "z = x + y[i] * s", "ew_abi")
    spec = k.specialization(np.zeros(3, np.float32), np.zeros(3, np.float32), np.float32(2))
    gpu, host = render(spec), render_host(spec)
    assert host.name_expressions == gpu.name_expressions
    assert dict(host.variants) == dict(gpu.variants) and dict(host.abi) == dict(gpu.abi)
    assert host.source != gpu.source and "kspec_host::loop_kernel ew_abi__contig" in host.source
    # the same placeholder typedefs and headers open both sources
    assert "typedef float T;" in host.source and "#include <kspec/indexer.cuh>" in host.source


def _signatures(source: str, name: str) -> dict[str, str]:
    """Each entry's parameter list in ``source`` (qualifiers that mean nothing on the host dropped)."""
    found = {}
    for match in re.finditer(rf"\b{name}__(\w+)\(", source):
        depth, end = 1, match.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(source[end], 0)
            end += 1
        params = source[match.end(): end - 1].replace("__grid_constant__ ", "")
        found[match.group(1)] = " ".join(params.split())
    return found


@pytest.mark.parametrize("kind", ["elementwise", "reduction"])
def test_host_entries_take_the_gpu_entries_parameters(kind):
    """Same parameter lists, entry for entry, for every kind of operand (arrays, scalars, raw, outputs)."""
    if kind == "elementwise":
        k = kspec.ElementwiseKernel("T x, raw T y, T s, int8 t", "T z, float64 w", "z = x + y[i] * s; w = t", "sig_ew")
        spec = k.specialization(np.zeros((40, 40), np.float32), np.zeros(3, np.float32), np.float32(2), np.zeros(3, np.int8))
    else:
        k = kspec.ReductionKernel("T x, T s, raw T v", "T y, int32 n", "x * s + v[_J]", "a + b", "y = a; n = 1", "0", "sig_red")
        spec = k.specialization(np.zeros(3, np.float64), 1.0, np.zeros(3, np.float64))
    gpu, host = _signatures(render(spec).source, spec.name), _signatures(render_host(spec).source, spec.name)
    entries = {variant.entry for variant in render(spec).variants}
    assert set(host) == set(gpu) >= entries
    for entry in entries:
        assert host[entry] == gpu[entry], entry


# -- elementwise ---------------------------------------------------------------------------------------

SQD = kspec.ElementwiseKernel("T x, T y", "T z", "z = (x - y) * (x - y)", "host_sqd")


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_squared_diff_spec_contiguous(dtype):
    k = _spec_kernel("elementwise.toml", "squared_diff_generic")
    x, y = _rand((1000, 37), dtype), _rand((1000, 37), dtype)
    z, entry = run_elementwise(k, x, y)
    assert entry == "contig"
    np.testing.assert_array_equal(z, (x - y) * (x - y))


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_contiguous_sizes_and_threads(threads):
    for n in (1, 15, 16, 17, 40000, 100003):
        x, y = _rand((n,), "float32"), _rand((n,), "float32")
        z, _ = run_elementwise(SQD, x, y, threads=threads)
        np.testing.assert_array_equal(z, (x - y) * (x - y))


def test_zero_dim_and_empty():
    x, y = np.array(3.0, np.float32), np.array(1.5, np.float32)
    z, entry = run_elementwise(SQD, x, y)
    assert entry == "contig" and z.shape == () and z == np.float32(2.25)
    z, entry = run_elementwise(SQD, np.zeros((0, 4), np.float32), np.zeros((0, 4), np.float32))
    assert entry == "none" and z.shape == (0, 4)


def test_broadcast_transposed_and_negative_strides():
    x, y = _rand((50, 1, 7), "float64"), _rand((1, 30, 7), "float64")
    z, entry = run_elementwise(SQD, x, y)
    assert entry == "strided"
    np.testing.assert_array_equal(z, (x - y) ** 2)
    a, b = _rand((64, 48), "float32"), _rand((48, 64), "float32")
    z, entry = run_elementwise(SQD, a.T, b)  # a transposed operand: the GPU's tiled entry
    assert entry == "tiled"
    np.testing.assert_array_equal(z, (a.T - b) * (a.T - b))
    c = _rand((40, 90), "float32")
    z, entry = run_elementwise(SQD, c[::-1, ::-2], c[:, :45])
    np.testing.assert_array_equal(z, (c[::-1, ::-2] - c[:, :45]) ** 2)
    out = np.zeros((90, 40), np.float32).T  # a given output that is not C-contiguous
    z, _ = run_elementwise(SQD, c, c[::-1], out)
    assert z is out
    np.testing.assert_array_equal(out, (c - c[::-1]) ** 2)


def test_runtime_rank_loop():
    base = _rand((3, 4, 5, 6, 7), "float32")
    x = base[:, ::2, :, ::-1, 1:]  # five dims that do not merge
    y = _rand((1, 2, 5, 1, 6), "float32")
    z, entry = run_elementwise(SQD, x, y)
    assert entry == "strided"
    np.testing.assert_array_equal(z, (x - y) * (x - y))


def test_64_bit_index_entries(monkeypatch):
    """The int64 entries (loops past 2**31 on the GPU), reached by lowering the planner's 32-bit limit."""
    import kspec.kernels.planning._plan as plan_module

    monkeypatch.setattr(plan_module, "INT32_LIMIT", 1000)
    x, y = _rand((40, 1, 30), "float64"), _rand((1, 25, 30), "float64")
    z, entry = run_elementwise(SQD, x, y)
    assert entry == "strided"
    np.testing.assert_array_equal(z, (x - y) ** 2)


def test_raw_parameter_and_index_from_spec():
    k = _spec_kernel("elementwise.toml", "add_reverse")
    x, y = _rand((1001,), "float64"), _rand((1001,), "float64")
    z, _ = run_elementwise(k, x, y)
    np.testing.assert_array_equal(z, x + y[::-1])
    yy = _rand((2002,), "float64")
    z, _ = run_elementwise(k, x[::-1], yy[::2])  # a reversed input and a raw view with a stride
    np.testing.assert_array_equal(z, x[::-1] + yy[::2][::-1])


def test_size_with_raw_arrays_only_and_scalars():
    k = kspec.ElementwiseKernel("raw T x, T s", "raw T y", "y[i] = x[_ind.size() - 1 - i] * s", "host_sized")
    x, y = _rand((50,), "float32"), np.zeros(50, np.float32)
    run_elementwise(k, x, np.float32(2.5), y, size=40)
    np.testing.assert_array_equal(y[:40], x[:40][::-1] * np.float32(2.5))
    assert not y[40:].any()
    saxpy = _spec_kernel("elementwise.toml", "saxpy")
    a, b = _rand((300,), "float64"), _rand((300,), "float64")
    out, _ = run_elementwise(saxpy, 3.0, a, b)
    _close(out, 3.0 * a + b)  # g++ contracts a * x + y into an fma, as NVRTC does by default


def test_clamp_spec_with_scalar_bounds():
    k = _spec_kernel("elementwise.toml", "clamp")
    for dtype in ("float32", "float64", "int32", "int64"):
        x = _rand((5000,), dtype)
        y, _ = run_elementwise(k, x, np.dtype(dtype).type(-10), np.dtype(dtype).type(10))
        np.testing.assert_array_equal(y, np.clip(x, -10, 10))


def test_several_outputs_loop_prep_and_in_place():
    k = kspec.ElementwiseKernel("T x", "T s, T p", "s = x + k3; p = x * x", "host_two", loop_prep="const T k3 = T(3)")
    x = _rand((257, 3), "float64")
    (s, p), _ = run_elementwise(k, x)
    np.testing.assert_array_equal(s, x + 3)
    np.testing.assert_array_equal(p, x * x)
    x2, y = _rand((10000,), "float32"), _rand((10000,), "float32")
    want = (x2 - y) ** 2
    run_elementwise(SQD, x2, y, x2)  # the output is the first input: element for element
    np.testing.assert_array_equal(x2, want)
    body = kspec.ElementwiseKernel("T x", "T z", "z = T(1); z = z + x", "host_alias")
    x3 = _rand((5000,), "float32")
    want = np.float32(1) + np.float32(1) + np.zeros_like(x3)  # z aliases x: x reads the 1 just written
    run_elementwise(body, x3, x3)
    np.testing.assert_array_equal(x3, want)
    x4 = _rand((5001,), "float32")
    shifted_in = x4[:-1].copy()
    run_elementwise(body, x4[:-1], x4[1:])  # overlapping, shifted: element by element, in order
    expected = np.empty(5000, np.float32)
    prev = None
    for j in range(5000):  # z[j] = 1 + x[j], where x[j] (j > 0) was rewritten as z[j - 1]
        prev = np.float32(1) + (shifted_in[0] if j == 0 else prev)
        expected[j] = prev
    np.testing.assert_array_equal(x4[1:], expected)


def test_fault_in_a_worker_comes_back_to_the_caller():
    k = kspec.ElementwiseKernel("T x", "T y", "if (i == 90000) kspec_host::fault_index(i, 3); y = x", "host_fault")
    x = _rand((100000,), "float32")
    with pytest.raises(kspec.KernelIndexError, match="index 90000 is out of bounds for size 3"):  # fault code 1
        run_elementwise(k, x, threads=2)


# -- reductions ----------------------------------------------------------------------------------------

SUM = kspec.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "host_sum")
MAX = kspec.ReductionKernel("T x", "T y", "x", "(a > b ? a : b)", "y = a", None, "host_max")


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 2), (1, 2), -1])
def test_sum_and_max_over_axes(dtype, axis):
    x = _rand((24, 33, 40), dtype)
    for kernel, ref in ((SUM, np.sum), (MAX, np.max)):
        got, _ = run_reduction(kernel, x, axis=axis)
        _close(got, ref(x, axis=axis).astype(dtype), dtype)
        got, _ = run_reduction(kernel, x, axis=axis, keepdims=True)
        want = ref(x, axis=axis, keepdims=True).astype(dtype)
        assert got.shape == want.shape
        _close(got, want, dtype)


def test_each_strategy_is_reached_and_right():
    cases = [
        (_rand((300000,), "float64"), None, "split"),
        (_rand((3, 70000), "float32"), 1, "split"),
        (_rand((2000, 300), "float64"), 0, "cols"),
        (_rand((2000, 300), "float64"), 1, "rows"),
        (_rand((9, 7, 60), "float64"), (0, 2), "rows"),  # two reduced dims that do not merge: one pass
        (_rand((9, 7, 64), "float64"), (0, 2), "slab"),  # ... C-contiguous, powers of two: the slab entry
        (_rand((3, 4, 5, 6, 2, 48), "float64"), (1, 3, 5), "inner"),  # three: two passes
        (_rand((40, 6, 30, 8), "float64"), (0, 2), "cols"),  # the innermost kept axis contiguous
        # ... with few outputs: 2 tiles split where the SMs hold 4 blocks of 16 warps (float64 sums: one per SM)
        (_rand((100, 2, 300, 16), "float64"), (0, 2), "cols split", 4),
        (_rand((64, 7, 9), "float64").transpose(2, 1, 0), (0, 2), "rows"),  # reduced dims of any stride
    ]
    for x, axis, kind, *sms in cases:
        for kernel, ref in ((SUM, np.sum), (MAX, np.max)):
            got, used = run_reduction(kernel, x, axis=axis, sm_count=sms[0] if sms else 2)
            assert used == kind, (x.shape, axis, used)
            _close(got, ref(x, axis=axis), str(x.dtype))


def test_spec_reductions_l2norm_sum_of_squares_argmax():
    l2 = _spec_kernel("reduction.toml", "l2norm")
    for dtype in ("float32", "float64"):
        x = _rand((40, 500), dtype)
        got, _ = run_reduction(l2, x, axis=1)
        _close(got, np.sqrt((x.astype(np.float64) ** 2).sum(axis=1)), dtype)
    sos = _spec_kernel("reduction.toml", "sum_of_squares")
    x = _rand((100000,), "float32")
    got, kind = run_reduction(sos, x, np.zeros((), np.float32))
    assert kind == "split"
    _close(got, (x.astype(np.float64) ** 2).sum(), "float32")
    argmax = _spec_kernel("reduction.toml", "argmax")
    for dtype in ("float32", "float64", "int32"):
        x = _rand((300, 50000), dtype) if dtype != "int32" else _rand((6, 50000), dtype)
        for axis in (None, 0, 1):
            (value, index), _ = run_reduction(argmax, x, axis=axis)
            np.testing.assert_array_equal(index, np.argmax(x, axis=axis))
            np.testing.assert_array_equal(value, np.max(x, axis=axis))


def test_map_with_row_index_scalars_raw_and_several_outputs():
    k = kspec.ReductionKernel("T x, T w, raw T v", "T s, T m", "x * w + v[_J]", "a + b", "s = a; m = a * 2", "0", "host_mix")
    x, v = _rand((6, 5, 30), "float64"), _rand((6, 5), "float64")
    (s, m), _ = run_reduction(k, x, 0.5, v, axis=(0, 1))  # raw parameters: the reduced axes lead
    want = (x * 0.5 + v[:, :, None]).sum(axis=(0, 1))  # _J: the flat index over the reduced (6, 5)
    _close(s, want)
    _close(m, want * 2)


def test_empty_reductions():
    got, _ = run_reduction(SUM, np.zeros((5, 0), np.float32), axis=1)
    np.testing.assert_array_equal(got, np.zeros(5, np.float32))
    got, kind = run_reduction(SUM, np.zeros((0, 5), np.float32), axis=1)
    assert kind == "none" and got.shape == (0,)


def test_threads_do_not_change_results():
    """Each output (or partial) is reduced by one worker in a fixed order: float sums are bit for bit the same
    for any number of threads."""
    x = _rand((123, 4567), "float64")
    for axis in (None, 0, 1):
        one, _ = run_reduction(SUM, x, axis=axis, threads=1)
        for threads in (2, 3, 4):
            np.testing.assert_array_equal(run_reduction(SUM, x, axis=axis, threads=threads)[0], one)


# -- timings (printed, never asserted) -------------------------------------------------------------------


def _best(fn, repeat: int = 5) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def test_print_timings_against_numpy():
    rows = []
    x, y = _rand((10**7,), "float32"), _rand((10**7,), "float32")
    z = np.empty_like(x)
    host_ew = _best(lambda: run_elementwise(SQD, x, y, z))
    rows.append(("(x-y)^2, 1e7 float32", host_ew, _best(lambda: (x - y) ** 2)))
    rows.append(("  the same vs NumPy with out=", host_ew,
                 _best(lambda: np.square(np.subtract(x, y, out=z), out=z))))
    m, v = _rand((10**4, 10**3), "float32"), _rand((10**3,), "float32")
    mz = np.empty_like(m)
    rows.append(("(m-v)^2 broadcast (1e4, 1e3)", _best(lambda: run_elementwise(SQD, m, v, mz)), _best(lambda: (m - v) ** 2)))
    for shape in ((10**4, 10**3), (1000, 10**4)):
        a = _rand(shape, "float32")
        out = np.empty(shape[0], np.float32)
        rows.append((f"sum axis=1 {shape} float32", _best(lambda a=a, out=out: run_reduction(SUM, a, out, axis=1)),
                     _best(lambda a=a: a.sum(axis=1))))
    a = _rand((10**4, 10**3), "float32")
    rows.append(("sum axis=0 (1e4, 1e3) float32", _best(lambda: run_reduction(SUM, a, axis=0)), _best(lambda: a.sum(axis=0))))
    b = _rand((10**7,), "float32")
    rows.append(("sum 1e7 float32 (split)", _best(lambda: run_reduction(SUM, b)), _best(lambda: b.sum())))
    print("\nhost loops vs NumPy (2 threads; host times include planning and framing in Python)")
    for what, host, ref in rows:
        print(f"  {what:34s} host {host * 1e3:8.2f} ms   numpy {ref * 1e3:8.2f} ms   ratio {host / ref:5.2f}")


# -- types from helper TYPES' host headers (skipped until they are in the tree) ---------------------------

def test_float16_kernels():
    sqd = _spec_kernel("elementwise.toml", "squared_diff_generic")
    x, y = _rand((3000,), "float16"), _rand((3000,), "float16")
    z, _ = run_elementwise(sqd, x, y)
    np.testing.assert_allclose(z.astype(np.float32), ((x - y) * (x - y)).astype(np.float32), rtol=2e-3, atol=2e-3)
    sos = _spec_kernel("reduction.toml", "sum_of_squares")
    a = _rand((20, 500), "float16")
    got, _ = run_reduction(sos, a, np.zeros(20, np.float32), axis=1)
    np.testing.assert_allclose(got, (a.astype(np.float32) ** 2).sum(axis=1), rtol=1e-4)


def test_complex_kernels():
    mag = _spec_kernel("elementwise.toml", "abs_squared")
    z = (_rand((1000,), "float64") + 1j * _rand((1000,), "float64")).astype(np.complex128)
    got, _ = run_elementwise(mag, z)
    _close(got, np.abs(z) ** 2)
    csum = kspec.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "host_csum")
    c = (_rand((30, 400), "float64") + 1j * _rand((30, 400), "float64")).astype(np.complex64)
    for axis in (None, 0, 1):
        got, _ = run_reduction(csum, c, axis=axis)
        np.testing.assert_allclose(got, c.sum(axis=axis), rtol=1e-4, atol=1e-3)


def test_spec_kernel_using_cuda_min_max():
    k = _spec_kernel("elementwise.toml", "clipped_relu")
    x = _rand((4000,), "float64")
    y, _ = run_elementwise(k, x, 0.5)
    np.testing.assert_array_equal(y, np.minimum(np.maximum(x, 0.0), 0.5))
