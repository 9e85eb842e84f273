"""kspec against CuPy, side by side, with the device-to-device copy bandwidth of the same run as the ceiling.

Run on the GPU machine::

    python3 benchmarks/bench.py [--out DIR] [--quick] [--only SUBSTR] [--list] [--log2n 28]

(``--list`` prints the case labels that ``--only`` matches; ``--log2n`` shrinks every case for a trial run.)

Every case builds ``kspec.ElementwiseKernel`` / ``kspec.ReductionKernel`` with exactly the arguments of the
matching ``cupy.ElementwiseKernel`` / ``cupy.ReductionKernel``, draws fresh random inputs (2**28 elements,
1-4 GB per case: several times the 60 MB L2, so repeated runs do not measure the cache), checks kspec's
result against CuPy's (outputs poisoned with NaN first, so an unwritten element fails), then times both.

Method (.library/device/METHOD.md):

* bandwidth ceiling: ``cudaMemcpyAsync`` device to device of 1 GiB, counting bytes read + bytes written;
  measured at the start and at the end of the run, the larger median is the ceiling;
* device time of one call: CUDA events (``cupy.cuda.Event``) recorded on the current stream around each call,
  after a warm-up that includes kspec's first call (compile and load); median of ``--reps`` calls, taken in
  two rounds that alternate kspec and CuPy so that drift of the machine lands on both;
* bandwidth of a kernel: bytes of every input read once + every output written once, over the median time;
* host cost per call: 1-element float32 arrays, loops of ``--host-calls`` calls, the device synchronised at
  the end of each loop (inside the timed region), the variants taking turns; median of 7 loops after warm-up.
  It includes cuda.core's ``launch()`` (the former ``benchmarks/host_cost.py`` is folded in here).

A failed check marks the case FAILED in the table; an exception marks it ERROR; neither stops the run.
Prints a table at the end (the device name and copy bandwidth at its top) and writes ``bench.json`` (all
numbers) and ``bench.png`` (needs matplotlib; skipped with a message without it) into ``--out`` (default:
``$OUT`` if set, else ``./bench_out``). Reference anchor for the ``cupy.sum`` (CUB) rows: about 4299 GB/s.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

LOG2N = 28  # every bandwidth case has 2**LOG2N elements (--log2n changes it, for a small trial run)
N = 1 << LOG2N
SIDE = 1 << (LOG2N // 2)  # (SIDE, SIDE) is N elements
COPY_BYTES = 1 << 30  # the copy ceiling's buffer (at most 4 N bytes)


def set_size(log2n: int) -> None:
    global LOG2N, N, SIDE, COPY_BYTES
    if log2n % 2 or not 12 <= log2n <= 30:
        raise SystemExit(f"--log2n must be even and in 12..30, got {log2n}")
    LOG2N, N, SIDE = log2n, 1 << log2n, 1 << (log2n // 2)
    COPY_BYTES = min(1 << 30, 4 * N)

# Targets: kspec's bandwidth as a fraction of the copy bandwidth.
TARGET_CONTIGUOUS = 0.90
TARGET_STRIDED = 0.75  # broadcast and transposed inputs
TARGET_REDUCTION = 0.85
# Host cost: kspec's microseconds per call <= CuPy's; with the output given, also <= this x cuda.core's.
TARGET_HOST_VS_CORE = 1.2

# Relative / absolute tolerance of kspec against CuPy, compared in float32 (float64 for float64).
# 16-bit floats: each of (x - y) and the product is rounded to 8 (bf16) or 11 (f16) bits, and the two
# libraries may round the difference differently (native 16-bit op against float then round).
ELEMENTWISE_TOL = {"float16": (2e-2, 1e-4), "bfloat16": (2e-2, 1e-4), "float32": (1e-5, 1e-6), "float64": (1e-12, 1e-14)}
# Float32 sums of up to 2**28 positive terms: both libraries sum in trees of different shape.
REDUCTION_TOL = (1e-3, 1e-5)

# Imported in main() (so that --help and --list work on a machine without a GPU): cupy, numpy, kspec.
cp: Any = None
np: Any = None
kspec: Any = None


# -- kernels: one definition, built by both libraries with the same arguments ----------------------------------

ELEMENTWISE_DEFS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "sqd": (("T x, T y", "T z", "z = (x - y) * (x - y)", "sqd"), {}),
    "fma3": (("T a, T b, T c", "T w", "w = a * b + c", "fma3"), {}),
    "axpy": (("float32 a, T x, T y", "T z", "z = a * x + y", "axpy"), {}),
    # the host-cost kernel: concrete types, no placeholder
    "sqd32": (("float32 x, float32 y", "float32 z", "z = (x - y) * (x - y)", "sqd32"), {}),
}
REDUCTION_DEFS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "ssq": (("T x", "T y", "x * x", "a + b", "y = a", "0", "ssq"), {}),
    "l2norm": (("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2norm"), {}),
    # float16 input, float32 accumulation and output
    "ssq16": (("T x", "float32 y", "float(x) * float(x)", "a + b", "y = a", "0", "ssq16"), {"reduce_type": "float"}),
}


class Kernels:
    """Each kernel pair (kspec, CuPy) built once, on first use, so that --only builds only what it runs."""

    def __init__(self) -> None:
        self._pairs: dict[str, tuple[Any, Any]] = {}

    def pair(self, name: str) -> tuple[Any, Any]:
        if name not in self._pairs:
            if name in ELEMENTWISE_DEFS:
                args, kwargs = ELEMENTWISE_DEFS[name]
                self._pairs[name] = (kspec.ElementwiseKernel(*args, **kwargs), cp.ElementwiseKernel(*args, **kwargs))
            else:
                args, kwargs = REDUCTION_DEFS[name]
                self._pairs[name] = (kspec.ReductionKernel(*args, **kwargs), cp.ReductionKernel(*args, **kwargs))
        return self._pairs[name]


KERNELS = Kernels()


# -- cases ---------------------------------------------------------------------------------------------------


@dataclass
class Check:
    ok: bool
    detail: str


@dataclass
class Built:
    """What a case's builder returns; the callables hold the case's arrays (freed when this is dropped)."""

    kspec_fn: Callable[[], object] | None  # one timed kspec call (None: no kspec row, e.g. cupy.sum)
    cupy_fn: Callable[[], object] | None  # one timed CuPy call (None: CuPy cannot, e.g. no bfloat16)
    nbytes: int  # every input read once + every output written once
    check: Callable[[], Check] | None  # runs kspec (first call: compiles) and compares it with CuPy
    note: str = ""


@dataclass
class Case:
    name: str
    dtype: str
    kind: str  # elementwise | strided | reduction | reference
    target: float | None  # kspec GB/s over copy GB/s
    build: Callable[[], Built]

    @property
    def label(self) -> str:
        return f"{self.name} [{self.dtype}]"


def np_dtype(name: str) -> Any:
    """The NumPy dtype of a name; bfloat16 through ml_dtypes (what CuPy 14 and kspec both use)."""
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def randn(shape: Any, dtype: str) -> Any:
    """Fresh standard-normal CuPy data in any float dtype (drawn in float32 for the 16-bit ones)."""
    dt = np_dtype(dtype)
    if dt in (np.float32, np.float64):
        return cp.random.standard_normal(shape, dtype=dt)
    return cp.random.standard_normal(shape, dtype=np.float32).astype(dt)


def poison(a: Any) -> None:
    """Fill an output with NaN (a CuPy array or a torch tensor), so an element nobody writes fails the check."""
    if hasattr(a, "fill_"):  # torch
        a.fill_(float("nan"))
        return
    try:
        a.fill(float("nan"))
    except Exception:  # a CuPy without NaN fill for bfloat16: write the bit pattern of a quiet NaN
        bits = {2: (np.uint16, 0x7FC0 if np.dtype(a.dtype).name == "bfloat16" else 0x7E00),
                4: (np.uint32, 0x7FC00000), 8: (np.uint64, 0x7FF8000000000000)}
        view_type, pattern = bits[np.dtype(a.dtype).itemsize]
        a.view(view_type).fill(pattern)


def compare(got: Any, ref: Any, rtol: float, atol: float) -> Check:
    """|got - ref| <= atol + rtol |ref| everywhere (NaN fails), on CuPy arrays, in float32 (float64 if ref is)."""
    if tuple(got.shape) != tuple(ref.shape):
        return Check(False, f"shape {tuple(got.shape)} != CuPy's {tuple(ref.shape)}")
    wide = np.float64 if np.dtype(ref.dtype) == np.float64 else np.float32
    g = got.astype(wide, copy=False)
    r = ref.astype(wide, copy=False)
    diff = cp.abs(g - r)
    bad = int(cp.count_nonzero(~(diff <= atol + rtol * cp.abs(r))))
    norm = float(cp.linalg.norm(r.ravel()))
    rel = float(cp.linalg.norm(diff.ravel())) / norm if norm else float(cp.max(diff))
    detail = f"{bad} of {g.size} outside tol, ||d||/||ref|| = {rel:.2e}" if bad else f"||d||/||ref|| = {rel:.2e}"
    return Check(bad == 0, detail)


def check_elementwise(kspec_call: Callable[[], object], z_kspec: Any, cupy_call: Callable[[], object], z_cupy: Any,
                      dtype: str) -> Check:
    """Poison both outputs, run both kernels, compare kspec's output with CuPy's."""
    poison(z_kspec)
    poison(z_cupy)
    kspec_call()
    cupy_call()
    return compare(z_kspec, z_cupy, *ELEMENTWISE_TOL[dtype])


def elementwise_builder(kernel: str, n_inputs: int, dtype: str, shapes: list[tuple[int, ...]] | None = None,
                        transpose_first: bool = False, scalar: float | None = None,
                        transpose_out: bool = False) -> Callable[[], Built]:
    """A builder for ``k([scalar,] *inputs, out)`` with preallocated outputs (one for each library).

    ``shapes`` gives each input's shape (default: all (N,)); the output has the broadcast shape.
    ``transpose_first`` passes the first input as ``a.T`` of a square array; ``transpose_out`` writes the
    output into a column-major array (``c.T`` of a C-contiguous one).
    """

    def build() -> Built:
        kk, ck = KERNELS.pair(kernel)
        in_shapes = shapes or [(N,)] * n_inputs
        inputs = [randn(s, dtype) for s in in_shapes]
        if transpose_first:
            inputs[0] = inputs[0].T
        out_shape = np.broadcast_shapes(*in_shapes)
        order = "F" if transpose_out else "C"
        zk = cp.empty(out_shape, dtype=inputs[0].dtype, order=order)
        zc = cp.empty(out_shape, dtype=inputs[0].dtype, order=order)
        head = () if scalar is None else (scalar,)
        kargs, cargs = (*head, *inputs, zk), (*head, *inputs, zc)
        kspec_fn = lambda: kk(*kargs)  # noqa: E731
        cupy_fn = lambda: ck(*cargs)  # noqa: E731
        nbytes = sum(a.nbytes for a in inputs) + zk.nbytes
        return Built(kspec_fn, cupy_fn, nbytes, lambda: check_elementwise(kspec_fn, zk, cupy_fn, zc, dtype))

    return build


def bfloat16_builder() -> Built:
    """(x - y)^2 in bfloat16: on CuPy arrays where CuPy 14 takes bfloat16 (ml_dtypes), else on torch tensors
    with CuPy n/a."""
    kk, ck = KERNELS.pair("sqd")
    reason = ""
    try:
        probe = randn(1024, "bfloat16")  # a small probe first: a failing compile costs no 2**28 arrays
        probe_out = cp.empty_like(probe)
        ck(probe, probe, probe_out)
        cp.cuda.Device().synchronize()
        del probe, probe_out
    except Exception as exc:  # no ml_dtypes, or CuPy without bfloat16 kernels
        reason = f"CuPy n/a ({type(exc).__name__}: {str(exc).splitlines()[0][:80] if str(exc) else ''})"
    if not reason:
        return elementwise_builder("sqd", 2, "bfloat16")()

    try:
        import torch  # CuPy cannot: PyTorch holds the bfloat16 arrays
    except ImportError as exc:
        raise RuntimeError(f"{reason}, and no PyTorch to hold bfloat16 arrays ({exc})") from None

    x = torch.randn(N, dtype=torch.bfloat16, device="cuda")
    y = torch.randn(N, dtype=torch.bfloat16, device="cuda")
    z = torch.empty_like(x)
    kspec_fn = lambda: kk(x, y, z)  # noqa: E731

    def check() -> Check:
        poison(z)
        kspec_fn()
        ref = (x.float() - y.float()) ** 2  # float32 reference from the same bfloat16 inputs
        return compare(cp.from_dlpack(z.float()), cp.from_dlpack(ref), *ELEMENTWISE_TOL["bfloat16"])

    return Built(kspec_fn, None, 3 * N * 2, check, note=reason + "; kspec on torch tensors")


def reduction_builder(kernel: str, shape: tuple[int, ...], axis: Any, dtype: str) -> Callable[[], Built]:
    """A builder for ``k(x, axis=axis)`` (outputs allocated by each library, as in ordinary use)."""

    def build() -> Built:
        kk, ck = KERNELS.pair(kernel)
        x = randn(shape, dtype)
        out_elems = _out_elems(shape, axis)
        nbytes = x.nbytes + out_elems * 4  # all three reduction kernels write float32 here
        kspec_fn = lambda: kk(x, axis=axis)  # noqa: E731
        cupy_fn = lambda: ck(x, axis=axis)  # noqa: E731

        def check() -> Check:
            ref = cupy_fn()
            out = cp.empty_like(ref)
            poison(out)
            note = ""
            try:
                got = kk(x, out=out, axis=axis)
            except Exception as exc:  # out= refused: compare the allocating call, say so
                note = f" (kspec out= raised {type(exc).__name__}: {exc}; compared the allocating call)"
                got = kspec_fn()
            result = compare(got, ref, *REDUCTION_TOL)
            result.detail += note
            return result

        return Built(kspec_fn, cupy_fn, nbytes, check)

    return build


FUSED: dict[str, tuple[Any, Any]] = {}  # name -> (kspec.fuse, cupy.fuse) of the same function


def fused_pair(name: str) -> tuple[Any, Any]:
    """The same Python function under ``kspec.fuse`` and ``cupy.fuse`` (built once)."""
    if name not in FUSED:
        fns = {
            "sqd": lambda x, y: (x - y) ** 2,
            "ssq_rows": lambda x, y: cp.sum((x - y) ** 2, axis=1),
        }
        fn = fns[name]
        FUSED[name] = (kspec.fuse(kernel_name=f"bench_{name}")(fn), cp.fuse(kernel_name=f"bench_{name}")(fn))
    return FUSED[name]


def fuse_builder(name: str, shape: tuple[int, ...], out_elems: int) -> Callable[[], Built]:
    """``f(x, y)`` of a fused function (outputs allocated by each library, as fused functions always do)."""

    def build() -> Built:
        kf, cf = fused_pair(name)
        x, y = randn(shape, "float32"), randn(shape, "float32")
        kspec_fn = lambda: kf(x, y)  # noqa: E731
        cupy_fn = lambda: cf(x, y)  # noqa: E731
        tol = ELEMENTWISE_TOL["float32"] if out_elems == math.prod(shape) else REDUCTION_TOL
        return Built(kspec_fn, cupy_fn, x.nbytes + y.nbytes + out_elems * 4,
                     lambda: compare(kspec_fn(), cupy_fn(), *tol))

    return build


JIT: dict[str, Any] = {}  # "kspec" / "cupyx" -> the module of benchmarks/_jit_kernels.py for that library


def jit_kernels(lib: str) -> Any:
    if lib not in JIT:
        import tempfile

        sys.path.insert(0, str(REPO / "benchmarks"))
        import _jit_kernels

        JIT[lib] = _jit_kernels.load(lib, tempfile.mkdtemp(prefix="kspec-bench-jit-"))
    return JIT[lib]


def jit_builder(name: str) -> Callable[[], Built]:
    """The seed's grid-stride copy, or a saxpy, as ``kspec.jit`` and ``cupyx.jit`` kernels of the same source,
    launched alike (64 blocks of 256 threads per SM: 8 waves of resident blocks)."""

    def build() -> Built:
        kk = jit_kernels("kspec").fresh(getattr(jit_kernels("kspec"), name))
        ck = jit_kernels("cupyx").fresh(getattr(jit_kernels("cupyx"), name))
        grid, block = (cp.cuda.Device().attributes["MultiProcessorCount"] * 64,), (256,)
        x, y = randn((N,), "float32"), randn((N,), "float32")
        zk, zc = cp.empty_like(x), cp.empty_like(x)
        head = (np.float32(2.5),) if name == "saxpy" else ()
        ins = (x, y) if name == "saxpy" else (x,)
        kspec_fn = lambda: kk(grid, block, (*head, *ins, zk, np.uint32(N)))  # noqa: E731
        cupy_fn = lambda: ck(grid, block, (*head, *ins, zc, np.uint32(N)))  # noqa: E731
        return Built(kspec_fn, cupy_fn, (len(ins) + 1) * x.nbytes,
                     lambda: check_elementwise(kspec_fn, zk, cupy_fn, zc, "float32"))

    return build


def cupy_sum_builder(shape: tuple[int, ...], axis: Any) -> Callable[[], Built]:
    """Reference: plain ``cupy.sum`` (CUB where CuPy's reduction accelerators include it); no kspec row."""

    def build() -> Built:
        x = randn(shape, "float32")
        return Built(None, lambda: cp.sum(x, axis=axis), x.nbytes + _out_elems(shape, axis) * 4, None,
                     note=f"reduction accelerators: {_accelerators()}")

    return build


def _out_elems(shape: tuple[int, ...], axis: Any) -> int:
    if axis is None:
        return 1
    axes = {a % len(shape) for a in (axis if isinstance(axis, tuple) else (axis,))}
    return math.prod(d for i, d in enumerate(shape) if i not in axes)


def _accelerators() -> str:
    try:
        from cupy._core import _accelerator

        names = {1: "cub", 2: "cutensor", 3: "cutensornet"}
        return ",".join(names.get(a, str(a)) for a in _accelerator.get_reduction_accelerators()) or "none"
    except Exception:
        return f"unknown (CUPY_ACCELERATORS={os.environ.get('CUPY_ACCELERATORS', 'unset')})"


def all_cases() -> list[Case]:
    k, h = LOG2N, LOG2N // 2
    full, square = f"2^{k}", f"(2^{h},2^{h})"
    cases: list[Case] = []
    # contiguous elementwise
    for dtype in ("float16", "bfloat16", "float32", "float64"):
        build = bfloat16_builder if dtype == "bfloat16" else elementwise_builder("sqd", 2, dtype)
        cases.append(Case(f"sqd (x-y)^2, {full}", dtype, "elementwise", TARGET_CONTIGUOUS, build))
    cases.append(Case(f"fma w=a*b+c, {full}", "float32", "elementwise", TARGET_CONTIGUOUS,
                      elementwise_builder("fma3", 3, "float32")))
    cases.append(Case(f"scalar z=a*x+y (a=2.0), {full}", "float32", "elementwise", TARGET_CONTIGUOUS,
                      elementwise_builder("axpy", 2, "float32", scalar=2.0)))
    # strided elementwise
    cases.append(Case(f"sqd broadcast {square}-(2^{h},)", "float32", "strided", TARGET_STRIDED,
                      elementwise_builder("sqd", 2, "float32", shapes=[(SIDE, SIDE), (SIDE,)])))
    cases.append(Case(f"sqd transposed x=a.T {square}", "float32", "strided", TARGET_STRIDED,
                      elementwise_builder("sqd", 2, "float32", shapes=[(SIDE, SIDE), (SIDE, SIDE)], transpose_first=True)))
    cases.append(Case(f"sqd transposed out z=c.T {square}", "float32", "strided", TARGET_STRIDED,
                      elementwise_builder("sqd", 2, "float32", shapes=[(SIDE, SIDE), (SIDE, SIDE)], transpose_out=True)))
    # reductions: each shape with the sum of squares and the L2 norm (at 2**28: (2^24,16), (2^18,1000),
    # (64,256,64,256))
    a, b = 1 << (h // 2 - 1), 1 << (h - h // 2 + 1)
    shapes: list[tuple[str, tuple[int, ...], Any]] = [
        (f"full {full}", (N,), None),
        (f"axis=1 {square}", (SIDE, SIDE), 1),
        (f"axis=0 {square}", (SIDE, SIDE), 0),
        (f"rows of 16 (2^{k - 4},16)", (N >> 4, 16), 1),
        (f"rows of 1000 (2^{k - 10},1000)", (N >> 10, 1000), 1),
        (f"axes=(1,3) ({a},{b},{a},{b})", (a, b, a, b), (1, 3)),
    ]
    for desc, shape, axis in shapes:
        for kernel in ("ssq", "l2norm"):
            cases.append(Case(f"{kernel} {desc}", "float32", "reduction", TARGET_REDUCTION,
                              reduction_builder(kernel, shape, axis, "float32")))
    for desc, shape, axis in shapes[:2]:
        cases.append(Case(f"ssq16 {desc}", "float16->f32", "reduction", TARGET_REDUCTION,
                          reduction_builder("ssq16", shape, axis, "float16")))
    # kspec.fuse against cupy.fuse, the same Python function
    cases.append(Case(f"fuse (x-y)**2, {full}", "float32", "elementwise", TARGET_CONTIGUOUS,
                      fuse_builder("sqd", (N,), N)))
    cases.append(Case(f"fuse sum((x-y)**2, axis=1) {square}", "float32", "reduction", TARGET_REDUCTION,
                      fuse_builder("ssq_rows", (SIDE, SIDE), SIDE)))
    # kspec.jit against cupyx.jit, the same Python source
    cases.append(Case(f"jit grid-stride copy, {full}", "float32", "elementwise", TARGET_CONTIGUOUS, jit_builder("copy")))
    cases.append(Case(f"jit saxpy, {full}", "float32", "elementwise", TARGET_CONTIGUOUS, jit_builder("saxpy")))
    # references: plain cupy.sum, CuPy's own best reduction
    for desc, shape, axis in shapes[:2]:
        cases.append(Case(f"cupy.sum (CUB ref) {desc}", "float32", "reference", None, cupy_sum_builder(shape, axis)))
    return cases


# -- timing --------------------------------------------------------------------------------------------------


def time_cuda(fn: Callable[[], object], warmup: int, reps: int) -> list[float]:
    """Milliseconds of each of ``reps`` calls of ``fn``, from CUDA events recorded around each call on the
    current stream, after ``warmup`` untimed calls. kspec and CuPy launch on CuPy's current stream (for CuPy
    arrays) and PyTorch's (for torch tensors); both are the legacy default stream unless a script changes them."""
    for _ in range(warmup):
        fn()
    cp.cuda.Device().synchronize()
    stream = cp.cuda.get_current_stream()
    starts = [cp.cuda.Event() for _ in range(reps)]
    ends = [cp.cuda.Event() for _ in range(reps)]
    for start, end in zip(starts, ends):
        start.record(stream)
        fn()
        end.record(stream)
    ends[-1].synchronize()
    cp.cuda.Device().synchronize()
    return [cp.cuda.get_elapsed_time(s, e) for s, e in zip(starts, ends)]


def time_libraries(fns: dict[str, Callable[[], object] | None], warmup: int, reps: int,
                   rounds: int = 2) -> tuple[dict[str, list[float]], dict[str, str]]:
    """Samples (ms) of each library's call, in ``rounds`` rounds that alternate the libraries (kspec, CuPy,
    kspec, CuPy), so that drift of the machine lands on both alike; ``warmup`` calls before the first round,
    one before each later one. A library whose call raises is dropped (its error returned), the others go on."""
    samples: dict[str, list[float]] = {lib: [] for lib, fn in fns.items() if fn is not None}
    errors: dict[str, str] = {}
    per_round = max(1, -(-reps // rounds))  # rounded up: --quick (5) gives 2 x 3
    for r in range(rounds):
        for lib, fn in fns.items():
            if fn is None or lib in errors:
                continue
            try:
                samples[lib] += time_cuda(fn, warmup if r == 0 else 1, per_round)
            except Exception as exc:
                errors[lib] = _short(exc)
    return samples, errors


def stats(samples: list[float], nbytes: int) -> dict[str, Any] | None:
    if not samples:
        return None
    med = statistics.median(samples)
    return {"median_ms": med, "min_ms": min(samples), "max_ms": max(samples), "n": len(samples),
            "gbps": nbytes / (med * 1e-3) / 1e9, "samples_ms": samples}


def measure_copy(warmup: int, reps: int) -> dict[str, Any]:
    """Device-to-device cudaMemcpyAsync of COPY_BYTES; bandwidth counts bytes read + bytes written."""
    src = cp.random.standard_normal(COPY_BYTES // 4, dtype=np.float32)
    dst = cp.empty_like(src)
    stream_ptr = cp.cuda.get_current_stream().ptr
    kind = cp.cuda.runtime.memcpyDeviceToDevice

    def copy() -> None:
        cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, COPY_BYTES, kind, stream_ptr)

    samples = time_cuda(copy, warmup, reps)
    ok = bool(cp.array_equal(src, dst))
    result = stats(samples, 2 * COPY_BYTES)
    assert result is not None
    result["copy_correct"] = ok
    return result


def release() -> None:
    """Give the memory of the finished case back (CuPy's pool, PyTorch's cache)."""
    cp.cuda.Device().synchronize()
    cp.get_default_memory_pool().free_all_blocks()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


# -- running the cases ---------------------------------------------------------------------------------------


@dataclass
class Result:
    case: Case
    nbytes: int = 0
    kspec: dict[str, Any] | None = None
    cupy: dict[str, Any] | None = None
    check: Check | None = None
    errors: list[str] = field(default_factory=list)
    note: str = ""

    def ratio(self, which: str, copy_gbps: float) -> float | None:
        s = self.kspec if which == "kspec" else self.cupy
        return s["gbps"] / copy_gbps if s else None

    @property
    def kspec_over_cupy(self) -> float | None:
        return self.kspec["gbps"] / self.cupy["gbps"] if self.kspec and self.cupy else None

    def verdict(self, copy_gbps: float) -> str:
        """FAILED (kspec differs from CuPy), ERROR (an exception kept a number or the check from us),
        '-' (no target), else yes / no against the target."""
        if self.check is not None and not self.check.ok:
            return "FAILED"
        if self.case.kind == "reference":
            return "-" if self.cupy is not None else "ERROR"
        if self.kspec is None or self.check is None:
            return "ERROR"
        ratio = self.ratio("kspec", copy_gbps)
        if self.case.target is None or ratio is None:
            return "-"
        return "yes" if ratio >= self.case.target else "no"


def run_case(case: Case, warmup: int, reps: int) -> Result:
    """Build, check, time; then free the case's memory. Exceptions are recorded, never raised."""
    result = Result(case)
    _build_check_time(result, warmup, reps)  # the case's arrays live only inside this call
    try:
        release()
    except Exception as exc:
        result.errors.append(f"release: {_short(exc)}")
    return result


def _build_check_time(result: Result, warmup: int, reps: int) -> None:
    try:
        built = result.case.build()
    except Exception as exc:
        result.errors.append(f"build: {_short(exc)}")
        return
    result.nbytes, result.note = built.nbytes, built.note
    if built.check is not None:
        try:
            result.check = built.check()  # kspec's first call (compile, load) happens here, untimed
        except Exception as exc:
            result.errors.append(f"check: {_short(exc)}")
    samples, errors = time_libraries({"kspec": built.kspec_fn, "cupy": built.cupy_fn}, warmup, reps)
    result.errors += [f"time {lib}: {text}" for lib, text in errors.items()]
    # a library that raised while timed gets no number (its row then says ERROR or n/a)
    result.kspec = None if "kspec" in errors else stats(samples.get("kspec", []), built.nbytes)
    result.cupy = None if "cupy" in errors else stats(samples.get("cupy", []), built.nbytes)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200] if text else ''}"


# -- host cost per call --------------------------------------------------------------------------------------

CORE_SOURCE = r"""
extern "C" __global__ void sqd(const float* x, const float* y, float* z, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float d = x[i] - y[i]; z[i] = d * d; }
}
"""

HOST_ROWS = ("elementwise, out given", "elementwise, allocating", "elementwise, Python scalar", "reduction",
             "fuse (x-y)**2, allocating", "jit copy launch, k(grid, block, args)")


def core_launcher(x: Any, y: Any, z: Any) -> tuple[Callable[[], object] | None, str]:
    """cuda.core's launch() of an equivalent trivial kernel on the legacy default stream (CuPy's null stream);
    (None, why) when cuda.core is missing or its API differs."""
    try:
        try:
            from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
        except ImportError:
            from cuda.core.experimental import Device, LaunchConfig, Program, ProgramOptions, launch
        dev = Device(cp.cuda.Device().id)
        dev.set_current()
        program = Program(CORE_SOURCE, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}"))
        kernel = program.compile("cubin").get_kernel("sqd")
        stream = dev.default_stream  # the legacy default stream, as CuPy's null stream
        config = LaunchConfig(grid=1, block=32)
        args = (x.data.ptr, y.data.ptr, z.data.ptr, np.int64(1))

        def call() -> None:
            launch(stream, config, kernel, *args)

        poison(z)
        call()
        cp.cuda.Device().synchronize()
        if not bool(cp.allclose(z, (x - y) * (x - y))):
            return None, "cuda.core kernel gave a wrong result"
        return call, ""
    except Exception as exc:
        return None, f"cuda.core unavailable: {_short(exc)}"


def measure_host(variants: dict[str, Callable[[], object]], calls: int, batches: int = 7) -> dict[str, list[float]]:
    """Microseconds per call of each variant: ``calls`` calls then a device synchronise, timed together;
    ``batches`` times, the variants taking turns (so drift of the host lands on all of them alike)."""
    sync = cp.cuda.Device().synchronize
    for fn in variants.values():
        for _ in range(min(calls, 2000)):  # warm-up: compile, load, prepare the call
            fn()
    sync()
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(batches):
        for name, fn in variants.items():
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            sync()
            samples[name].append((time.perf_counter() - start) / calls * 1e6)
    return samples


def run_host_cost(calls: int, only: str | None) -> dict[str, Any]:
    rows = [r for r in HOST_ROWS if _selected(f"host cost: {r}", only)]
    if not rows:
        return {"rows": [], "calls": calls, "notes": []}
    x = cp.random.standard_normal(1, dtype=np.float32)
    y = cp.random.standard_normal(1, dtype=np.float32)
    z = cp.empty(1, dtype=np.float32)
    kk, ck = KERNELS.pair("sqd32")
    kr, cr = KERNELS.pair("ssq")
    kf, cf = fused_pair("sqd")
    kj, cj = (jit_kernels(lib).fresh(jit_kernels(lib).copy) for lib in ("kspec", "cupyx"))
    one = np.uint32(1)
    calls_of = {
        "elementwise, out given": (lambda: kk(x, y, z), lambda: ck(x, y, z)),
        "elementwise, allocating": (lambda: kk(x, y), lambda: ck(x, y)),
        "elementwise, Python scalar": (lambda: kk(x, 2.0, z), lambda: ck(x, 2.0, z)),
        "reduction": (lambda: kr(x), lambda: cr(x)),
        "fuse (x-y)**2, allocating": (lambda: kf(x, y), lambda: cf(x, y)),
        "jit copy launch, k(grid, block, args)": (lambda: kj((1,), (32,), (x, z, one)), lambda: cj((1,), (32,), (x, z, one))),
    }
    variants: dict[str, Callable[[], object]] = {}
    notes: list[str] = []
    for row in rows:
        for lib, fn in zip(("kspec", "cupy"), calls_of[row]):
            try:
                fn()
                cp.cuda.Device().synchronize()
                variants[f"{row}|{lib}"] = fn
            except Exception as exc:
                notes.append(f"{row} ({lib}): {_short(exc)}")
    if "elementwise, out given" in rows:
        core_z = cp.empty(1, dtype=np.float32)
        core, why = core_launcher(x, y, core_z)
        if core is not None:
            variants["elementwise, out given|core"] = core
        else:
            notes.append(why)
    samples = measure_host(variants, calls)
    out_rows = []
    for row in rows:
        med = {lib: statistics.median(samples[f"{row}|{lib}"]) if f"{row}|{lib}" in samples else None
               for lib in ("kspec", "cupy", "core")}
        k, c, core_us = med["kspec"], med["cupy"], med["core"]
        met: bool | None = None
        if k is not None and c is not None:
            met = k <= c
            if core_us is not None:
                met = met and k <= TARGET_HOST_VS_CORE * core_us
        target = "<= CuPy" + (f", <= {TARGET_HOST_VS_CORE} x cuda.core" if row == "elementwise, out given" else "")
        out_rows.append({
            "call": row, "kspec_us": k, "cupy_us": c, "core_us": core_us,
            "kspec_over_cupy": k / c if k is not None and c else None,
            "kspec_over_core": k / core_us if k is not None and core_us else None,
            "target": target, "met": met,
            "batches_us": {lib: samples.get(f"{row}|{lib}") for lib in ("kspec", "cupy", "core")},
        })
    return {"rows": out_rows, "calls": calls, "batches": 7, "notes": notes}


# -- output --------------------------------------------------------------------------------------------------


def _f(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def _gbps(s: dict[str, Any] | None) -> float | None:
    return None if s is None else float(s["gbps"])


def print_tables(info: dict[str, Any], results: list[Result], host: dict[str, Any]) -> None:
    copy_gbps = info["copy_gbps"]
    print()
    print(f"device: {info['device']} (sm_{info['arch']}), CuPy {info['versions'].get('cupy')}, "
          f"kspec {info['versions'].get('kspec')}")
    print(f"copy ceiling (cudaMemcpyAsync D2D, {COPY_BYTES / 2**20:g} MiB, read+write): {copy_gbps:.0f} GB/s "
          f"(start {info['copy_start']['gbps']:.0f}, end {info['copy_end']['gbps']:.0f})")
    if not (info["copy_start"]["copy_correct"] and info["copy_end"]["copy_correct"]):
        print("WARNING: the copy's destination differs from its source: the ceiling is suspect")
    print(f"median of {info['settings']['reps']} timed calls each (CUDA events), warm-up {info['settings']['warmup']}; "
          f"GB/s = (inputs read once + outputs written once) / median; kspec/CuPy > 1: kspec faster; "
          f"CuPy reduction accelerators: {info['reduction_accelerators']}")
    header = (f"{'case':40s} {'dtype':13s} {'kspec GB/s':>10s} {'CuPy GB/s':>10s} {'kspec/copy':>10s} "
              f"{'CuPy/copy':>9s} {'kspec/CuPy':>10s} {'target':>6s} {'met?':>6s}")
    print(header)
    print("-" * len(header))
    for r in results:
        k, c = r.kspec, r.cupy
        print(f"{r.case.name:40s} {r.case.dtype:13s} {_f(_gbps(k), '10.0f'):>10s} {_f(_gbps(c), '10.0f'):>10s} "
              f"{_f(r.ratio('kspec', copy_gbps), '10.3f'):>10s} {_f(r.ratio('cupy', copy_gbps), '9.3f'):>9s} "
              f"{_f(r.kspec_over_cupy, '10.2f'):>10s} {_f(r.case.target, '6.2f'):>6s} {r.verdict(copy_gbps):>6s}")
    # below the table: why a row FAILED or says ERROR / n/a
    for r in results:
        remarks = [f"error: {e}" for e in r.errors]
        if r.check is not None and not r.check.ok:
            remarks.insert(0, f"check FAILED: {r.check.detail}")
        if r.note and r.case.kind != "reference":
            remarks.append(r.note)
        for text in remarks:
            print(f"  {r.case.label}: {text}")
    if host["rows"]:
        print()
        print(f"host cost per call, 1-element float32 arrays: median of {host['batches']} loops of {host['calls']} calls")
        header = (f"{'call':28s} {'kspec us':>9s} {'CuPy us':>9s} {'cuda.core us':>12s} {'kspec/CuPy':>10s} "
                  f"{'kspec/core':>10s} {'target':>34s} {'met?':>5s}")
        print(header)
        print("-" * len(header))
        for row in host["rows"]:
            met = "n/a" if row["met"] is None else ("yes" if row["met"] else "no")
            print(f"{row['call']:28s} {_f(row['kspec_us'], '9.2f'):>9s} {_f(row['cupy_us'], '9.2f'):>9s} "
                  f"{_f(row['core_us'], '12.2f'):>12s} {_f(row['kspec_over_cupy'], '10.2f'):>10s} "
                  f"{_f(row['kspec_over_core'], '10.2f'):>10s} {row['target']:>34s} {met:>5s}")
        for note in host["notes"]:
            print(f"  {note}")


def write_json(path: Path, info: dict[str, Any], results: list[Result], host: dict[str, Any]) -> None:
    copy_gbps = info["copy_gbps"]
    cases = []
    for r in results:
        cases.append({
            "label": r.case.label, "name": r.case.name, "dtype": r.case.dtype, "kind": r.case.kind,
            "target": r.case.target, "bytes": r.nbytes, "kspec": r.kspec, "cupy": r.cupy,
            "kspec_over_copy": r.ratio("kspec", copy_gbps), "cupy_over_copy": r.ratio("cupy", copy_gbps),
            "kspec_over_cupy": r.kspec_over_cupy, "met": r.verdict(copy_gbps),
            "check": None if r.check is None else {"ok": r.check.ok, "detail": r.check.detail},
            "errors": r.errors, "note": r.note,
        })
    path.write_text(json.dumps({**info, "cases": cases, "host_cost": host}, indent=1, default=float))


def write_png(path: Path, results: list[Result], copy_gbps: float, device: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: bench.png skipped")
        return
    rows = [r for r in results if r.kspec or r.cupy]
    if not rows:
        return
    xs = list(range(len(rows)))
    kvals = [r.ratio("kspec", copy_gbps) or 0.0 for r in rows]
    cvals = [r.ratio("cupy", copy_gbps) or 0.0 for r in rows]
    width = 0.38
    fig, ax = plt.subplots(figsize=(max(10.0, 0.55 * len(rows) + 3), 6.5))
    ax.bar([x - width / 2 for x in xs], kvals, width, label="kspec / copy", color="#1f77b4")
    ax.bar([x + width / 2 for x in xs], cvals, width, label="CuPy / copy", color="#ff7f0e")
    ax.axhline(1.0, color="black", linewidth=1, label=f"copy ({copy_gbps:.0f} GB/s)")
    labelled = False
    for i, r in enumerate(rows):
        if r.case.target is not None:  # the target as a dashed segment over the case's two bars
            ax.hlines(r.case.target, i - 0.45, i + 0.45, colors="red", linestyles="--", linewidth=1.2,
                      label=None if labelled else "kspec target")
            labelled = True
        verdict = r.verdict(copy_gbps)
        if verdict in ("FAILED", "ERROR"):
            ax.text(i, 0.05, verdict, rotation=90, ha="center", va="bottom", color="red", fontsize=8)
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{r.case.name} [{r.case.dtype}]" for r in rows], rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("bandwidth / copy bandwidth")
    ax.set_ylim(0, max(1.15, max(kvals + cvals) * 1.08))
    ax.set_title(f"kspec and CuPy against the device-to-device copy, {device}")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def versions() -> dict[str, Any]:
    from importlib import metadata

    out: dict[str, Any] = {"python": platform.python_version(), "numpy": np.__version__, "cupy": cp.__version__,
                           "kspec": getattr(kspec, "__version__", None)}
    for dist in ("cuda-core", "cuda-bindings", "ml_dtypes", "torch", "matplotlib"):
        try:
            out[dist] = metadata.version(dist)
        except Exception:
            out[dist] = None
    try:
        out["cuda_runtime"] = cp.cuda.runtime.runtimeGetVersion()
        out["cuda_driver"] = cp.cuda.runtime.driverGetVersion()
    except Exception:
        pass
    return out


# -- main ----------------------------------------------------------------------------------------------------


def _selected(label: str, only: list[str] | None) -> bool:
    return not only or any(o.lower() in label.lower() for o in only)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_out = os.environ.get("OUT") or "bench_out"
    parser.add_argument("--out", default=default_out, help=f"folder for bench.json and bench.png (default: {default_out})")
    parser.add_argument("--quick", action="store_true", help="5 timed calls per case, 2000 calls per host-cost loop")
    parser.add_argument("--only", metavar="SUBSTR", action="append", help="run only the cases whose label holds "
                        "SUBSTR (case-insensitive; repeat it for several; 'host' selects the host-cost rows); the "
                        "copy ceiling always runs")
    parser.add_argument("--list", action="store_true", help="print the case labels and exit (needs no GPU)")
    parser.add_argument("--reps", type=int, help="timed calls per library and case (default 40, --quick 5)")
    parser.add_argument("--warmup", type=int, help="untimed calls first (default 5, --quick 2)")
    parser.add_argument("--host-calls", type=int, help="calls per host-cost loop (default 20000, --quick 2000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of cupy.random (every case still draws fresh data)")
    parser.add_argument("--log2n", type=int, default=28, help="elements per case as a power of two (default 28; "
                        "smaller for a trial run: the L2 then holds more of the data)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    set_size(opts.log2n)
    cases = [c for c in all_cases() if _selected(c.label, opts.only)]
    if opts.list:
        for c in all_cases():
            print(c.label)
        for row in HOST_ROWS:
            print(f"host cost: {row}")
        return 0
    reps = opts.reps or (5 if opts.quick else 40)
    warmup = opts.warmup if opts.warmup is not None else (2 if opts.quick else 5)
    host_calls = opts.host_calls or (2000 if opts.quick else 20000)

    global cp, np, kspec
    import cupy
    import numpy

    sys.path.insert(0, str(REPO))  # the working tree's kspec, installed or not
    import kspec as kspec_module

    cp, np, kspec = cupy, numpy, kspec_module
    out_dir = Path(opts.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    wall = time.perf_counter()

    cp.random.seed(opts.seed)
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    info: dict[str, Any] = {
        "device": name, "arch": f"{props['major']}{props['minor']}", "sm_count": props.get("multiProcessorCount"),
        "l2_bytes": props.get("l2CacheSize"), "versions": versions(),
        "settings": {"reps": reps, "warmup": warmup, "host_calls": host_calls, "quick": opts.quick, "only": opts.only,
                     "elements": N, "log2n": LOG2N, "copy_bytes": COPY_BYTES, "seed": opts.seed},
        "reduction_accelerators": _accelerators(),
    }
    print(f"{name} (sm_{info['arch']}), {len(cases)} cases, {reps} timed calls each; writing to {out_dir}", flush=True)

    copy_reps = max(reps, 20)
    info["copy_start"] = measure_copy(warmup, copy_reps)
    release()
    print(f"copy: {info['copy_start']['gbps']:.0f} GB/s", flush=True)

    results: list[Result] = []
    for i, case in enumerate(cases, 1):
        t0 = time.perf_counter()
        r = run_case(case, warmup, reps)
        results.append(r)
        check = "-" if r.check is None else ("ok" if r.check.ok else "FAILED")
        print(f"[{i}/{len(cases)}] {case.label}: kspec {_f(_gbps(r.kspec), '.0f')} GB/s, "
              f"CuPy {_f(_gbps(r.cupy), '.0f')} GB/s, check {check}"
              f"{'; ' + '; '.join(r.errors) if r.errors else ''} ({time.perf_counter() - t0:.1f} s)", flush=True)

    try:
        host = run_host_cost(host_calls, opts.only)
    except Exception as exc:
        traceback.print_exc()
        host = {"rows": [], "calls": host_calls, "batches": 7, "notes": [f"host cost failed: {_short(exc)}"]}

    release()
    info["copy_end"] = measure_copy(warmup, copy_reps)
    release()
    info["copy_gbps"] = max(info["copy_start"]["gbps"], info["copy_end"]["gbps"])
    info["wall_s"] = time.perf_counter() - wall

    write_json(out_dir / "bench.json", info, results, host)
    try:
        write_png(out_dir / "bench.png", results, info["copy_gbps"], name)
    except Exception as exc:
        print(f"bench.png failed: {_short(exc)}")
    print_tables(info, results, host)
    print(f"\nwrote {out_dir / 'bench.json'}; {info['wall_s']:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
