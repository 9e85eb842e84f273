"""Host cost of a kspec elementwise op inside a ``torch.compile`` graph, against a Triton kernel doing the same
work in the same graph, and eager (issue [X]; needs a GPU, PyTorch and Triton).

The work: ``z = x + y`` on float32. Contenders, each a graph of ``--chain`` dependent ops (so that the graph's
own cost, guards and wrapper, is shared by the ops and the per-op cost shows):

- kspec: ``kspec.torch.register(ElementwiseKernel(...))`` (kspec::<name>; Inductor's code calls the kernel's out
  call ``torch.ops.kspec.<name>.kspec_call`` directly, no dispatcher);
- kspec bare: the same kernel called directly in the compiled function, no ``register`` (issue [Z]: Dynamo
  traces it as the registered op, so its graph and host cost should be the op's);
- Triton: a ``@triton.jit`` kernel registered with ``torch.library.triton_op`` / ``wrap_triton`` (Inductor calls
  the kernel from its generated code);
- Inductor: ``x + y`` written in PyTorch, Inductor generating the pointwise kernel (with ``--chain`` > 1 it fuses
  the chain into one kernel: fewer launches, so not the same work; shown for reference);
- eager: the kspec op and ``torch.add`` called outside a graph.

Host time is ``time.perf_counter`` over ``--calls`` calls of the compiled function without synchronising (the
launches queue; tensors are small, so the GPU keeps up), per op; GPU time per op from CUDA events around the
same loop. Medians of ``--repeat`` rounds, the contenders taking turns in each round. Usage::

    python benchmarks/host/torch_compile.py [--size 4096] [--chain 1 8] [--calls 2000] [--repeat 15]
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
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from torch.library import triton_op, wrap_triton  # noqa: E402

import kspec  # noqa: E402
import kspec.torch as kt  # noqa: E402

ADD = kspec.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = x + y", "bench_compile_add")
kspec_add = kt.register(ADD)


@triton.jit
def _add_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(z_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


@triton_op("kspec_bench::triton_add", mutates_args=())
def triton_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    z = torch.empty_like(x)
    n = x.numel()
    wrap_triton(_add_kernel)[(triton.cdiv(n, 1024),)](x, y, z, n, BLOCK=1024)
    return z


def chain(op: Callable[[Any, Any], Any], length: int, tag: str = "") -> Callable[[Any, Any], Any]:
    """``length`` dependent ``op`` calls. ``tag`` gives the function a code object of its own: Dynamo keeps its
    compiled graphs per code object and checks their guards in turn, so contenders sharing one would pay
    for each other's failing guards (several us per graph call)."""

    def f(x: Any, y: Any) -> Any:
        for _ in range(length):
            x = op(x, y)
        return x

    if tag:
        f.__code__ = f.__code__.replace(co_name=f"chain_{tag}_{length}")
    return f


def one_round(fn: Callable[[Any, Any], Any], x: Any, y: Any, calls: int, ops: int) -> tuple[float, float]:
    """(host us, GPU us) per op over ``calls`` calls, started from an idle GPU."""
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(x, y)
    t1 = time.perf_counter()
    end.record()
    end.synchronize()
    return (t1 - t0) / calls / ops * 1e6, start.elapsed_time(end) * 1e3 / calls / ops


def measure(contenders: dict[str, Callable[[Any, Any], Any]], x: Any, y: Any, calls: int, repeat: int, ops: int,
            base: str) -> dict[str, tuple[float, float, float]]:  # fmt: skip
    """Per contender: (host us, GPU us, host / base's host), medians over rounds. The contenders take turns
    within each round, so that the host's drift (frequency, other processes) falls on all of them alike, and
    the ratio is the median of each round's own ratio."""
    for fn in contenders.values():
        for _ in range(50):
            fn(x, y)
    rounds: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
    for _ in range(repeat):
        for name, fn in contenders.items():
            rounds[name].append(one_round(fn, x, y, calls, ops))
    return {
        name: (statistics.median(h for h, _ in got), statistics.median(g for _, g in got),
               statistics.median(h / b for (h, _), (b, _) in zip(got, rounds[base])))
        for name, got in rounds.items()
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--chain", type=int, nargs="+", default=[1, 8], help="ops per graph (one table each)")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=15)
    options = parser.parse_args()
    x = torch.rand(options.size, device="cuda")
    y = torch.rand(options.size, device="cuda")
    for n in options.chain:
        table(n, x, y, options)


def table(n: int, x: Any, y: Any, options: argparse.Namespace) -> None:
    contenders = {
        "kspec op, compiled graph": torch.compile(chain(kspec_add, n, "kspec"), fullgraph=True),
        "kspec kernel called bare, compiled graph": torch.compile(chain(ADD, n, "bare"), fullgraph=True),
        "Triton triton_op, compiled graph": torch.compile(chain(triton_add, n, "triton"), fullgraph=True),
        "Inductor pointwise (x + y), compiled": torch.compile(chain(torch.add, n, "inductor"), fullgraph=True),
        "kspec op, eager": chain(kspec_add, n),
        "kspec kernel call, eager (no op)": chain(ADD, n),
        "torch.add, eager": chain(torch.add, n),
    }
    want = chain(torch.add, n)(x, y)
    for name, fn in contenders.items():
        torch.testing.assert_close(fn(x, y), want, msg=name)
    results = measure(contenders, x, y, options.calls, options.repeat, n, "Triton triton_op, compiled graph")
    device = torch.cuda.get_device_name()
    print(f"\n{device}, torch {torch.__version__}, triton {triton.__version__}; z = x + y on {options.size} float32, "
          f"graphs of {n} op(s); medians of {options.repeat} rounds of {options.calls} calls, per op; host / Triton: "
          "median of the rounds' ratios")  # fmt: skip
    print(f"| {'contender':<38} | {'host us/op':>10} | {'GPU us/op':>9} | {'host / Triton':>13} |")
    print(f"|{'-' * 40}|{'-' * 12}|{'-' * 11}|{'-' * 15}|")
    for name, (host, gpu, ratio) in results.items():
        print(f"| {name:<38} | {host:10.2f} | {gpu:9.2f} | {ratio:13.2f} |")


if __name__ == "__main__":
    main()
