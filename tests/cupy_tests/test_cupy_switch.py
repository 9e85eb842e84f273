"""kspec.cupy: the switch that puts kspec under code written for CuPy (enable / disable / enabled(), and the
``python -m kspec.cupy`` launcher with its children).

These run without CuPy or a GPU: each test starts a Python process whose path begins with a stand-in ``cupy``
package (the names and homes CuPy 14 binds its constructors under: ``cupy.X``, ``cupy._core.X``, ``cupyx.jit.X``,
a Cython-like extension module kspec must leave alone being out of reach here, a pure-Python library module
that imported names before the switch). tests/cupy_tests/test_cupy_switch_gpu.py runs the switch under the real CuPy."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers.child_env import child_path

ROOT = Path(__file__).resolve().parents[2]

FAKE = {
    "cupy/_util.py": """
        cleared = []
        def clear_memo():
            cleared.append(1)
    """,
    "cupy/__init__.py": """
        from cupy import _core, _util
        from cupy._core import ElementwiseKernel, ReductionKernel, RawKernel, RawModule
        def fuse(*args, **kwargs):
            return "cupy's fuse"
    """,
    "cupy/_core/__init__.py": """
        class ElementwiseKernel: pass
        class ReductionKernel: pass
        class RawKernel: pass
        class RawModule: pass
    """,
    # cupyx imports cupy first and reads its own names from cupyx.jit (a circular import if the swap, made
    # while cupy is imported, imported cupyx.jit there)
    "cupyx/__init__.py": """
        from cupyx._rsqrt import rsqrt
    """,
    "cupyx/_rsqrt.py": """
        from cupy._core import RawKernel  # CuPy's cupyx/_rsqrt.py imports cupy._core.core: cupy's first import
        rsqrt = object()
    """,
    "cupyx/jit/__init__.py": """
        from cupyx import rsqrt
        from cupyx.jit._interface import rawkernel, threadIdx
        only_in_cupy = object()
    """,
    "cupyx/jit/_interface.py": """
        def rawkernel(*args, **kwargs):
            return "cupy's jit"
        threadIdx = object()
        def transpile():  # CuPy's own machinery reads its own builtins (cupy.vectorize uses it)
            return rawkernel, threadIdx
    """,
    # CuPy's kernel cache: a backend object behind a module attribute, and its entries' format
    "cupy/cuda/__init__.py": "",
    "cupy/cuda/_compiler_cache.py": """
        import os
        class DiskKernelCacheBackend:
            def __init__(self, cache_dir=None):
                self._cache_dir = cache_dir or os.environ.get("CUPY_CACHE_DIR", os.path.expanduser("~/.cupy/kernel_cache"))
    """,
    "cupy/cuda/compiler.py": """
        from cupy.cuda._compiler_cache import DiskKernelCacheBackend
        class CompileException(Exception):
            def __init__(self, msg, source, name, options, backend="nvrtc"):
                self._msg, self.source, self.name, self.options, self.backend = msg, source, name, options, backend
                super().__init__()
        _kernel_cache_backend = DiskKernelCacheBackend()
        def _encode_cache_payload(names, cubin):
            return ("NE|" + ",".join(names) + "|").encode() + cubin
        def _decode_cache_payload(payload, count):
            if not payload.startswith(b"NE|"):
                return None
            names, cubin = payload[3:].split(b"|", 1)
            names = names.decode().split(",") if names else []
            return (names, cubin) if len(names) == count else None
    """,
    "touchy.py": "raise RuntimeError('a lazy module was loaded by reading it')",
    "thirdparty.py": """
        from cupy import ElementwiseKernel, RawKernel, fuse
        from cupyx.jit import rawkernel
        import cupy
        def build():
            return cupy.ElementwiseKernel
    """,
}


@pytest.fixture
def fake_cupy(tmp_path: Path) -> Path:
    for name, text in FAKE.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return tmp_path


def _env(fake: Path) -> dict[str, str]:
    """The environment without KSPEC_CUPY, the stand-in CuPy and the checkout first on the path (what is on it
    already kept after them: the GPU machine puts kspec's dependencies there)."""
    env = {k: v for k, v in os.environ.items() if k != "KSPEC_CUPY"}
    env["PYTHONPATH"] = child_path(fake, ROOT)
    return env


def run(fake: Path, code: str, *launcher: str) -> subprocess.CompletedProcess[str]:
    env = _env(fake)
    script = fake / "program.py"
    script.write_text(textwrap.dedent(code))
    cmd = [sys.executable, *launcher, str(script)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, cwd=fake)
    assert done.returncode == 0, done.stderr
    return done


def test_enable_rebinds_every_home_and_disable_restores(fake_cupy: Path) -> None:
    out = run(fake_cupy, """
        import cupy, cupy._core, cupyx.jit, thirdparty
        import importlib.util, sys
        spec = importlib.util.find_spec("touchy")  # a lazy module (LazyLoader): any attribute read loads it
        spec.loader = importlib.util.LazyLoader(spec.loader)
        sys.modules["touchy"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules["touchy"])
        sys.modules["not_a_module"] = [1, 2]  # libraries put other objects there too
        import kspec, kspec.cupy
        from kspec.fuse import fuse as kfuse
        originals = {n: getattr(cupy, n) for n in kspec.cupy.CONSTRUCTORS}
        kspec.cupy.enable()
        assert kspec.cupy.is_enabled()
        for n in ("ElementwiseKernel", "ReductionKernel", "RawKernel", "RawModule"):
            assert getattr(cupy, n) is getattr(kspec, n), n
            assert getattr(cupy._core, n) is getattr(kspec, n), n
        assert cupy.fuse is kfuse
        assert cupyx.jit.rawkernel is kspec.jit.rawkernel and cupyx.jit.threadIdx is kspec.jit.threadIdx
        assert not hasattr(kspec.jit, "only_in_cupy") and cupyx.jit.only_in_cupy is not None  # CuPy's own, kept
        import cupyx.jit._interface as jit_impl
        assert jit_impl.transpile() == (jit_impl.rawkernel, jit_impl.threadIdx) and jit_impl.rawkernel() == "cupy's jit"
        # a library that imported the names before the switch, and one that reads them at call time
        assert thirdparty.ElementwiseKernel is kspec.ElementwiseKernel and thirdparty.fuse is kfuse
        assert thirdparty.rawkernel is kspec.jit.rawkernel and thirdparty.build() is kspec.ElementwiseKernel
        # isinstance checks written against CuPy's names hold for what the library builds
        k = cupy.ElementwiseKernel("float32 x", "float32 y", "y = x", "copy")
        assert isinstance(k, cupy.ElementwiseKernel) and isinstance(k, thirdparty.ElementwiseKernel)
        assert cupy._util.cleared == [1], "CuPy's memo of built kernels is cleared: they rebuild through kspec"
        kspec.cupy.enable()  # twice: nothing more changes
        kspec.cupy.disable()
        assert cupy._util.cleared == [1, 1]
        assert not kspec.cupy.is_enabled()
        assert {n: getattr(cupy, n) for n in kspec.cupy.CONSTRUCTORS} == originals
        assert cupy._core.RawKernel is originals["RawKernel"] and thirdparty.RawKernel is originals["RawKernel"]
        assert cupyx.jit.rawkernel() == "cupy's jit" and thirdparty.fuse() == "cupy's fuse"
        with kspec.cupy.enabled():
            assert cupy.RawModule is kspec.RawModule
        assert cupy.RawModule is originals["RawModule"]
        print("ok")
    """)
    assert out.stdout.strip() == "ok"


def test_enable_leaves_cupyx_to_the_program_and_swaps_its_jit_on_import(fake_cupy: Path) -> None:
    """``enable()`` imports no ``cupyx`` (CuPy's import does not: a program that never uses it never pays for
    it); a later ``import cupyx.jit`` (or ``from cupyx import jit``) finds kspec's names there; after
    ``disable()`` an import finds CuPy's."""
    out = run(fake_cupy, """
        import sys
        import cupy
        import kspec, kspec.cupy
        kspec.cupy.enable()
        assert "cupyx" not in sys.modules and "cupyx.jit" not in sys.modules, sorted(m for m in sys.modules if "cupyx" in m)
        from cupyx import jit
        assert jit.rawkernel is kspec.jit.rawkernel and jit.threadIdx is kspec.jit.threadIdx
        import thirdparty  # imports the names after the swap: kspec's
        assert thirdparty.rawkernel is kspec.jit.rawkernel
        kspec.cupy.disable()
        assert jit.rawkernel() == "cupy's jit"
        print("ok")
    """)
    assert out.stdout.strip() == "ok"


def test_raw_modules_follow_cupys_kernel_cache(fake_cupy: Path) -> None:
    """Where a program pointed CuPy's kernel cache (a backend of its own, another directory), kspec's raw modules
    are kept there too, in CuPy's entry format; CuPy's default directory is left alone; ``cupy._util.clear_memo()``
    also forgets kspec's constructor calls."""
    out = run(fake_cupy, """
        import cupy, cupy.cuda.compiler as compiler
        import kspec, kspec.cupy
        from kspec import kernels
        from kspec.kernels.records import _constructor_memo
        class Backend:
            def __init__(self):
                self.saved = {}
            def load(self, name):
                return self.saved.get(name)
            def save(self, name, payload, source):
                self.saved[name] = payload
        kspec.cupy.enable()
        assert kernels.module_cache() is None, "CuPy's default directory: kspec's cache is the only one"
        backend = compiler._kernel_cache_backend = Backend()
        cache = kernels.module_cache()
        cache.save("k1", "sm_90", b"BIN", {"b<int>": "_Zb", "a<int>": "_Za"}, "source")
        ((name, payload),) = backend.saved.items()
        assert name == "kspec_k1_sm_90.cubin", name
        assert compiler._decode_cache_payload(payload, 2) == (["_Za", "_Zb"], b"BIN"), "names in sorted order"
        assert cache.load("k1", "sm_90", ("b<int>", "a<int>")) == (b"BIN", {"a<int>": "_Za", "b<int>": "_Zb"})
        assert cache.load("k1", "sm_90", ("a<int>",)) is None, "another set of names is a miss"
        backend.saved[name] = b"BIN"
        assert cache.load("k1", "sm_90", ("b<int>", "a<int>")) is None, "a bare binary is not read as names"
        cache.save("k2", "sm_90", b"PLAIN", {}, "source")
        assert cache.load("k2", "sm_90", ()) == (b"PLAIN", {})
        assert cache.load("k2", "host", ()) is None, "the CPU device's binaries are kspec's only"
        compiler._kernel_cache_backend = compiler.DiskKernelCacheBackend("/tmp/elsewhere")
        assert kernels.module_cache() is not None, "another directory takes part"
        cupy.RawModule(code='extern "C" __global__ void f() {}')
        assert len(_constructor_memo.RAW_MODULES) > 0
        cupy._util.clear_memo()
        assert len(_constructor_memo.RAW_MODULES) == 0 and cupy._util.cleared == [1, 1]
        kspec.cupy.disable()
        assert kernels.module_cache() is None and not hasattr(cupy._util.clear_memo, "__wrapped__")
        print("ok")
    """)
    assert out.stdout.strip() == "ok"


def test_failed_compiles_are_cupys_compile_exception_while_enabled(fake_cupy: Path) -> None:
    """Code written for CuPy that catches CuPy's CompileException to fall back (cuCIM's filters) catches kspec's
    failed compiles while the switch is on; kspec's own handlers still see a CompileError."""
    from helpers.device_arrays import host_compiler_missing

    if host_compiler_missing():
        pytest.skip(host_compiler_missing())
    out = run(fake_cupy, """
        import numpy as np
        import cupy, cupy.cuda.compiler as compiler
        import kspec, kspec.cupy
        kspec.use_device("cpu")
        def build_and_call(tag):
            k = kspec.ElementwiseKernel("float32 x", "float32 y", "y = no_such_function(x)", "broken_" + tag)
            k(np.ones(4, np.float32), np.empty(4, np.float32))
        kspec.cupy.enable()
        try:
            build_and_call("a")
            raise AssertionError("compiled")
        except compiler.CompileException as exc:
            assert isinstance(exc, kspec.CompileError) and "no_such_function" in exc.log
            assert exc.name == exc.kernel and "no_such_function" in str(exc) and exc.backend == "nvrtc"
        kspec.cupy.disable()
        try:
            build_and_call("b")
        except compiler.CompileException:
            raise AssertionError("CuPy's class after disable()")
        except kspec.CompileError as exc:
            assert type(exc) is kspec.CompileError
        print("ok")
    """)
    assert out.stdout.strip() == "ok"


def test_modules_imported_after_enable_get_kspecs_names(fake_cupy: Path) -> None:
    out = run(fake_cupy, """
        import cupy, kspec, kspec.cupy
        kspec.cupy.enable()
        import thirdparty
        assert thirdparty.RawKernel is kspec.RawKernel and thirdparty.rawkernel is kspec.jit.rawkernel
        print("ok")
    """)
    assert out.stdout.strip() == "ok"


def test_launcher_swaps_where_a_module_name_is_blocked(fake_cupy: Path) -> None:
    """A program may block a module (``sys.modules[name] = None``, as benchmarks/helpers/_no_nvrtc does with kspec's NVRTC):
    the swap on CuPy's import, before cupyx.jit is imported, reads past it."""
    out = run(fake_cupy, """
        import sys
        sys.modules["cuda.bindings.nvrtc"] = None
        import cupy, kspec
        assert cupy.RawKernel is kspec.RawKernel
        print("ok")
    """, "-m", "kspec.cupy")
    assert out.stdout.strip() == "ok"


CHILD_CHECK = """
    import sys, subprocess, os
    assert "cupy" not in sys.modules, "the launcher must not import CuPy before the program does"
    import cupyx  # imports cupy, whose import swaps the constructors; cupyx.jit's names follow its own import
    import cupyx.jit, kspec.jit
    assert cupyx.jit.rawkernel is kspec.jit.rawkernel
    import thirdparty, kspec
    assert thirdparty.RawKernel is kspec.RawKernel, "the program's CuPy import swapped"
    code = "import thirdparty, kspec.fuse; print(thirdparty.fuse is kspec.fuse.fuse, os.environ.get('KSPEC_CUPY'))"
    child = subprocess.run([sys.executable, "-c", "import os; " + code], capture_output=True, text=True, check=True)
    print("child", child.stdout.strip())
"""


def test_launcher_swaps_on_import_in_the_program_and_its_children(fake_cupy: Path) -> None:
    out = run(fake_cupy, CHILD_CHECK, "-m", "kspec.cupy")
    assert out.stdout.strip() == "child True 1"


def test_launcher_runs_a_module_and_keeps_a_sitecustomize_it_shadows(fake_cupy: Path) -> None:
    (fake_cupy / "sitecustomize.py").write_text("import builtins\nbuiltins.SITE_RAN = True\n")
    (fake_cupy / "mainmod.py").write_text(
        "import sys, builtins, thirdparty, kspec\n"
        "assert thirdparty.ElementwiseKernel is kspec.ElementwiseKernel\n"
        "print('module', sys.argv[1:], getattr(builtins, 'SITE_RAN', False))\n"
    )
    env = _env(fake_cupy)
    inner = "import subprocess, sys; print(subprocess.run([sys.executable, '-m', 'mainmod', 'a'], capture_output=True, text=True).stdout)"
    (fake_cupy / "outer.py").write_text(inner)
    done = subprocess.run([sys.executable, "-m", "kspec.cupy", "-m", "mainmod", "x", "y"], env=env, capture_output=True,
                          text=True, timeout=120, cwd=fake_cupy)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "module ['x', 'y'] True"
    child = subprocess.run([sys.executable, "-m", "kspec.cupy", "outer.py"], env=env, capture_output=True, text=True,
                           timeout=120, cwd=fake_cupy)  # fmt: skip
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "module ['a'] True", "a child started by the program swaps and still runs the user's sitecustomize"


def test_launcher_without_a_program_prints_usage() -> None:
    done = subprocess.run([sys.executable, "-m", "kspec.cupy"], capture_output=True, text=True, timeout=60,
                          env=_env(ROOT))  # fmt: skip
    assert done.returncode == 2 and "usage: python -m kspec.cupy" in done.stderr
