"""The serving path stays lean (issue 14): a generated module whose kernels come from binaries imports no
Pydantic, Jinja, NVRTC, renderer or build machinery.

Each test runs a fresh interpreter (imports are per process) that imports a generated module, calls a
kernel served from its ``_binaries`` and then lists the forbidden modules it finds in ``sys.modules``.
On the CPU machine the call goes through a fake driver (tests/helpers/fake_driver.py, which decodes
the parameter buffer as libcuda would): import, binary lookup, sha256 check, module load and launch all
run for real up to the driver. The GPU test launches on the device and checks the result.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.child_env import child_env

REPO = Path(__file__).resolve().parents[2]

# cuda.pathfinder is not here: cuda.bindings.driver itself imports it (the floor every launch pays).
# _hashlib is OpenSSL (2.5-3 ms to load): binaries and keys are hashed with CPython's own sha256 (kspec/_digest.py).
FORBIDDEN = (
    "pydantic", "jinja2", "cuda.bindings.nvrtc", "cuda.core", "kspec.build", "kspec.codegen",
    "kspec.render._render", "kspec.render._env", "kspec.spec._models", "kspec.spec._params",
    "kspec.compiler._compile", "kspec.compiler._nvrtc", "kspec.compiler._options", "_hashlib",
    # the compiled call path is read from the cache as an image, not a CompiledProgram (a dataclass: ~3 ms)
    "kspec.compiler._program",
)


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated package for specs/elementwise.toml and specs/reduction.toml, with sm_90 binaries for the
    first (the tests call an elementwise kernel; the reduction module is imported, never called: building its
    binaries took half of this fixture's minute)."""
    root = tmp_path_factory.mktemp("served")
    out = root / "served_pkg"
    env = child_env(KSPEC_CACHE_DIR=str(root / "cache"))
    specs = [str(REPO / "specs" / "elementwise.toml"), str(REPO / "specs" / "reduction.toml")]
    subprocess.run([sys.executable, "-m", "kspec", "generate", *specs, "-o", str(out)], check=True, env=env, cwd=root)
    subprocess.run(
        [sys.executable, "-m", "kspec", "build", specs[0], "-o", str(out / "_binaries"), "--arch", "sm_90"],
        check=True, env=env, cwd=root, capture_output=True,
    )
    # the compiled call path, built once per machine (a cold cache builds it in the background, importing the
    # host compiler's modules): built here, so the served processes below find it as a deployed machine does
    warm = "from kspec.runtime import fastcall_module; assert fastcall_module(wait=True) is not None"
    subprocess.run([sys.executable, "-c", warm], check=True, env=env, cwd=root)
    return root


def _run(root: Path, script: str, cache: str = "cache") -> dict:
    env = child_env(root, REPO, KSPEC_CACHE_DIR=str(root / cache))
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


_FAKE_CALL = """
import json, sys
import numpy as np
import served_pkg.elementwise as ew

sys.path.insert(0, {tests!r})
from helpers.fake_driver import FakeDriver, fake_array
from kspec.runtime import _driver

# the entry points the build wrote, with each parameter's size, from the manifest (plain JSON)
binaries = ew.__file__.rsplit("/", 1)[0] + "/_binaries/"
manifest = json.load(open(binaries + "manifest.json"))
kernels = {{}}
for entry in manifest["entries"]:
    if "interface" not in entry:
        continue
    interface = json.load(open(binaries + entry["interface"]))
    for variant, abi in interface["interface"]["abi"]["@map"]:
        expression = interface["interface"]["variants"]["@map"]
        name = dict((json.dumps(k, sort_keys=True), v) for k, v in expression)[json.dumps(variant, sort_keys=True)]
        kernels[entry["lowered_names"][name]] = tuple(s["layout"]["size"] for s in abi["slots"])
drv = FakeDriver(kernels)
_driver._driver, _driver._failure, _driver._device_count = drv, None, 1

x, y, z = (fake_array(0x10000 * (i + 1), shape=(1024,)) for i in range(3))
ew.squared_diff(x, y, z)
forbidden = sorted(m for m in {forbidden!r} if m in sys.modules)
made = sorted(name for name, k in ew._KERNELS._kernels.items() if type(k).__name__ != "_Deferred")
others = sorted(m for m in ("kspec.kernels._reduction", "kspec.kernels.raw._module") if m in sys.modules)
interfaces = sorted(ew._KERNELS._kernels["squared_diff"]._binaries._interfaces)  # the interface files read
print(json.dumps({{"forbidden": forbidden, "loaded": len(drv.loaded), "launches": [l["kernel"] for l in drv.launches],
                  "made": made, "others": others, "interfaces": interfaces}}))
"""


