"""The cases of benchmarks/kernels/bench.py: what each one builds, checks and times, and the target it has."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from _check import ELEMENTWISE_TOL, REDUCTION_TOL, Check, check_elementwise, compare, poison, randn
from _kernels import fused_pair, jit_kernels, kernel_pair
from _settings import Settings

# Targets: kspec's bandwidth as a fraction of the copy bandwidth.
TARGET_CONTIGUOUS = 0.90
TARGET_STRIDED = 0.75  # broadcast and transposed inputs
TARGET_REDUCTION = 0.85


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


def elementwise_builder(kernel: str, dtype: str, shapes: list[tuple[int, ...]],
                        transpose_first: bool = False, scalar: float | None = None,
                        transpose_out: bool = False) -> Callable[[], Built]:
    """A builder for ``k([scalar,] *inputs, out)`` with preallocated outputs (one for each library).

    ``shapes`` gives each input's shape; the output has the broadcast shape. ``transpose_first`` passes the
    first input as ``a.T`` of a square array; ``transpose_out`` writes the output into a column-major array
    (``c.T`` of a C-contiguous one).
    """

    def build() -> Built:
        import cupy as cp

        kk, ck = kernel_pair(kernel)
        inputs = [randn(s, dtype) for s in shapes]
        if transpose_first:
            inputs[0] = inputs[0].T
        out_shape = np.broadcast_shapes(*shapes)
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


def bfloat16_builder(n: int) -> Callable[[], Built]:
    """(x - y)^2 in bfloat16 on ``n`` elements: on CuPy arrays where CuPy 14 takes bfloat16 (ml_dtypes), else
    on torch tensors with CuPy n/a."""

    def build() -> Built:
        import cupy as cp

        kk, ck = kernel_pair("sqd")
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
            return elementwise_builder("sqd", "bfloat16", [(n,)] * 2)()

        try:
            import torch  # CuPy cannot: PyTorch holds the bfloat16 arrays
        except ImportError as exc:
            raise RuntimeError(f"{reason}, and no PyTorch to hold bfloat16 arrays ({exc})") from None

        x = torch.randn(n, dtype=torch.bfloat16, device="cuda")
        y = torch.randn(n, dtype=torch.bfloat16, device="cuda")
        z = torch.empty_like(x)
        kspec_fn = lambda: kk(x, y, z)  # noqa: E731

        def check() -> Check:
            poison(z)
            kspec_fn()
            ref = (x.float() - y.float()) ** 2  # float32 reference from the same bfloat16 inputs
            return compare(cp.from_dlpack(z.float()), cp.from_dlpack(ref), *ELEMENTWISE_TOL["bfloat16"])

        return Built(kspec_fn, None, 3 * n * 2, check, note=reason + "; kspec on torch tensors")

    return build


def reduction_builder(kernel: str, shape: tuple[int, ...], axis: Any, dtype: str) -> Callable[[], Built]:
    """A builder for ``k(x, axis=axis)`` (outputs allocated by each library, as in ordinary use)."""

    def build() -> Built:
        import cupy as cp

        kk, ck = kernel_pair(kernel)
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


def jit_builder(name: str, n: int) -> Callable[[], Built]:
    """The seed's grid-stride copy, or a saxpy, as ``kspec.jit`` and ``cupyx.jit`` kernels of the same source,
    launched alike (64 blocks of 256 threads per SM: 8 waves of resident blocks)."""

    def build() -> Built:
        import cupy as cp

        kk = jit_kernels("kspec").fresh(getattr(jit_kernels("kspec"), name))
        ck = jit_kernels("cupyx").fresh(getattr(jit_kernels("cupyx"), name))
        grid, block = (cp.cuda.Device().attributes["MultiProcessorCount"] * 64,), (256,)
        x, y = randn((n,), "float32"), randn((n,), "float32")
        zk, zc = cp.empty_like(x), cp.empty_like(x)
        head = (np.float32(2.5),) if name == "saxpy" else ()
        ins = (x, y) if name == "saxpy" else (x,)
        kspec_fn = lambda: kk(grid, block, (*head, *ins, zk, np.uint32(n)))  # noqa: E731
        cupy_fn = lambda: ck(grid, block, (*head, *ins, zc, np.uint32(n)))  # noqa: E731
        return Built(kspec_fn, cupy_fn, (len(ins) + 1) * x.nbytes,
                     lambda: check_elementwise(kspec_fn, zk, cupy_fn, zc, "float32"))

    return build


def cupy_sum_builder(shape: tuple[int, ...], axis: Any) -> Callable[[], Built]:
    """Reference: plain ``cupy.sum`` (CUB where CuPy's reduction accelerators include it); no kspec row."""

    def build() -> Built:
        import cupy as cp

        x = randn(shape, "float32")
        return Built(None, lambda: cp.sum(x, axis=axis), x.nbytes + _out_elems(shape, axis) * 4, None,
                     note=f"reduction accelerators: {reduction_accelerators()}")

    return build


def _out_elems(shape: tuple[int, ...], axis: Any) -> int:
    if axis is None:
        return 1
    axes = {a % len(shape) for a in (axis if isinstance(axis, tuple) else (axis,))}
    return math.prod(d for i, d in enumerate(shape) if i not in axes)


def reduction_accelerators() -> str:
    """CuPy's reduction accelerators (``cub``, ...), as they decide what ``cupy.sum`` runs."""
    try:
        from cupy._core import _accelerator

        names = {1: "cub", 2: "cutensor", 3: "cutensornet"}
        return ",".join(names.get(a, str(a)) for a in _accelerator.get_reduction_accelerators()) or "none"
    except Exception:
        return f"unknown (CUPY_ACCELERATORS={os.environ.get('CUPY_ACCELERATORS', 'unset')})"


def all_cases(settings: Settings) -> list[Case]:
    """Every case, in the table's order, sized by ``settings.log2n``."""
    k, h, n, side = settings.log2n, settings.log2n // 2, settings.n, settings.side
    full, square = f"2^{k}", f"(2^{h},2^{h})"
    cases: list[Case] = []
    # contiguous elementwise
    for dtype in ("float16", "bfloat16", "float32", "float64"):
        build = bfloat16_builder(n) if dtype == "bfloat16" else elementwise_builder("sqd", dtype, [(n,)] * 2)
        cases.append(Case(f"sqd (x-y)^2, {full}", dtype, "elementwise", TARGET_CONTIGUOUS, build))
    cases.append(Case(f"fma w=a*b+c, {full}", "float32", "elementwise", TARGET_CONTIGUOUS,
                      elementwise_builder("fma3", "float32", [(n,)] * 3)))
    cases.append(Case(f"scalar z=a*x+y (a=2.0), {full}", "float32", "elementwise", TARGET_CONTIGUOUS,
                      elementwise_builder("axpy", "float32", [(n,)] * 2, scalar=2.0)))
    # strided elementwise
    cases.append(Case(f"sqd broadcast {square}-(2^{h},)", "float32", "strided", TARGET_STRIDED,
                      elementwise_builder("sqd", "float32", [(side, side), (side,)])))
    cases.append(Case(f"sqd transposed x=a.T {square}", "float32", "strided", TARGET_STRIDED,
                      elementwise_builder("sqd", "float32", [(side, side), (side, side)], transpose_first=True)))
    cases.append(Case(f"sqd transposed out z=c.T {square}", "float32", "strided", TARGET_STRIDED,
                      elementwise_builder("sqd", "float32", [(side, side), (side, side)], transpose_out=True)))
    # reductions: each shape with the sum of squares and the L2 norm (at 2**28: (2^24,16), (2^18,1000),
    # (64,256,64,256))
    a, b = 1 << (h // 2 - 1), 1 << (h - h // 2 + 1)
    shapes: list[tuple[str, tuple[int, ...], Any]] = [
        (f"full {full}", (n,), None),
        (f"axis=1 {square}", (side, side), 1),
        (f"axis=0 {square}", (side, side), 0),
        (f"rows of 16 (2^{k - 4},16)", (n >> 4, 16), 1),
        (f"rows of 1000 (2^{k - 10},1000)", (n >> 10, 1000), 1),
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
                      fuse_builder("sqd", (n,), n)))
    cases.append(Case(f"fuse sum((x-y)**2, axis=1) {square}", "float32", "reduction", TARGET_REDUCTION,
                      fuse_builder("ssq_rows", (side, side), side)))
    # kspec.jit against cupyx.jit, the same Python source
    cases.append(Case(f"jit grid-stride copy, {full}", "float32", "elementwise", TARGET_CONTIGUOUS, jit_builder("copy", n)))
    cases.append(Case(f"jit saxpy, {full}", "float32", "elementwise", TARGET_CONTIGUOUS, jit_builder("saxpy", n)))
    # references: plain cupy.sum, CuPy's own best reduction
    for desc, shape, axis in shapes[:2]:
        cases.append(Case(f"cupy.sum (CUB ref) {desc}", "float32", "reference", None, cupy_sum_builder(shape, axis)))
    return cases
