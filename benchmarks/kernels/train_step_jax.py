"""The bias-GELU training step of benchmarks/kernels/train_step.py in JAX: ``jax.grad`` under ``jax.jit`` through a kspec
kernel with gradients (bare call and ``kspec.jax.call``; the spec kernel and the fused function) against XLA's own
``jax.nn.gelu``, beside the traffic floor (2.5 copies of ``x``) measured in the same run, and the gradients
checked against XLA's.

The step: ``y = gelu_tanh(x + b)`` and its vector-Jacobian product for an incoming gradient ``g`` (both
gradients: ``x``'s and the bias's), returning all three, as PyTorch's step computes ``y`` and both gradients. Times are wall milliseconds per step over ``--reps`` steps issued back to
back and synchronised once (the device's time where it is the bound), medians of ``--rounds`` rounds that
alternate the contenders. Usage::

    python benchmarks/kernels/train_step_jax.py [--shape 16384 4096] [--reps 50] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from train_step import GELU_TANH  # noqa: E402


def contenders() -> dict[str, Callable[..., Any]]:
    import jax

    import kspec
    import kspec.jax as kj

    kernel = kspec.ElementwiseKernel("T x, T b", "T y", GELU_TANH, "bench_jax_bias_gelu", grad="auto")

    @kspec.fuse
    def fused_bias_gelu(x: Any, b: Any) -> Any:
        v = x + b
        return 0.5 * v * (1.0 + np.tanh(np.float32(0.7978845608028654) * (v + np.float32(0.044715) * v * v * v)))

    def step_of(forward: Callable[[Any, Any], Any]) -> Any:
        def step(x: Any, b: Any, g: Any) -> Any:
            y, back = jax.vjp(forward, x, b)
            return (y, *back(g))  # y too: a training step reads its loss (else XLA drops its own forward)

        return jax.jit(step)

    return {
        "XLA (jax.nn.gelu)": step_of(lambda x, b: jax.nn.gelu(x + b, approximate=True)),
        "kspec bare call, jit": step_of(lambda x, b: kernel(x, b)),
        "kspec.jax.call, jit": step_of(lambda x, b: kj.call(kernel, x, b)),
        "kspec fused bare, jit": step_of(lambda x, b: fused_bias_gelu(x, b)),
        "copy (floor / 2.5)": jax.jit(lambda x, b, g: x * 2.0),  # reads x, writes a new array
    }


def main() -> None:
    import jax

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=2, default=[16384, 4096])
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    n, m = options.shape
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    x = jax.random.normal(keys[0], (n, m), dtype="float32")
    b = jax.random.normal(keys[1], (m,), dtype="float32")
    g = jax.random.normal(keys[2], (n, m), dtype="float32")
    steps = contenders()
    want = steps["XLA (jax.nn.gelu)"](x, b, g)
    for name, step in steps.items():  # compile, and check the gradients against XLA's
        got = jax.block_until_ready(step(x, b, g))
        if not name.startswith("copy"):
            for a, w in zip(got, want):
                np.testing.assert_allclose(np.asarray(a), np.asarray(w), rtol=2e-4, atol=2e-2, err_msg=name)
    samples: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(options.rounds):
        for name, step in steps.items():
            jax.block_until_ready(step(x, b, g))
            began = time.perf_counter()
            for _ in range(options.reps):
                out = step(x, b, g)
            jax.block_until_ready(out)
            samples[name].append((time.perf_counter() - began) * 1000 / options.reps)
    copy = statistics.median(samples.pop("copy (floor / 2.5)"))
    floor = 2.5 * copy
    xla = statistics.median(samples["XLA (jax.nn.gelu)"])
    print(f"\n{jax.devices()[0].device_kind}, jax {jax.__version__}: bias-GELU (tanh) vjp under jax.jit on ({n}, {m}) float32 "
          f"+ ({m},) bias; medians of {options.rounds} rounds of {options.reps} steps (wall time, one sync per round)")  # fmt: skip
    print(f"copy of x: {copy:.4f} ms; traffic floor (2.5 copies): {floor:.4f} ms\n")
    print(f"| {'contender':<24} | {'ms / step':>9} | {'/ floor':>7} | {'/ XLA':>6} |")
    print(f"|{'-' * 26}|{'-' * 11}|{'-' * 9}|{'-' * 8}|")
    for name, got in samples.items():
        ms = statistics.median(got)
        print(f"| {name:<24} | {ms:9.4f} | {ms / floor:7.2f} | {ms / xla:6.2f} |")


if __name__ == "__main__":
    main()