def test_generated_module_served_from_binaries_imports_nothing_heavy(package: Path) -> None:
    result = _run(package, _FAKE_CALL.format(tests=str(REPO / "tests"), forbidden=FORBIDDEN))
    assert result["loaded"] == 1 and len(result["launches"]) == 1, result  # the binary was loaded and launched
    assert result["forbidden"] == [], f"the serving path imported {result['forbidden']}"


def test_generated_module_makes_only_the_kernels_it_calls(package: Path) -> None:
    """A generated module's kernel objects are made on first use: importing the package's elementwise module and
    calling one kernel makes that one; the package's other modules are not imported (its reduction module
    would load the reduction machinery), nor the machinery of a kind no module has (raw kernels here)."""
    result = _run(package, _FAKE_CALL.format(tests=str(REPO / "tests"), forbidden=FORBIDDEN))
    assert result["made"] == ["squared_diff"], result
    assert len(result["interfaces"]) == 1, result  # only the called kernel's launch interface was read
    assert result["others"] == [], result  # served_pkg.reduction stays unimported


_IMPORT_ONLY = """
import json, sys
import served_pkg.elementwise as ew
loaded = sorted(m for m in sys.modules if m.startswith("kspec"))
print(json.dumps({{"machinery": [m for m in {machinery!r} if m in sys.modules], "kspec_modules": len(loaded)}}))
"""
# what the first call of an elementwise kernel loads (planning, the call path, binary lookup, call records)
_MACHINERY = ("kspec.kernels._elementwise", "kspec.kernels._spec_kernel", "kspec.kernels.planning",
              "kspec.kernels.callpath", "kspec.kernels.records", "kspec.render", "kspec.runtime")


def test_importing_a_generated_module_loads_no_call_machinery(package: Path) -> None:
    """A deployed package's import costs about numpy and the driver bindings (issue [P4]: within 10% of them): its
    kernels' machinery loads at the first call (test_generated_module_served_from_binaries_imports_nothing_heavy
    serves that call), or ahead where a program asks (kspec.kernels.preload_call_path)."""
    result = _run(package, _IMPORT_ONLY.format(machinery=_MACHINERY))
    assert result["machinery"] == [], result
    assert result["kspec_modules"] <= 30, result  # ~25 today; the machinery alone is ~70


def test_second_process_needs_no_toolchain_or_template_hashing(package: Path) -> None:
    """The cache key's facts come from the on-disk memo (kspec/_memo.py): a process computing a key after
    one that wrote the memo loads neither NVRTC nor cuda.pathfinder."""
    script = (
        "import json, sys\nfrom kspec.compiler import cache_key, CompileOptions\n"
        "cache_key('x', options=CompileOptions(arch='sm_90'))\n"
        "print(json.dumps(sorted(m for m in ('cuda.bindings.nvrtc', 'cuda.pathfinder') if m in sys.modules)))"
    )
    env = child_env(KSPEC_MEMO_DIR=str(package / "memo"))
    for expect_clean in (False, True):
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
        if expect_clean:
            assert json.loads(out.stdout) == []


# A constructor call renders and compiles its kernel (Jinja, NVRTC) but needs no spec model: its arguments are
# checked by kspec.spec's plain path (kspec/spec/_ctor.py).
_NO_MODELS = ("pydantic", "kspec.spec._models", "kspec.spec._params", "kspec.spec._base", "kspec.spec._raw")

_CTOR_CALL = """
import json, sys
import numpy as np
import kspec
x = np.ones(4, np.float32)
ew = kspec.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = (x - y) * (x - y)", "sqd")
red = kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2norm")
sources = [ew.source(x, x), red.source(x)]
ew.compile(x, x, arch="sm_90")
print(json.dumps({{"rendered": ["sqd" in sources[0], "l2norm" in sources[1]],
                  "forbidden": sorted(m for m in {forbidden!r} if m in sys.modules)}}))
"""


def test_constructor_call_renders_and_compiles_without_pydantic(tmp_path: Path) -> None:
    """Issue 14's cold first call: construct, render, compile with empty caches; no Pydantic."""
    env = child_env(KSPEC_CACHE_DIR=str(tmp_path / "cache"), KSPEC_MEMO_DIR=str(tmp_path / "memo"))
    script = _CTOR_CALL.format(forbidden=_NO_MODELS)
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"rendered": [True, True], "forbidden": []}


