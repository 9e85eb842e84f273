"""The kernel calls the graph-capture tests capture, one table for every capture style (kspec.capture on the CPU
device and a GPU, CuPy's stream capture, torch.cuda.graph): tests/runtime_tests/test_capture_cpu.py, tests/capturer_tests/test_capture_gpu.py.

Each case makes its inputs (integer-valued float32: sums stay exact in float32 below 2**24, so a reduction's
order cannot change a result), builds the call on one array library (tests/helpers/device_arrays.py's ArrayLibrary)
and says what NumPy computes. :func:`check_case` runs the call eagerly once (warm: compiled and loaded), has
a capture style record it, replays and compares, then writes new input values in place and replays twice: a
graph reads its arrays' memory, so the new values give new results.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import kspec
from kspec import jit

F32 = np.float32

_add = kspec.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = x * 2 + y", "capture_add")
_sum = kspec.ReductionKernel("float32 x", "float32 y", "x", "a + b", "y = a", "0", "capture_sum")
_triple_raw = kspec.RawKernel(
    r'''extern "C" __global__ void capture_triple(const float* x, float* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = 3.0f * x[i];
    }''',
    "capture_triple",
)
_fused = kspec.fuse(lambda x, y: x * y + 1)
_fused_sum = kspec.fuse(lambda x, y: (x * y + 1).sum(axis=1))


@jit.rawkernel()
def _jit_saxpy(x, y, out, n):
    i = jit.grid(1)
    if i < n:
        out[i] = 2 * x[i] + y[i]


def _ints(rng: np.random.Generator, shape: tuple[int, ...], high: int = 4) -> np.ndarray:
    return rng.integers(0, high, size=shape).astype(F32)


@dataclass(frozen=True)
class Case:
    """``shapes``: the inputs'; ``build(lib, arrays)`` -> a call returning the result array; ``ref`` NumPy's."""

    name: str
    shapes: tuple[tuple[int, ...], ...]
    build: Callable[[Any, list[Any]], Callable[[], Any]]
    ref: Callable[..., np.ndarray]

    def inputs(self, rng: np.random.Generator) -> list[np.ndarray]:
        return [_ints(rng, shape) for shape in self.shapes]


def _out_given(lib: Any, a: list[Any]) -> Callable[[], Any]:
    out = lib.empty((300, 7), F32)
    return lambda: _add(a[0], a[1], out)


def _raw(lib: Any, a: list[Any]) -> Callable[[], Any]:
    out = lib.empty((1000,), F32)

    def call() -> Any:
        _triple_raw((8,), (128,), (a[0], out, np.int32(1000)))
        return out

    return call


def _jit(lib: Any, a: list[Any]) -> Callable[[], Any]:
    out = lib.empty((1000,), F32)

    def call() -> Any:
        _jit_saxpy[8, 128](a[0], a[1], out, np.int32(1000))
        return out

    return call


CASES = [
    Case("elementwise_out", ((300, 7), (300, 7)), _out_given, lambda x, y: x * 2 + y),
    Case("elementwise_alloc", ((300, 7), (7,)), lambda lib, a: lambda: _add(a[0], a[1]), lambda x, y: x * 2 + y),
    Case("reduction_full", ((64, 33),), lambda lib, a: lambda: _sum(a[0]), lambda x: x.sum()),
    Case("reduction_axis1", ((64, 33),), lambda lib, a: lambda: _sum(a[0], axis=1), lambda x: x.sum(axis=1)),
    # 2**22 elements: one long 1-d input, reduced in two passes (the "split" strategy, with a workspace)
    Case("reduction_split", ((1 << 22,),), lambda lib, a: lambda: _sum(a[0]), lambda x: x.sum()),
    # axes (1, 3) of a 4-d input: the two-pass "inner" strategy
    Case("reduction_4d_axes13", ((4, 96, 3, 512),), lambda lib, a: lambda: _sum(a[0], axis=(1, 3)),
         lambda x: x.sum(axis=(1, 3))),  # fmt: skip
    Case("fuse", ((300, 7), (300, 7)), lambda lib, a: lambda: _fused(a[0], a[1]), lambda x, y: x * y + 1),
    Case("fuse_sum_axis1", ((300, 7), (300, 7)), lambda lib, a: lambda: _fused_sum(a[0], a[1]),
         lambda x, y: (x * y + 1).sum(axis=1)),  # fmt: skip
    Case("jit_rawkernel", ((1000,), (1000,)), _jit, lambda x, y: 2 * x + y),
    Case("rawkernel", ((1000,),), _raw, lambda x: 3 * x),
]
CASE_IDS = [case.name for case in CASES]

# A capture style: capture(call, warm) -> (replay, result): runs ``warm()`` eagerly where its calls must go
# (the stream the capture will use), records ``call()``, and returns a function that replays the graph and
# waits for it, and the array ``call()`` returned while capturing.
CaptureStyle = Callable[[Callable[[], Any]], tuple[Callable[[], None], Any]]


def kspec_capture(call: Callable[[], Any]) -> tuple[Callable[[], None], Any]:
    """kspec's own capture style: warm on the stream, record with ``kspec.capture``, replay with ``launch()``."""
    stream = kspec.Stream(non_blocking=True)
    with stream:
        call()
    with kspec.capture(stream) as graph:
        result = call()

    def replay() -> None:
        graph.launch()
        stream.synchronize()

    return replay, result


