"""Host cost per call of a kspec kernel registered as a PyTorch operator, by registration style (issue [X]).

kspec.torch defines its ops with ``torch.library.Library.define`` + ``impl`` (the dispatcher calls the kernel
directly). ``torch.library.custom_op`` would wrap the same implementation in its Python autograd and
aliasing checks. This measures both, with the same implementation, against the plain kspec call, eager and
inside ``torch.compile`` (a graph of one op), on small tensors so that the host cost dominates:

- ``--device cpu`` (default; no GPU needed): CPU tensors, the kernel on kspec's CPU device (each call also
  converts the tensors to NumPy and back, the same for both styles);
- ``--device cuda``: CUDA tensors, the kernel on the GPU (the time is host time; the launches queue).

Medians of ``--repeat`` rounds of ``--calls`` calls, in microseconds per call. Usage::

    python benchmarks/host/torch_register.py [--device cpu|cuda] [--calls 20000] [--repeat 9]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

import kspec  # noqa: E402
import kspec.torch as kt  # noqa: E402

ADD = kspec.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = x + y", "bench_register_add")


def per_call_us(fn: Callable[..., Any], args: tuple[Any, ...], calls: int, repeat: int, sync: Callable[[], None]) -> float:
    for _ in range(200):
        fn(*args)
    sync()
    rounds = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        rounds.append((time.perf_counter() - start) / calls * 1e6)
        sync()
    return statistics.median(rounds)


def custom_op_of(call: Callable[..., Any], device: str) -> Any:
    """The same implementation as kspec.torch's, registered through torch.library.custom_op."""

    @torch.library.custom_op("kspec_bench::add_custom_op", mutates_args=(), device_types=device,
                             schema="(Tensor x, Tensor y) -> Tensor")  # fmt: skip
    def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return call(x, y)

    add.register_fake(lambda x, y: torch.empty_like(x))
    return add


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=9)
    options = parser.parse_args()
    device = options.device
    if device == "cpu":
        kspec.use_device("cpu")
        sync: Callable[[], None] = lambda: None  # noqa: E731

        def direct(x: Any, y: Any) -> Any:
            return torch.from_numpy(ADD(x.numpy(), y.numpy()))
    else:
        sync = torch.cuda.synchronize
        direct = ADD
    x = torch.rand(256, device=device)
    y = torch.rand(256, device=device)
    library_op = kt.register(ADD)  # Library.define + impl
    custom = custom_op_of(direct, device)
    graph_library = torch.compile(lambda a, b: library_op(a, b), fullgraph=True)
    graph_custom = torch.compile(lambda a, b: custom(a, b), fullgraph=True)
    rows = [
        ("kspec call (no op)", direct),
        ("Library.define + impl (kspec.torch)", library_op),
        ("custom_op", custom),
        ("compiled graph: Library op", graph_library),
        ("compiled graph: custom_op", graph_custom),
    ]
    times = {name: per_call_us(fn, (x, y), options.calls, options.repeat, sync) for name, fn in rows}
    torch.testing.assert_close(graph_library(x, y), x + y)
    torch.testing.assert_close(graph_custom(x, y), x + y)
    base = times["kspec call (no op)"]
    print(f"torch {torch.__version__}, device {device}, 256 float32, {options.repeat} x {options.calls} calls, median")
    print(f"| {'path':<38} | {'us/call':>8} | {'over kspec call':>15} |")
    print(f"|{'-' * 40}|{'-' * 10}|{'-' * 17}|")
    for name, _ in rows:
        print(f"| {name:<38} | {times[name]:8.2f} | {times[name] - base:+15.2f} |")


if __name__ == "__main__":
    main()