@pytest.mark.gpu
def test_generated_module_launches_from_binaries_on_the_gpu(tmp_path: Path) -> None:
    import kspec.compiler

    root = tmp_path
    out = root / "served_pkg"
    env = child_env(KSPEC_CACHE_DIR=str(root / "cache"))
    spec = str(REPO / "specs" / "elementwise.toml")
    subprocess.run([sys.executable, "-m", "kspec", "generate", spec, "-o", str(out)], check=True, env=env, cwd=root)
    arch = kspec.get_device().arch
    assert arch in kspec.compiler.supported_archs()
    subprocess.run([sys.executable, "-m", "kspec", "build", spec, "-o", str(out / "_binaries"), "--arch", arch],
                   check=True, env=env, cwd=root, capture_output=True)
    script = f"""
import json, sys
import numpy as np
import served_pkg.elementwise as ew
import kspec
x = kspec.asarray(np.arange(4096, dtype=np.float32)); y = kspec.asarray(np.ones(4096, dtype=np.float32))
z = ew.squared_diff(x, y)
ok = bool(np.allclose(z.get(), (np.arange(4096, dtype=np.float32) - 1) ** 2))
print(json.dumps({{"ok": ok, "forbidden": sorted(m for m in {FORBIDDEN!r} if m in sys.modules)}}))
"""
    result = _run(root, script, cache="empty-cache")  # an empty cache: only the binary can serve it
    assert result == {"ok": True, "forbidden": []}


def test_serving_sha256_is_hashlibs() -> None:
    """kspec/_digest.py hashes binaries and keys without OpenSSL; the digests must be hashlib's."""
    import hashlib

    from kspec._digest import sha256, sha256_hex

    for data in (b"", b"abc", bytes(range(256)) * 400):
        assert sha256_hex(data) == hashlib.sha256(data).hexdigest()
    streamed = sha256()
    streamed.update(b"ab")
    streamed.update(b"c")
    assert streamed.digest() == hashlib.sha256(b"abc").digest()
    large = bytes(range(256)) * 4097  # past 1 MiB: OpenSSL's, the same digest
    assert sha256_hex(large) == hashlib.sha256(large).hexdigest()


def test_serving_hashes_with_openssl_only_where_it_pays() -> None:
    """A fresh process hashing small data leaves OpenSSL unloaded; one large binary (>= 1 MiB) is hashed with it
    (its hash repays the load); a process that imported hashlib already (CuPy's do) hashes everything with it."""
    code = ("import sys; from kspec._digest import sha256; h = sha256(b'x' * %d); "
            "print('_hashlib' in sys.modules, type(h).__module__ == '_hashlib')")

    def openssl(size: int, prelude: str = "") -> list[str]:
        done = subprocess.run([sys.executable, "-c", prelude + code % size], env=child_env(), capture_output=True,
                              text=True)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert openssl(40_000) == ["False", "False"]
    assert openssl(2 << 20) == ["True", "True"]
    assert openssl(10, "import hashlib; ") == ["True", "True"]


