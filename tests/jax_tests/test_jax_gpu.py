"""kspec kernels inside ``jax.jit`` on the GPU: XLA launches them on its stream from the same binaries.

Checked against kspec's own eager calls on the same JAX arrays (kspec takes JAX arrays eagerly through DLPack):
a generated module's kernels, a constructor ElementwiseKernel, a ReductionKernel (one that splits and needs a
workspace too) and fused functions, inside one jitted function. A second call neither traces, plans nor loads
anything (the module loader is made to fail after the first call). vmap re-plans on the batched shapes. Calls
chained with JAX's own operations on large arrays stay ordered (one stream). Kernels from a wheel's CUBINs run
inside jax.jit with NVRTC blocked and an empty cache; lazily compiled ones too (a fresh cache). The Python
fallback handler launches the same way. Skipped without JAX's CUDA backend.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

import kspec  # noqa: E402
import kspec.jax as kj  # noqa: E402
from helpers.child_env import child_env  # noqa: E402
from helpers.jax_cases import fused_mul_add, fused_rowdot  # noqa: E402

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parents[2]

ADD2 = kspec.ElementwiseKernel("T x, T y", "T z", "z = x + 2 * y", "jaxgpu_add2")
SUMSQ = kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "jaxgpu_sumsq")




@pytest.fixture(autouse=True, scope="module")
def _jax_gpu() -> None:
    try:
        jax.devices("gpu")
    except RuntimeError as exc:
        pytest.skip(f"JAX has no GPU backend here: {exc}")


def _generated():
    sys.path.insert(0, str(REPO))
    try:
        from generated import elementwise, reduction
    finally:
        sys.path.remove(str(REPO))
    return elementwise, reduction


def _host(result):
    if isinstance(result, tuple):
        return tuple(_host(r) for r in result)
    return np.asarray(result.get() if hasattr(result, "get") else result)


def _data(shape, seed=0):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def test_jit_of_every_kind_equals_eager_kspec():
    elementwise, reduction = _generated()
    x, y, m = _data((1000,)), _data((1000,), 1), _data((64, 300), 2)

    @jax.jit
    def f(x, y, m):
        return (kj.call(elementwise.squared_diff_generic, x, y), kj.call(ADD2, x, y), kj.call(SUMSQ, m, axis=1),
                kj.call(fused_mul_add, x, y), kj.call(fused_rowdot, m, m), kj.call(reduction.l2norm, m, axis=0))  # fmt: skip

    got = [np.asarray(r) for r in f(x, y, m)]
    want = [_host(elementwise.squared_diff_generic(x, y)), _host(ADD2(x, y)), _host(SUMSQ(m, axis=1)),
            _host(fused_mul_add(x, y)), _host(fused_rowdot(m, m)), _host(reduction.l2norm(m, axis=0))]  # fmt: skip
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_split_reduction_with_a_workspace():
    from kspec.kernels import ArraySpec

    m = _data((1 << 21,), 3)  # one long row: two passes, partials in the workspace
    plan = SUMSQ.plan_launch(ArraySpec(m.shape, "float32"))
    assert plan.workspace > 0 and len(plan.steps) >= 2, "this shape no longer splits on this GPU: pick one that does"
    got = jax.jit(lambda a: kj.call(SUMSQ, a))(m)
    np.testing.assert_allclose(np.asarray(got), _host(SUMSQ(m)), rtol=1e-4)


def test_second_call_traces_plans_and_loads_nothing(monkeypatch):
    from kspec.runtime import LoadedModule

    traces, plans = [], []
    plan_launch = ADD2.plan_launch

    class Counting:
        name = "counting"
        output_specs = staticmethod(ADD2.output_specs)

        @staticmethod
        def plan_launch(*args, **kwargs):
            plans.append(1)
            return plan_launch(*args, **kwargs)

    kernel = Counting()

    @jax.jit
    def f(a, b):
        traces.append(1)
        return kj.call(kernel, a, b) * 2

    x, y = _data((4096,)), _data((4096,), 1)
    first = np.asarray(f(x, y))
    assert (len(traces), len(plans), f._cache_size()) == (1, 1, 1)

    def no_load(*args, **kwargs):
        raise AssertionError("a module was loaded again")

    monkeypatch.setattr(LoadedModule, "__init__", no_load)
    monkeypatch.setattr(Path, "read_bytes", no_load)
    for _ in range(5):
        np.testing.assert_array_equal(np.asarray(f(x, y)), first)
    assert (len(traces), len(plans), f._cache_size()) == (1, 1, 1)


def test_stream_order_with_jax_operations():
    x, y = _data((1 << 22,)), _data((1 << 22,), 1)

    @jax.jit
    def chain(x, y):
        for _ in range(4):
            x = kj.call(ADD2, x, y)  # x + 2y on XLA's stream
            x = jnp.sin(x) * 0.5  # XLA's own kernel, reading what kspec wrote
        return x

    want_x, want_y = np.asarray(x), np.asarray(y)
    for _ in range(4):
        want_x = np.sin(want_x + 2 * want_y) * 0.5
    np.testing.assert_allclose(np.asarray(chain(x, y)), want_x, rtol=1e-4, atol=1e-5)


def test_vmap_on_the_gpu():
    x, y, m = _data((8, 100)), _data((100,), 1), _data((8, 16, 32), 2)
    got = jax.jit(jax.vmap(lambda a, b: kj.call(ADD2, a, b), in_axes=(0, None)))(x, y)
    np.testing.assert_allclose(np.asarray(got), np.asarray(x) + 2 * np.asarray(y), rtol=1e-6)
    got = jax.vmap(lambda a: kj.call(SUMSQ, a, axis=0))(m)
    np.testing.assert_allclose(np.asarray(got), (np.asarray(m) ** 2).sum(axis=1), rtol=1e-4)


def _run(script: str, *first: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``script`` in a fresh process, ``first`` on its path ahead of the checkout."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=REPO, env=child_env(*first, REPO, **env),
                          capture_output=True, text=True, timeout=600)  # fmt: skip


def test_lazily_compiled_kernels_from_an_empty_cache(tmp_path):
    done = _run("""
    import numpy as np, jax, jax.numpy as jnp
    import kspec, kspec.jax as kj
    k = kspec.ElementwiseKernel("T x", "T y", "y = x * x + 1", "jaxgpu_fresh")
    x = jnp.arange(100, dtype=jnp.float32)
    assert np.allclose(np.asarray(jax.jit(lambda a: kj.call(k, a))(x)), np.arange(100) ** 2 + 1)
    assert any(e.kernel == "jaxgpu_fresh" and e.source == "compiled" for e in kspec.compile_log()), kspec.compile_log()
    print("ok")
    """, KSPEC_CACHE_DIR=str(tmp_path / "empty"))
    assert done.returncode == 0 and "ok" in done.stdout, done.stdout + done.stderr


def test_python_fallback_handler_on_the_gpu():
    done = _run("""
    import numpy as np, jax, jax.numpy as jnp
    import kspec, kspec.jax as kj
    from kspec.jax import _library
    k = kspec.ElementwiseKernel("T x, T y", "T z", "z = x + 2 * y", "jaxgpu_py")
    x = jnp.arange(1000, dtype=jnp.float32)
    assert np.array_equal(np.asarray(jax.jit(lambda a: kj.call(k, a, a))(x)), np.arange(1000) * 3)
    assert _library.handler().kind == "python"
    print("ok")
    """, KSPEC_JAX_HANDLER="python")
    assert done.returncode == 0 and "ok" in done.stdout, done.stdout + done.stderr


def test_command_buffer_compatible_handler_gives_the_same_results():
    """KSPEC_JAX_COMMAND_BUFFER=1 (the default): XLA may capture the kspec launches into its CUDA graphs; results stay right
    when the buffers change between calls (XLA captures again) and across many calls."""
    done = _run("""
    import numpy as np, jax, jax.numpy as jnp
    import kspec, kspec.jax as kj
    k = kspec.ElementwiseKernel("T x, T y", "T z", "z = x + 2 * y", "jaxgpu_cmdbuf")

    @jax.jit
    def chain(x, y):
        for _ in range(8):
            x = jnp.sin(kj.call(k, x, y))
        return x

    for seed in range(3):
        rng = np.random.default_rng(seed)
        hx, hy = rng.standard_normal(1 << 16).astype(np.float32), rng.standard_normal(1 << 16).astype(np.float32)
        want = hx
        for _ in range(8):
            want = np.sin(want + 2 * hy)
        for _ in range(20):
            got = chain(jnp.asarray(hx), jnp.asarray(hy))
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5)
    print("ok")
    """, KSPEC_JAX_COMMAND_BUFFER="1")
    assert done.returncode == 0 and "ok" in done.stdout, done.stdout + done.stderr


_NO_KSPEC_NVRTC = """
import importlib.abc, sys

