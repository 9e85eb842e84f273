"""A training step through a kspec kernel with gradients (issue [AD]): bias-GELU (tanh form) forward and backward
against eager PyTorch and Inductor, beside the traffic floor measured in the same run.

The step: ``y = gelu_tanh(x + b)`` on an (N, M) float32 ``x`` with an (M,) bias, then the gradients of ``x`` and
``b`` for an incoming gradient ``g`` (``torch.autograd.grad``, so nothing accumulates). Contenders:

- PyTorch eager: ``F.gelu(x + b, approximate="tanh")``;
- Inductor: the same forward in ``torch.compile(fullgraph=True)`` (AOTAutograd compiles its backward);
- kspec bare / op, eager / compiled: an ElementwiseKernel with ``grad = "auto"`` (its backward kernel derived from
  the operation) called directly (autograd records a bare eager call through the kernel's op) and through
  ``kspec.torch.register``, eagerly and inside ``torch.compile``;
- kspec fused bare / op, eager / compiled: the same function as a ``kspec.fuse`` function (its backward derived
  from the traced kernel), the same four ways.

Every contender is built in the one process, as a program that uses them side by side would.

The floor: the step must read ``x`` and write ``y``, then read ``g`` and ``x`` and write ``x``'s gradient: five
arrays of N*M floats, 2.5 times a device-to-device copy of ``x`` (``y.copy_(x)``), timed here; ``b``'s gradient
(a column sum) is extra traffic on top (kspec sums it inside the backward's pass). Time per step from CUDA events,
medians of ``--reps`` steps in ``--rounds`` rounds that alternate the contenders, and beside it the GPU's own time
per step (the kernels' device time from torch.profiler): where the host takes longer per step than the kernels,
the events measure the host; the host's own time per step is the last column (issuing a round's steps, before
they finish). kspec's kernels launch through its compiled call path, built first where the cache lacks it (as
``kspec warm`` builds it for a deploy: on a cold cache the kernels planned before it is built keep the Python
path, which a machine that has run kspec once no longer takes). Inductor compiles into a fresh cache directory
unless ``TORCHINDUCTOR_CACHE_DIR`` names one: a graph cached by an older kspec calls its ops as that version did
(a fused op through the dispatcher before it had a direct call). Usage::

    python benchmarks/kernels/train_step.py [--shape 16384 4096] [--reps 50] [--rounds 3] [--profile]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

GELU_TANH = (
    "T v = x + b;\n"
    "T u = 0.7978845608028654f * (v + 0.044715f * v * v * v);\n"
    "y = 0.5f * v * (1.0f + tanh(u));"
)


def contenders(torch: Any) -> dict[str, Callable[[Any, Any, Any], Any]]:
    import torch.nn.functional as F

    import kspec
    import kspec.torch as kt

    import numpy as np

    kernel = kspec.ElementwiseKernel("T x, T b", "T y", GELU_TANH, "bench_bias_gelu", grad="auto")
    op = kt.register(kernel)

    @kspec.fuse
    def fused_bias_gelu(x: Any, b: Any) -> Any:  # the same function, differentiated with no declaration
        v = x + b
        return 0.5 * v * (1.0 + np.tanh(np.float32(0.7978845608028654) * (v + np.float32(0.044715) * v * v * v)))

    fused_op = kt.register(fused_bias_gelu)

    def step_of(forward: Callable[[Any, Any], Any]) -> Callable[[Any, Any, Any], Any]:
        def step(x: Any, b: Any, g: Any) -> Any:
            return torch.autograd.grad(forward(x, b), (x, b), g)

        return step

    def torch_gelu(x: Any, b: Any) -> Any:
        return F.gelu(x + b, approximate="tanh")

    def compiled(forward: Callable[[Any, Any], Any]) -> Any:  # AOTAutograd compiles its backward graph too
        return torch.compile(forward, fullgraph=True)

    return {
        "PyTorch eager": step_of(torch_gelu),
        "Inductor (torch.compile)": step_of(compiled(torch_gelu)),
        "kspec bare call, eager": step_of(kernel),
        "kspec op, eager": step_of(op),
        "kspec bare call, torch.compile": step_of(compiled(lambda x, b: kernel(x, b))),
        "kspec op, torch.compile": step_of(compiled(lambda x, b: op(x, b))),
        "kspec fused bare, eager": step_of(fused_bias_gelu),
        "kspec fused op, eager": step_of(fused_op),
        "kspec fused bare, torch.compile": step_of(compiled(lambda x, b: fused_bias_gelu(x, b))),
        "kspec fused op, torch.compile": step_of(compiled(lambda x, b: fused_op(x, b))),
    }


def time_ms(torch: Any, fn: Callable[[], Any], reps: int) -> tuple[list[float], float]:
    """Each step's time between CUDA events, and the host's time per step (issuing ``reps`` steps, before the
    synchronisation: where it exceeds the GPU's, the events time the host)."""
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    torch.cuda.synchronize()
    began = time.perf_counter()
    for start, end in zip(starts, ends):
        start.record()
        fn()
        end.record()
    host = (time.perf_counter() - began) * 1000 / reps
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)], host


