"""A dask.distributed cluster of one worker process per GPU for examples/dask, workers that can be made to
never compile (:func:`cluster`'s ``served``), and what each worker loaded (:func:`kernel_loads`)."""

from __future__ import annotations

import collections
import os
import sys
from pathlib import Path
from typing import Any


# A worker preload (Python text: Dask runs it as the worker starts, before any task): the example's directories on the
# worker's import path, so that tasks naming its modules' functions unpickle there.
_ON_PATH = """\
import sys
for _directory in reversed({directories!r}):
    if _directory not in sys.path:
        sys.path.insert(0, _directory)
"""

# A worker preload (Python text: Dask runs it as the worker starts, before any task): every function of the NVRTC
# binding kspec compiles with raises from then on, so kspec has no compiler there, as on an image without NVRTC.
# The module itself stays importable (cuda.core and numba.cuda import it, and Dask imports those to move CuPy
# arrays); CuPy's own NVRTC binding is CuPy's and stays.
NO_NVRTC = """\
try:
    import cuda.bindings.nvrtc as nvrtc
except ImportError:  # no binding: nothing to block
    nvrtc = None

def _blocked(*args, **kwargs):
    raise RuntimeError("NVRTC is blocked on this worker")

for _name in dir(nvrtc) if nvrtc is not None else ():
    _fn = getattr(nvrtc, _name)
    if _name.startswith("nvrtc") and callable(_fn) and not isinstance(_fn, type):
        setattr(nvrtc, _name, _blocked)
"""


def cluster(gpus: int, kernels_dir: Path, threads: int = 1, served: str | os.PathLike[str] | None = None,
            modules: tuple[Any, ...] = ()) -> Any:
    """A distributed cluster with one worker process per GPU (``CUDA_VISIBLE_DEVICES`` per worker, as dask-cuda
    sets it). Tasks name the example's functions (this directory's modules, and those of ``modules``), which
    pickle by reference: the workers import them from their directories (a worker preload puts them on its ``sys.path``), as a
    deployed cluster imports installed task code. Sent by value (cloudpickle's ``register_pickle_by_value``),
    every task carried its functions' code: 9.5 KB and 0.4 ms of pickling a task on the scheduler's one thread
    (6 us by reference; tests/examples_tests/test_dask.py bounds it), which bounded the stencil graph on four GPUs
    (README.md). Workers need kspec (and CuPy) installed and ``kernels_dir`` (what ``pipeline.prepare`` wrote) readable.

    ``served``: a ``kspec build`` output (of spec files ``kspec capture`` wrote, say) that workers load every
    kernel from, besides the typed module's own binaries: they run with ``KSPEC_COMPILE=never`` (a kernel
    without a binary is an error, never a compile), empty kspec caches, and kspec's NVRTC blocked before
    anything else runs in them (:data:`NO_NVRTC`), as on workers that have none installed."""
    import tempfile

    from distributed import Nanny, Scheduler, SpecCluster

    directories = list(dict.fromkeys(str(Path(m.__file__).resolve().parent) for m in (sys.modules[__name__], *modules)))
    preload = [_ON_PATH.format(directories=directories)] + ([NO_NVRTC] if served is not None else [])
    env = {"DASK_KERNELS_DIR": str(kernels_dir)}
    if served is not None:
        env.update(KSPEC_BINARIES=str(Path(served).resolve()), KSPEC_COMPILE="never")
    workers = {}
    for k in range(gpus):
        own = dict(env, CUDA_VISIBLE_DEVICES=str(k))
        if served is not None:  # nothing from an earlier run's cache or call records
            own.update(KSPEC_CACHE_DIR=tempfile.mkdtemp(), KSPEC_MEMO_DIR=tempfile.mkdtemp())
        # memory_limit=0: Dask counts a chunk's bytes as the worker's memory whatever holds them; with its default
        # limit (the host's memory over its cores: 8 GB a worker on a 64-core host) it spilled CuPy chunks to
        # disk, a device-to-host copy and a write per chunk (4 s a 2 GiB chunk). The chunks live on the GPU.
        options = {"nthreads": threads, "env": own, "memory_limit": 0,
                   "preload": preload}
        workers[f"gpu{k}"] = {"cls": Nanny, "options": options}
    return SpecCluster(scheduler={"cls": Scheduler, "options": {"dashboard_address": None}}, workers=workers)


def start_workers(client: Any, gpus: int) -> None:
    """Wait for the cluster's workers."""
    client.wait_for_workers(gpus)


def kernel_loads() -> dict[str, Any]:
    """Run on a worker (``client.run``): its kspec kernel loads by source (``binary``: a build output;
    ``cache``: kspec's disk cache; ``compiled``: NVRTC), the names of the kernels it compiled, and whether
    NVRTC answers there."""
    try:
        from cuda.bindings import nvrtc

        nvrtc.nvrtcVersion()
        answer = "available"
    except ImportError:
        answer = "not installed"
    except RuntimeError:
        answer = "blocked"
    if "kspec" not in sys.modules:
        return {"loads": {}, "compiled": [], "nvrtc": answer}
    import kspec

    events = kspec.compile_log()
    counts = collections.Counter(e.source for e in events)
    return {"loads": dict(counts), "compiled": sorted({e.kernel for e in events if e.source == "compiled"}),
            "nvrtc": answer}


def print_workers(workers: dict[str, Any], loads: dict[str, Any] | None = None) -> None:
    """Per worker: the last timed run's task stream, then its kernel loads (:func:`kernel_loads`)."""
    for name, w in sorted(workers.items()):
        window = (f" (starting {w['lead_s'] * 1e3:.1f} ms after the submission, ending {w['trail_s'] * 1e3:.1f} ms "
                  "before the result)" if "lead_s" in w else "")
        print(f"  worker {name}: {w['tasks']} tasks computing {w['compute_s']:.3f} s of {w['span_s']:.3f} s{window}; "
              f"{w['transfers']} transfers in, {w['transfer_s']:.3f} s")
    for address, found in sorted((loads or {}).items()):
        print(f"  kernel loads on {address}: {found['loads']}, NVRTC {found['nvrtc']}"
              + (f", compiled {found['compiled']}" if found["compiled"] else ""))