def test_compile_cache_hit_renders_nothing(tmp_path: Path) -> None:
    """A kernel whose binary is in the compile cache is found there by its specialization key: a second
    process renders nothing, so it imports neither Jinja nor NVRTC (nor OpenSSL); a changed body misses."""
    script = (
        "import json, sys, numpy as np, kspec\n"
        "from kspec.compiler import default_cache\n"
        "k = kspec.ElementwiseKernel('float32 x, float32 y', 'float32 z', 'z = (x - y) * %s', 'cached_sqd')\n"
        "k.compile(np.ones(4, np.float32), np.ones(4, np.float32), arch='sm_90')\n"
        "info = default_cache().info()\n"
        "heavy = ('jinja2', 'cuda.bindings.nvrtc', 'kspec.render._render', '_hashlib')\n"
        "print(json.dumps({'heavy': [m for m in heavy if m in sys.modules], 'entries': info.entries}))"
    )
    env = child_env(KSPEC_CACHE_DIR=str(tmp_path / "cache"))

    def run(body: str) -> dict:
        done = subprocess.run([sys.executable, "-c", script % body], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    first = run("(x - y)")
    assert "jinja2" in first["heavy"] and first["entries"] >= 1  # compiled: rendered with Jinja
    assert run("(x - y)") == {"heavy": [], "entries": first["entries"]}  # every variant from the cache
    changed = run("(y - x)")
    assert "jinja2" in changed["heavy"] and changed["entries"] > first["entries"]


def test_raw_module_cache_hit_renders_nothing(tmp_path: Path) -> None:
    """A raw module's binary is found in the compile cache by what determines its source (its code, the
    templates, the renderer: kspec.compiler.raw_source_key): a second process's first launch renders nothing,
    so it imports no Jinja; changed code misses and renders. On the CPU device (the host compiler's cache)."""
    script = (
        "import json, sys, numpy as np, kspec\n"
        "from kspec.compiler import default_cache\n"
        "m = kspec.RawModule(code='extern \"C\" __global__ void twice(float* y, int n) {'\n"
        "                    ' int i = threadIdx.x; if (i < n) y[i] = %s; }')\n"
        "y = kspec.asarray(np.arange(4, dtype=np.float32))\n"
        "m.get_function('twice')((1,), (4,), (y, np.int32(4)))\n"
        "heavy = ('jinja2', 'kspec.render._render')\n"
        "print(json.dumps({'heavy': [m for m in heavy if m in sys.modules], 'entries': default_cache().info().entries,\n"
        "                  'y': y.get().tolist()}))"
    )

    def run(body: str) -> Any:
        return _on_cpu_device(script % body, tmp_path)

    first = run("2 * y[i]")
    assert "jinja2" in first["heavy"] and first["y"] == [0.0, 2.0, 4.0, 6.0]
    again = run("2 * y[i]")
    assert again == {"heavy": [], "entries": first["entries"], "y": [0.0, 2.0, 4.0, 6.0]}
    changed = run("3 * y[i]")
    assert "jinja2" in changed["heavy"] and changed["entries"] > first["entries"] and changed["y"][1] == 3.0


def test_preload_loads_what_first_calls_import(tmp_path: Path) -> None:
    """kspec.cupy's enable() loads ahead (kspec.kernels.preload_call_path) what the first call of each kind of
    kernel would import: after it, a warm process's first elementwise, reduction and raw calls import none of
    kspec's modules but the CPU device's own (its host driver, and its fault guard's compiler, which a GPU does
    not load)."""
    script = (
        "import json, sys, numpy as np, kspec\n"
        "from kspec.kernels import preload_call_path\n"
        "preload_call_path()\n"
        "before = set(sys.modules)\n"
        "x = kspec.asarray(np.arange(8, dtype=np.float32))\n"
        "kspec.ElementwiseKernel('T x', 'T y', 'y = x * 3', 'preload_triple')(x)\n"
        "kspec.ReductionKernel('T x', 'T y', 'x', 'a + b', 'y = a', '0', 'preload_sum')(x)\n"
        "m = kspec.RawModule(code='extern \"C\" __global__ void neg(float* y) { y[threadIdx.x] = -y[threadIdx.x]; }')\n"
        "m.get_function('neg')((1,), (8,), (x,))\n"
        "print(json.dumps(sorted(m for m in set(sys.modules) - before if m.startswith('kspec'))))"
    )
    _on_cpu_device(script, tmp_path)  # the first process compiles; the second finds everything warm
    imported = _on_cpu_device(script, tmp_path)
    host_own = ("kspec.runtime.host", "kspec.compiler.host", "kspec.compiler._failure")
    assert [m for m in imported if not m.startswith(host_own)] == [], imported


_THREADED_FIRST_CALLS = """
import json, threading
import numpy as np
import generated.elementwise as ew, generated.reduction as red
import kspec
a = np.arange(4096, dtype=np.float32)
x, y, shifted = kspec.asarray(a), kspec.asarray(np.ones(4096, np.float32)), kspec.asarray(a - 2048)
calls = {"squared_diff": lambda: ew.squared_diff(x, y), "relu": lambda: ew.relu(shifted),
         "saxpy": lambda: ew.saxpy(np.float32(2.0), x, y), "l2norm": lambda: red.l2norm(x)}
barrier, got, errors = threading.Barrier(len(calls)), {}, []

def first_call(name):
    barrier.wait()  # every thread's first call at once: each loads the machinery the import left out
    try:
        got[name] = np.asarray(calls[name]().get()).tolist()
    except Exception as exc:
        errors.append(f"{name}: {exc!r}")

threads = [threading.Thread(target=first_call, args=(n,)) for n in calls]
for t in threads:
    t.start()
for t in threads:
    t.join()
want = {"squared_diff": ((a - 1) ** 2).tolist(), "relu": np.maximum(a - 2048, 0).tolist(),
        "saxpy": (2 * a + 1).tolist(), "l2norm": float(np.sqrt((a.astype(np.float64) ** 2).sum()))}
print(json.dumps({"errors": errors, "wrong": sorted(n for n in want if not np.allclose(got.get(n, np.nan), want[n], rtol=1e-5))}))
"""


def test_threads_making_their_first_calls_at_once_after_the_import(tmp_path: Path) -> None:
    """A generated module's import leaves each kind's machinery to the first call: threads whose first calls
    start together load it concurrently (Python's per-module import locks), and every result is right. Twice:
    compiling into an empty cache, then served from it."""
    for _ in range(2):
        assert _on_cpu_device(_THREADED_FIRST_CALLS, tmp_path) == {"errors": [], "wrong": []}


def _on_cpu_device(script: str, tmp_path: Path) -> Any:
    """The last line a fresh process running ``script`` on the CPU device prints, as JSON; its cache and memo
    directories under ``tmp_path`` (kept from one process to the next)."""
    env = child_env(KSPEC_CACHE_DIR=str(tmp_path / "cache"), KSPEC_MEMO_DIR=str(tmp_path / "memo"), KSPEC_DEVICE="cpu")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])
