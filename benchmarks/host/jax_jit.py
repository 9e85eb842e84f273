"""Host cost of a kspec elementwise call inside ``jax.jit`` (kspec.jax: an XLA FFI custom call) against the same
``jnp`` expression, and against eager calls, on one device in one run.

The work: ``z = x + 2 * y`` on float32 vectors, ``--chain`` times in a row inside one jitted function (each
call reads the previous result), so a row's numbers are per call of the chain. Variants:

* ``kspec.jax in jit``: ``kspec.jax.call(kernel, x, y)`` in the jitted function: XLA runs the FFI handler,
  which launches kspec's binary on XLA's stream;
* ``kspec bare call in jit``: ``kernel(x, y)`` called directly on the tracers (issue [Z]: it goes through
  ``kspec.jax.call``, so its jitted function should be the row above's);
* ``jnp in jit, one kernel per op``: the same expression with ``jax.lax.optimization_barrier`` between calls,
  so XLA launches one kernel per call as it does for the custom calls (the fair peer);
* ``jnp in jit, fused``: the same expression left to XLA, which fuses the chain into one kernel;
* ``kspec.jax eager``: ``kspec.jax.call`` outside any jit (one cached jitted dispatch per call);
* ``kspec eager``: the kernel called on JAX arrays directly (issue [Q]: it runs as ``kspec.jax.call``; it was
  kspec's own launch, DLPack in and out);
* ``jnp eager``: the same expression in ``jnp`` outside any jit (two dispatches: JAX's own eager cost).

Two numbers per variant, medians of ``--repeat`` loops of ``--calls`` calls of the jitted function (the
variants take turns): host microseconds per kernel call (the loop's time before synchronising: what the host
spends; the device runs these faster than the host submits them at the small size) and wall microseconds per
kernel call (until the results are ready: at the large size this is the device's time). The ratio column is
host time over the one-kernel-per-op jnp row of the same size.

    python benchmarks/host/jax_jit.py [--sizes 4096 16777216] [--chain 1 8] [--calls 2000] [--repeat 15]
    KSPEC_JAX_HANDLER=python python benchmarks/host/jax_jit.py   # the Python fallback handler instead of the C one
    KSPEC_JAX_COMMAND_BUFFER=1 python benchmarks/host/jax_jit.py  # XLA may capture kspec's launches in its CUDA graphs
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

Loop = Callable[[int], Any]


def variants(chain: int, x: Any, y: Any) -> dict[str, Loop]:
    import jax

    import kspec
    import kspec.jax as kj

    add2 = kspec.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = x + 2 * y", "bench_jax_add2")

    def kspec_chain(x: Any, y: Any) -> Any:
        for _ in range(chain):
            x = kj.call(add2, x, y)
        return x

    def bare_chain(x: Any, y: Any) -> Any:
        for _ in range(chain):
            x = add2(x, y)
        return x

    def jnp_separate(x: Any, y: Any) -> Any:
        for _ in range(chain):
            x = jax.lax.optimization_barrier(x + 2 * y)
        return x

    def jnp_fused(x: Any, y: Any) -> Any:
        for _ in range(chain):
            x = x + 2 * y
        return x

    def jitted(fn: Callable[[Any, Any], Any]) -> Loop:
        f = jax.jit(fn)

        def loop(calls: int) -> Any:
            out = None
            for _ in range(calls):
                out = f(x, y)
            return out

        return loop

    def eager(call: Callable[[Any, Any], Any]) -> Loop:
        def loop(calls: int) -> Any:
            out = None
            for _ in range(calls):
                z = x
                for _ in range(chain):
                    z = call(z, y)
                out = z
            return out

        return loop

    return {
        "kspec.jax in jit": jitted(kspec_chain),
        "kspec bare call in jit": jitted(bare_chain),
        "jnp in jit, one kernel per op": jitted(jnp_separate),
        "jnp in jit, fused": jitted(jnp_fused),
        "kspec.jax eager": eager(lambda a, b: kj.call(add2, a, b)),
        "kspec eager": eager(lambda a, b: add2(a, b)),
        "jnp eager": eager(lambda a, b: a + 2 * b),
    }


def measure(loops: dict[str, Loop], calls: int, repeat: int, per: int) -> dict[str, tuple[float, float] | str]:
    """(host us, wall us) per kernel call of each loop: medians over ``repeat`` turns of ``calls`` calls; a
    variant that fails (e.g. kspec's eager call on JAX CPU arrays) gives its error instead."""
    import jax

    failed: dict[str, str] = {}
    for name, loop in loops.items():
        try:
            jax.block_until_ready(loop(min(calls, 50)))  # warm up: trace, plan, compile, load
        except Exception as exc:  # noqa: BLE001 - a row with the error, never a stopped run
            failed[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
    loops = {name: loop for name, loop in loops.items() if name not in failed}
    host: dict[str, list[float]] = {name: [] for name in loops}
    wall: dict[str, list[float]] = {name: [] for name in loops}
    for _ in range(repeat):
        for name, loop in loops.items():
            start = time.perf_counter()
            out = loop(calls)
            issued = time.perf_counter()
            jax.block_until_ready(out)
            done = time.perf_counter()
            host[name].append((issued - start) / (calls * per) * 1e6)
            wall[name].append((done - start) / (calls * per) * 1e6)
    timed: dict[str, tuple[float, float] | str] = {name: (statistics.median(host[name]), statistics.median(wall[name]))
                                                   for name in loops}  # fmt: skip
    return {**timed, **failed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 1 << 24])
    parser.add_argument("--chain", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()

    import jax
    import jax.numpy as jnp

    from kspec.jax import _library

    device = jax.devices()[0]
    print(f"device: {device.device_kind} ({device.platform}), jax {jax.__version__}")
    rows = []
    for n in args.sizes:
        rng = np.random.default_rng(0)
        x = jnp.asarray(rng.standard_normal(n).astype(np.float32))
        y = jnp.asarray(rng.standard_normal(n).astype(np.float32))
        for chain in args.chain:
            calls = max(10, args.calls // max(1, n // 4096) // chain) if n > 4096 else args.calls
            results = measure(variants(chain, x, y), calls, args.repeat, chain)
            peer = results["jnp in jit, one kernel per op"]
            for name, result in results.items():
                if isinstance(result, str):
                    rows.append(f"{n:>10} {chain:>5}  {name:<30} {result}")
                else:
                    ratio = f"{result[0] / peer[0]:>10.2f}" if not isinstance(peer, str) else f"{'-':>10}"
                    rows.append(f"{n:>10} {chain:>5}  {name:<30} {result[0]:>12.2f} {result[1]:>12.2f} {ratio}")
    print(f"FFI handler: {_library.handler().kind}, command-buffer compatible: {_library.command_buffers()}")
    print(f"{'n':>10} {'chain':>5}  {'variant':<30} {'host us/call':>12} {'wall us/call':>12} {'host / jnp':>10}")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