def main() -> None:
    import os
    import tempfile

    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="train_step_inductor_"))
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=2, default=[16384, 4096])
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="also list each contender's GPU kernels (torch.profiler)")
    parser.add_argument("--host-profile", type=int, default=0, metavar="N",
                        help="also list, per contender, the N functions where its host time goes (cProfile)")
    options = parser.parse_args()
    from kspec.runtime import fastcall_module

    call_path = "compiled" if fastcall_module(wait=True) is not None else "Python (no host compiler, or KSPEC_CALL_PATH)"
    n, m = options.shape
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn((n, m), device="cuda", generator=gen, requires_grad=True)
    b = torch.randn((m,), device="cuda", generator=gen, requires_grad=True)
    g = torch.randn((n, m), device="cuda", generator=gen)
    steps = contenders(torch)
    want = steps["PyTorch eager"](x, b, g)
    for name, step in steps.items():  # warm-up (compiles) and the check
        for _ in range(2):
            got = step(x, b, g)
            for a, w in zip(got, want):
                torch.testing.assert_close(a, w, rtol=2e-4, atol=2e-3, msg=name)
    copy_dst = torch.empty_like(x, requires_grad=False)
    x_data = x.detach()
    samples: dict[str, list[float]] = {name: [] for name in ["copy (floor / 2.5)", *steps]}
    hosts: dict[str, list[float]] = {name: [] for name in samples}
    for _ in range(options.rounds):
        for name, step in {"copy (floor / 2.5)": lambda x, b, g: copy_dst.copy_(x_data), **steps}.items():
            events, host = time_ms(torch, lambda step=step: step(x, b, g), options.reps)
            samples[name] += events
            hosts[name].append(host)
    copy = statistics.median(samples.pop("copy (floor / 2.5)"))
    floor = 2.5 * copy
    print(f"\n{torch.cuda.get_device_name()}, torch {torch.__version__}: bias-GELU (tanh) training step on ({n}, {m}) "
          f"float32 + ({m},) bias; medians of {options.rounds} x {options.reps} steps (CUDA events)")  # fmt: skip
    print(f"copy of x: {copy:.4f} ms; traffic floor (2.5 copies): {floor:.4f} ms; kspec's call path: {call_path}\n")
    # the GPU's own time per step (the kernels' device time, torch.profiler): where a step's host work takes longer
    # than its kernels (these machines' host speed varies between starts), the events time the host instead
    kernels = {name: sum(us for _, us in kernel_times(torch, lambda step=step: step(x, b, g), 20)) / 1000 for name, step in steps.items()}
    inductor = statistics.median(samples["Inductor (torch.compile)"])
    print(f"| {'contender':<33} | {'ms / step':>9} | {'/ floor':>7} | {'/ Inductor':>10} | {'GPU ms':>7} | {'/ floor':>7} | {'host ms':>7} |")
    print(f"|{'-' * 35}|{'-' * 11}|{'-' * 9}|{'-' * 12}|{'-' * 9}|{'-' * 9}|{'-' * 9}|")
    for name, got in samples.items():
        ms = statistics.median(got)
        versus = ms / inductor
        host = statistics.median(hosts[name])
        print(f"| {name:<33} | {ms:9.4f} | {ms / floor:7.2f} | {versus:10.2f} | {kernels[name]:7.4f} | {kernels[name] / floor:7.2f} | {host:7.4f} |")
    if options.profile:
        for name, step in steps.items():
            print(f"\n{name}: GPU kernels per step (us, torch.profiler over 20 steps)")
            for kernel, us in kernel_times(torch, lambda step=step: step(x, b, g), 20):
                print(f"  {us:9.1f}  {kernel[:110]}")
    if options.host_profile:
        for name, step in steps.items():
            print(f"\n{name}: host time per step by function (us, own time, cProfile over 50 steps)")
            for where, us in host_times(torch, lambda step=step: step(x, b, g), 50, options.host_profile):
                print(f"  {us:9.2f}  {where[:110]}")


def host_times(torch: Any, fn: Callable[[], Any], steps: int, top: int) -> list[tuple[str, float]]:
    """The ``top`` functions by own host time per step (cProfile's overhead inflates each call alike)."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    torch.cuda.synchronize()
    profiler.enable()
    for _ in range(steps):
        fn()
    profiler.disable()
    torch.cuda.synchronize()
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    rows = [(f"{Path(file).name}:{line} {func} x{calls / steps:g}", own * 1e6 / steps)
            for (file, line, func), (_, calls, own, _, _) in stats.items()]  # fmt: skip
    return sorted(rows, key=lambda row: -row[1])[:top]


def kernel_times(torch: Any, fn: Callable[[], Any], steps: int) -> list[tuple[str, float]]:
    """Each GPU kernel's (and memset / memcpy's) device time per step, largest first."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            fn()
        torch.cuda.synchronize()
    totals: dict[str, float] = {}
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            us = getattr(event, "device_time", None)
            us = event.cuda_time if us is None else us
            totals[event.name] = totals.get(event.name, 0.0) + us / steps
    return sorted(totals.items(), key=lambda item: -item[1])


if __name__ == "__main__":
    main()
