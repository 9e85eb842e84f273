"""The jit kernels the benchmarks time, written once and imported twice: with ``from kspec import jit`` and
with ``from cupyx import jit``. Both compilers read the source with ``inspect.getsource``, so it must live in
a real file: :func:`load` writes it into a directory and imports it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

KERNELS = '''
from {lib} import jit

def copy(x, y, size):
    tid = jit.blockIdx.x * jit.blockDim.x + jit.threadIdx.x
    ntid = jit.gridDim.x * jit.blockDim.x
    for i in range(tid, size, ntid):
        y[i] = x[i]

def saxpy(a, x, y, out, size):
    tid = jit.blockIdx.x * jit.blockDim.x + jit.threadIdx.x
    ntid = jit.gridDim.x * jit.blockDim.x
    for i in range(tid, size, ntid):
        out[i] = a * x[i] + y[i]

def fresh(fn):
    return jit.rawkernel()(fn)
'''


def load(lib: str, directory: str | Path) -> ModuleType:
    """The kernels above for ``lib`` ("kspec" or "cupyx"), imported from a file in ``directory``."""
    path = Path(directory) / f"kernels_{lib.replace('.', '_')}.py"
    path.write_text(KERNELS.format(lib=lib))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module
