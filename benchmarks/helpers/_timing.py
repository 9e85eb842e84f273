"""Device time of the benchmark cases (CUDA events), the copy ceiling, and running one case (benchmarks/kernels/bench.py)."""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from _cases import Case
from _check import Check


def short_error(exc: BaseException) -> str:
    """An exception in one line, for the table's remarks."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200] if text else ''}"


def time_cuda(fn: Callable[[], object], warmup: int, reps: int) -> list[float]:
    """Milliseconds of each of ``reps`` calls of ``fn``, from CUDA events recorded around each call on the
    current stream, after ``warmup`` untimed calls. kspec and CuPy launch on CuPy's current stream (for CuPy
    arrays) and PyTorch's (for torch tensors); both are the legacy default stream unless a script changes them."""
    import cupy as cp

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
                errors[lib] = short_error(exc)
    return samples, errors


def stats(samples: list[float], nbytes: int) -> dict[str, Any] | None:
    if not samples:
        return None
    med = statistics.median(samples)
    return {"median_ms": med, "min_ms": min(samples), "max_ms": max(samples), "n": len(samples),
            "gbps": nbytes / (med * 1e-3) / 1e9, "samples_ms": samples}


def measure_copy(copy_bytes: int, warmup: int, reps: int) -> dict[str, Any]:
    """Device-to-device cudaMemcpyAsync of ``copy_bytes``; bandwidth counts bytes read + bytes written."""
    import cupy as cp

    src = cp.random.standard_normal(copy_bytes // 4, dtype=np.float32)
    dst = cp.empty_like(src)
    stream_ptr = cp.cuda.get_current_stream().ptr
    kind = cp.cuda.runtime.memcpyDeviceToDevice

    def copy() -> None:
        cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, copy_bytes, kind, stream_ptr)

    samples = time_cuda(copy, warmup, reps)
    ok = bool(cp.array_equal(src, dst))
    result = stats(samples, 2 * copy_bytes)
    assert result is not None
    result["copy_correct"] = ok
    return result


def release() -> None:
    """Give the memory of the finished case back (CuPy's pool, PyTorch's cache)."""
    import cupy as cp

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
        result.errors.append(f"release: {short_error(exc)}")
    return result


def _build_check_time(result: Result, warmup: int, reps: int) -> None:
    try:
        built = result.case.build()
    except Exception as exc:
        result.errors.append(f"build: {short_error(exc)}")
        return
    result.nbytes, result.note = built.nbytes, built.note
    if built.check is not None:
        try:
            result.check = built.check()  # kspec's first call (compile, load) happens here, untimed
        except Exception as exc:
            result.errors.append(f"check: {short_error(exc)}")
    samples, errors = time_libraries({"kspec": built.kspec_fn, "cupy": built.cupy_fn}, warmup, reps)
    result.errors += [f"time {lib}: {text}" for lib, text in errors.items()]
    # a library that raised while timed gets no number (its row then says ERROR or n/a)
    result.kspec = None if "kspec" in errors else stats(samples.get("kspec", []), built.nbytes)
    result.cupy = None if "cupy" in errors else stats(samples.get("cupy", []), built.nbytes)