def write(lib: Any, array: Any, host: np.ndarray) -> None:
    """Overwrite ``array``'s contents in place (its pointer stays), ordered before a later replay."""
    if lib.name == "numpy":
        array[...] = host
    elif lib.name == "cupy":
        array.set(host)
        lib.mod.cuda.Device().synchronize()
    elif lib.name == "torch":
        array.copy_(lib.mod.as_tensor(host))
        lib.mod.cuda.synchronize()
    else:
        kspec.get_device().synchronize()
        array.set(host)
        kspec.get_device().synchronize()


def host_of(lib: Any, array: Any) -> np.ndarray:
    return np.array(lib.get(array), copy=True)


def check_case(case: Case, lib: Any, capture: CaptureStyle) -> None:
    rng = np.random.default_rng(len(case.name))
    host = case.inputs(rng)
    arrays = [lib.asarray(h) for h in host]
    call = case.build(lib, arrays)
    replay, result = capture(call)  # runs call() once eagerly first, then records it
    eager = case.ref(*host)
    replay()
    np.testing.assert_array_equal(host_of(lib, result), eager, err_msg=f"{case.name}: first replay")
    new = case.inputs(rng)
    for array, values in zip(arrays, new):
        write(lib, array, values)
    replay()
    replay()
    np.testing.assert_array_equal(host_of(lib, result), case.ref(*new), err_msg=f"{case.name}: new inputs")


def many_small_calls(lib: Any) -> tuple[list[Any], Callable[[], Any], Callable[[list[np.ndarray]], np.ndarray]]:
    """100 dependent small calls (each reads the previous result): inputs, the call, and NumPy's result."""
    rng = np.random.default_rng(100)
    host = [_ints(rng, (4096,)), _ints(rng, (4096,), 2)]
    arrays = [lib.asarray(h) for h in host]
    out = [lib.empty((4096,), F32) for _ in range(2)]

    def call() -> Any:
        _add(arrays[0], arrays[1], out[0])
        for i in range(99):  # z = x * 2 + y, alternating buffers; values stay small integers (exact)
            _add(arrays[1], out[i % 2], out[(i + 1) % 2]) if i % 3 else _add(out[i % 2], arrays[1], out[(i + 1) % 2])
        return out[1]

    def ref(values: list[np.ndarray]) -> np.ndarray:
        z = [values[0] * 2 + values[1], None]
        for i in range(99):
            a, b = (values[1], z[i % 2]) if i % 3 else (z[i % 2], values[1])
            z[(i + 1) % 2] = a * 2 + b
        return z[1]

    return arrays, call, ref


def check_many_small_calls(lib: Any, capture: CaptureStyle) -> None:
    """The 100 calls of :func:`many_small_calls` captured: a replay gives NumPy's result, and a replay after
    the inputs change in place gives the new one."""
    arrays, call, ref = many_small_calls(lib)
    replay, result = capture(call)
    replay()
    host = [host_of(lib, a) for a in arrays]
    np.testing.assert_array_equal(host_of(lib, result), ref(host))
    new = [h + 1 for h in host]
    for array, values in zip(arrays, new):
        write(lib, array, values)
    replay()
    np.testing.assert_array_equal(host_of(lib, result), ref(new))


def captures_of_new_pointers(add: Any, n: int) -> tuple[Any, Any, Any, Any, Any, Any]:
    """``add(x, y, out)`` warmed on a new stream, then captured twice by kspec.capture: on (a, a) and on (b, b)
    (new pointers, the same kernel). Returns (graph, new_pointers, stream, a, b, out); a is 1s, b is 10s."""
    a, b = (kspec.asarray(np.full(n, v, np.float32)) for v in (1, 10))
    out = kspec.empty(n, np.float32)
    stream = kspec.Stream(non_blocking=True)
    with stream:
        add(a, a, out)
    with kspec.capture(stream) as graph:
        add(a, a, out)
    with kspec.capture(stream) as new_pointers:
        add(b, b, out)
    return graph, new_pointers, stream, a, b, out
