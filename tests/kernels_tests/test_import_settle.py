"""kspec's first kernel call in a process collects the young generations once (kspec/_lazy.py, settle_imports):
the objects of the modules that call imported lazily leave them then, not in a later call's collection."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from helpers.child_env import child_env

SCRIPT = textwrap.dedent('''
    import gc, sys
    import numpy as np
    import kspec
    from kspec import _lazy
    asked = []  # the generations kspec asked the collector for
    collect = gc.collect
    gc.collect = lambda generation=2: (asked.append(generation), collect(generation))[1]
    if sys.argv[1] == "off":
        gc.disable()
    x = kspec.asarray(np.arange(64, dtype=np.float32))
    {make}
    assert not _lazy.imports_settled[0] and asked == []
    {call}
    assert _lazy.imports_settled[0]
    first = list(asked)
    {again}
    print(first, asked[len(first):])
''')

ELEMENTWISE = {
    "make": 'k = kspec.ElementwiseKernel("float32 x", "float32 z", "z = x + 1", "settle_add")',
    "call": 'assert np.array_equal(k(x).get(), np.arange(64, dtype=np.float32) + 1)',
    "again": 'k2 = kspec.ElementwiseKernel("float32 x", "float32 z", "z = x + 2", "settle_add2"); k2(x)',
}
RAW = {
    "make": 'k = kspec.RawKernel(r\'extern "C" __global__ void settle_raw(float* x) { x[threadIdx.x] += 1.0f; }\', "settle_raw")',
    "call": 'k((1,), (64,), (x,)); assert np.array_equal(x.get(), np.arange(64, dtype=np.float32) + 1)',
    "again": 'k((1,), (64,), (x,))',
}


@pytest.mark.parametrize("kernel", [ELEMENTWISE, RAW], ids=["elementwise", "raw"])
@pytest.mark.parametrize("collector", ["on", "off"])
def test_the_first_call_collects_the_young_generations_once(kernel, collector, tmp_path):
    env = child_env(KSPEC_DEVICE="cpu", KSPEC_MEMO_DIR=str(tmp_path / "memo"))
    done = subprocess.run([sys.executable, "-c", SCRIPT.format(**kernel), collector], env=env, capture_output=True,
                          text=True, timeout=600, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    first, later = done.stdout.split("] [")
    # the first call asks for the two young generations once; the later ones, and a program without a
    # collector, never
    assert (first + "]", "[" + later.strip()) == (("[1]" if collector == "on" else "[]"), "[]")