class _NoNvrtc(importlib.abc.MetaPathFinder):  # kspec's way to NVRTC (JAX's CUDA plugin may load its own)
    def find_spec(self, name, path=None, target=None):
        if name == "cuda.bindings.nvrtc":
            raise ImportError(f"{name} is blocked: this process must not compile")
        return None

sys.meta_path.insert(0, _NoNvrtc())
"""


def test_wheel_kernels_inside_jit_without_nvrtc(tmp_path):
    """examples/deploy's wheel (its CUBINs) in a fresh process with kspec's NVRTC blocked, KSPEC_COMPILE=never and
    an empty cache: its kernels run inside jax.jit, each loaded from the wheel's binaries."""
    from helpers.deploy_build import served_by_example

    arch = kspec.get_device().arch
    if not served_by_example(arch):
        pytest.skip(f"examples/deploy ships no CUBIN that runs on this {arch} device")
    wheel = _wheel(tmp_path)
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    done = _run(_NO_KSPEC_NVRTC + textwrap.dedent("""
    import numpy as np, jax, jax.numpy as jnp
    import kspec, kspec.jax as kj
    from deploy_example.kernels import ops
    rng = np.random.default_rng(0)
    hx, hy = rng.standard_normal(5000).astype(np.float32), rng.standard_normal(5000).astype(np.float32)
    m = rng.standard_normal((64, 1000)).astype(np.float32)

    @jax.jit
    def f(x, y, m):
        return kj.call(ops.scaled_diff, x, y, 2.5), kj.call(ops.l2norm, m, axis=1)

    z, n = f(jnp.asarray(hx), jnp.asarray(hy), jnp.asarray(m))
    np.testing.assert_allclose(np.asarray(z), np.float32(2.5) * (hx - hy), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(n), np.linalg.norm(m, axis=1), rtol=1e-4)
    loads = {(e.kernel, e.source) for e in kspec.compile_log()}
    assert loads and all(source == "binary" for _kernel, source in loads), loads
    assert "cuda.bindings.nvrtc" not in sys.modules
    print("ok")
    """), site, KSPEC_CACHE_DIR=str(tmp_path / "empty-cache"), KSPEC_COMPILE="never")
    assert done.returncode == 0 and "ok" in done.stdout, done.stdout + done.stderr


def _wheel(tmp_path: Path) -> Path:
    """examples/deploy's wheel: KSPEC_DEPLOY_WHEEL, else built here (as tests/hatch_tests/test_deploy_gpu.py does)."""
    import importlib.util

    from helpers.deploy_build import build, build_env, copy_example, entry_point_shim, one

    given = os.environ.get("KSPEC_DEPLOY_WHEEL")
    if given:
        return Path(given)
    for module in ("build", "hatchling"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"KSPEC_DEPLOY_WHEEL is not set and {module!r} is not installed to build examples/deploy")
    env = build_env(entry_point_shim(tmp_path / "entry-point"), CUDA_VISIBLE_DEVICES="")
    build(copy_example(tmp_path / "deploy"), tmp_path / "dist", "--wheel", env=env)
    return one(tmp_path / "dist", "*.whl")
