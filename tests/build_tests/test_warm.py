"""Warming (issue [Y]): ``kspec warm`` / ``kspec.warm`` fill the binary cache with every declared
specialization, each launch variant as a call looks it up, so that ``KSPEC_COMPILE=never`` serves every
declared call; raw specs of CUDA source as one whole module each, as their kernel objects compile them.
Checked on the CPU device (``--arch host``) by running the kernels in a fresh interpreter, and for ``sm_90``
(NVRTC needs no GPU) through ``compile(arch=...)``, which takes the calls' compile path.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kspec
from kspec.build import plan_warm
from kspec.cli import main
from kspec.compiler import host_compiler
from kspec.spec import load_library, with_backwards

from helpers.child_env import child_env

ROOT = Path(__file__).resolve().parents[2]
ELEMENTWISE = ROOT / "specs" / "elementwise.toml"


def _host_compiler_or_skip() -> None:
    try:
        host_compiler()
    except kspec.HostCompilerNotFoundError as exc:
        pytest.skip(f"no host C++ compiler: {exc}")


def _env(cache: Path, **extra: str) -> dict[str, str]:
    return child_env(unset=("KSPEC_COMPILE", "KSPEC_LOG", "KSPEC_DEVICE"), **{"KSPEC_CACHE_DIR": str(cache), **extra})


def _kspec(cache: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kspec", *argv], env=_env(cache), cwd=ROOT, capture_output=True,
                          text=True, timeout=900)


def _python(cache: Path, script: str, **env: str) -> dict:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=_env(cache, **env), cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


# Four of specs/elementwise.toml's kernels, as they are there: one with gradients (its backwards and sums are
# warmed too), one generic over six dtypes, one over a pair of type placeholders, one with scalar inputs. The whole
# file is 688 cache entries for host and sm_90 (about four minutes of this suite on two cores); these are 240, and
# the whole file's specializations are built for the host by tests/runtime_tests/test_cpu_device_runtime.py and for every
# default arch by the README's main job.
WARMED = ("squared_diff", "squared_diff_generic", "add_reverse", "clamp")


def _warmed_specs(directory: Path) -> Path:
    head, *blocks = re.split(r"(?m)^(?=\[\[kernel\]\])", ELEMENTWISE.read_text())
    kept = [b for b in blocks if re.search(r'(?m)^name = "([^"]+)"', b).group(1) in WARMED]
    assert len(kept) == len(WARMED), "a warmed kernel left specs/elementwise.toml"
    path = directory / "elementwise_part.toml"
    path.write_text(head + "".join(kept))
    return path


@pytest.fixture(scope="module")
def warmed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    """:data:`WARMED` of specs/elementwise.toml warmed for host and sm_90 by the CLI into a fresh cache:
    (cache, stdout, the spec file)."""
    _host_compiler_or_skip()
    root = tmp_path_factory.mktemp("warm")
    specs = _warmed_specs(root)
    done = _kspec(root / "cache", "warm", str(specs), "--arch", "host", "--arch", "sm_90", "-j", "2")
    assert done.returncode == 0, done.stderr
    return root / "cache", done.stdout, specs


def _entries(specs: Path, archs: list[str]) -> int:
    return len(plan_warm(load_library([str(specs)]).values(), archs).units)


def test_warm_compiles_every_variant_of_every_declared_specialization(warmed):
    cache, out, specs = warmed
    total = _entries(specs, ["host", "sm_90"])
    kernels = len(with_backwards(load_library([str(specs)]).values()))  # their backwards and sums too
    assert kernels > len(WARMED)
    assert f"{kernels} kernels, {total} cache entries for host,sm_90" in out
    assert f"{total} compiled, 0 already cached, 0 failed" in out
    assert f"binary cache {cache}" in out


def test_warm_builds_the_compiled_call_path(warmed):
    """kspec's own call path for this interpreter goes into the same cache: a process started with
    KSPEC_COMPILE=never (which builds nothing at run time) loads it at once."""
    cache, out, _specs = warmed
    assert "kspec's compiled call path: cached for this interpreter" in out
    script = "import json; from kspec.runtime import fastcall_module; print(json.dumps(fastcall_module() is not None))"
    assert _python(cache, script, KSPEC_COMPILE="never") is True


def test_a_second_warm_finds_everything_cached(warmed):
    cache, _out, specs = warmed
    done = _kspec(cache, "warm", str(specs), "--arch", "sm_90,host", "-v")
    assert done.returncode == 0, done.stderr
    total = _entries(specs, ["host", "sm_90"])
    assert f"0 compiled, {total} already cached, 0 failed" in done.stdout
    lines = [line for line in done.stdout.splitlines() if line.startswith(("cached ", "compiled ", "FAILED "))]
    assert len(lines) == total and all(line.startswith("cached ") for line in lines)


_SERVE = """
import json
import numpy as np
import kspec
from kspec.build import plan_build
from kspec.compiler import compile_log
from kspec.spec import load_library

specs = load_library([{path!r}])
kernels = kspec.load({path!r})
calls = 0
for unit in plan_build(specs.values(), ["host"]).units:
    if unit.spec.name not in kernels:
        continue  # a backward or a gradient sum: kspec.grad calls those (tests/grad_tests/test_grad.py serves them)
    spec, kernel = unit.spec, kernels[unit.spec.name]
    dtype = lambda p: unit.types.get(p.type, p.type)
    if any(dtype(p) == "bfloat16" for p in spec.in_params):
        continue  # NumPy has no bfloat16: that instantiation is checked for sm_90 only
    for strided in (False, True):  # two launch variants of each specialization
        args = [np.dtype(dtype(p)).type(1).item() if p.name in unit.scalars else
                (np.ones(16, dtype=dtype(p))[::2] if strided else np.ones(8, dtype=dtype(p))) for p in spec.in_params]
        outs = [np.zeros(8, dtype=dtype(p)) for p in spec.out_params]
        kernel(*args, *outs)
        calls += 1
sources = sorted({{e.source for e in compile_log()}})
forbidden = ""
try:
    kernels.squared_diff_generic(np.ones(4, np.int16), np.ones(4, np.int16))
except kspec.CompileForbiddenError as exc:
    forbidden = str(exc)
print(json.dumps({{"calls": calls, "sources": sources, "events": len(compile_log()), "forbidden": forbidden}}))
"""


def test_never_serves_every_declared_call_on_the_cpu_device(warmed):
    cache, _out, specs = warmed
    found = _python(cache, _SERVE.format(path=str(specs)), KSPEC_DEVICE="cpu", KSPEC_COMPILE="never")
    # a load per variant: the contiguous and the strided calls of a specialization take different ones
    assert found["calls"] > 20 and found["events"] > found["calls"] // 2
    assert found["sources"] == ["cache"]
    assert "squared_diff_generic" in found["forbidden"] and "T=int16" in found["forbidden"]


_SM90 = """
import json
import numpy as np
import kspec
from kspec.build import plan_build
from kspec.compiler import compile_log
from kspec.spec import load_library

specs = load_library([{path!r}])
kernels = kspec.load({path!r})
for unit in plan_build(specs.values(), ["sm_90"]).units:
    spec = unit.spec
    if spec.name not in kernels:
        continue  # a backward or a gradient sum
    # NumPy stand-ins give the dtypes (only dtype and ndim are read); NumPy has no bfloat16
    dtype = lambda p: unit.types.get(p.type, p.type)
    if "bfloat16" in unit.types.values():
        continue
    args = [np.dtype(dtype(p)).type(1).item() if p.name in unit.scalars else np.ones(4, dtype=dtype(p))
            for p in spec.in_params]
    outs = [np.zeros(4, dtype=dtype(p)) for p in spec.out_params]
    kernels[spec.name].compile(*args, *outs, arch="sm_90")
print(json.dumps({{"sources": sorted({{e.source for e in compile_log()}}), "events": len(compile_log())}}))
"""


def test_sm_90_entries_are_the_ones_calls_look_up(warmed):
    """``compile(arch=)`` compiles each variant through the calls' path (kspec.compiler.compile_program),
    which logs where it found it: every one is a cache hit."""
    cache, _out, specs = warmed
    found = _python(cache, _SM90.format(path=str(specs)), KSPEC_COMPILE="never")
    assert found["events"] > 20 and found["sources"] == ["cache"]


def test_kspec_warm_takes_a_generated_module_on_the_cpu_device(tmp_path):
    _host_compiler_or_skip()
    spec = tmp_path / "tiny.toml"
    spec.write_text('schema = 1\n\n[[kernel]]\nkind = "elementwise"\nname = "tiny_add"\nin_params = "T x, T y"\n'
                    'out_params = "T z"\noperation = "z = x + y"\ninstantiations = [{T = ["float32", "int64"]}]\n')
    package = tmp_path / "tinypkg"
    done = _kspec(tmp_path / "cache", "generate", str(spec), "-o", str(package))
    assert done.returncode == 0, done.stderr
    found = _python(tmp_path / "cache", f"""
        import json, sys
        import numpy as np
        sys.path.insert(0, {str(tmp_path)!r})
        import kspec
        from kspec.compiler import compile_log
        import tinypkg.tiny as generated
        first = kspec.warm(generated)
        second = kspec.warm(generated, jobs=1)
        kspec.compile_policy("never")
        z = generated.tiny_add(np.arange(4, dtype=np.int64), np.ones(4, dtype=np.int64))
        w = generated.tiny_add(np.ones(4, dtype=np.float32)[::1], np.ones(4, dtype=np.float32))
        print(json.dumps({{"first": [first.compiled, first.cached], "second": [second.compiled, second.cached],
                          "archs": first.archs, "z": z.tolist(), "w": w.tolist(),
                          "sources": sorted({{e.source for e in compile_log()}})}}))
    """, KSPEC_DEVICE="cpu")
    assert found["archs"] == ["host"]
    compiled, cached = found["first"]
    assert compiled > 2 and cached == 0 and found["second"] == [0, compiled]
    assert found["z"] == [1, 2, 3, 4] and found["w"] == [2.0] * 4
    assert found["sources"] == ["cache"]


def test_unknown_path_is_an_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KSPEC_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["warm", str(tmp_path / "nope.toml"), "--arch", "sm_90"]) == 1
    assert "no such spec file or directory" in capsys.readouterr().err
    with pytest.raises(kspec.SpecFileError, match="no such spec file"):
        kspec.warm(tmp_path / "nope.toml", arch="sm_90")


def test_bad_arch_names_the_option(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KSPEC_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["warm", str(ELEMENTWISE), "--arch", "sm90"]) == 1
    assert "--arch: expected 'sm_XX'" in capsys.readouterr().err
    with pytest.raises(kspec.KspecValueError, match="arch: expected 'sm_XX'"):
        kspec.warm(ELEMENTWISE, arch="ampere")
    with pytest.raises(SystemExit):  # --arch is required: an image build machine has no device to ask
        main(["warm", str(ELEMENTWISE)])
    assert "--arch" in capsys.readouterr().err


def test_a_target_that_is_neither_specs_nor_a_generated_module_is_a_type_error():
    with pytest.raises(kspec.KspecTypeError, match="target: module 'json' is not a module generated"):
        kspec.warm(json, arch="sm_90")
    with pytest.raises(kspec.KspecTypeError, match="target: expected a spec file"):
        kspec.warm(42, arch="sm_90")


RAW = ROOT / "specs" / "raw.toml"


def test_raw_specs_are_warmed_one_whole_module_per_arch():
    """A raw spec of CUDA source is one entry per arch (its kernel object compiles its module whole); a raw
    spec naming a binary file has nothing to compile and is reported as skipped."""
    specs = list(load_library([str(RAW)]).values())
    plan = plan_warm(specs, ["sm_90", "host"])
    sources = [s for s in specs if not s.is_binary]
    assert sources and len(plan.units) == 2 * len(sources)
    assert all(u.raw is not None and u.specialization is None and u.problem is None for u in plan.units)
    assert {(u.spec.name, u.arch) for u in plan.units} == {(s.name, a) for s in sources for a in ("sm_90", "host")}
    assert all(any(s is spec for s in specs if s.is_binary) and "precompiled binary" in why
               for spec, why in plan.skipped)
    fx3 = next(u for u in plan.units if u.spec.name == "fx3")
    assert fx3.raw is not None and fx3.raw.name_expressions == ("fx3<float>", "fx3<double>")


# Every raw kernel of a spec file, loaded as kspec.load makes it, under KSPEC_COMPILE=never: reading a
# function's attribute loads its module (a compile, or here the cache entry), and my_add runs.
_RAW_SERVE = """
import json
import numpy as np
import kspec
from kspec.compiler import compile_log
from kspec.spec import load_library

specs = load_library([{path!r}])
kernels = kspec.load({path!r})
loaded = []
for name in kernels:
    spec, kernel = specs[name], kernels[name]
    if spec.is_binary:
        continue
    if isinstance(kernel, kspec.RawKernel):
        {probe}(kernel)
    else:
        for function in (*spec.name_expressions, *(() if spec.name_expressions else spec.kernels)):
            {probe}(kernel.get_function(function))
    loaded.append(name)
result = {{}}
if {run_add}:
    x = np.arange(256, dtype=np.float32)
    y = np.zeros(256, dtype=np.float32)
    kernels.my_add((1,), (256,), (x, x, y))
    result["my_add"] = bool((y == 2 * x).all())
print(json.dumps({{"loaded": loaded, "sources": sorted({{e.source for e in compile_log()}}),
                  "events": len(compile_log()), **result}}))
"""


def test_raw_kernels_are_served_from_a_warm_cache_on_the_cpu_device(tmp_path):
    _host_compiler_or_skip()
    cache = tmp_path / "cache"
    done = _kspec(cache, "warm", str(RAW), "--arch", "host", "-j", "2")
    assert done.returncode == 0, done.stderr + done.stdout
    sources = [s.name for s in load_library([str(RAW)]).values() if not s.is_binary]
    assert f"{len(sources)} kernels, {len(sources)} cache entries for host" in done.stdout
    script = _RAW_SERVE.format(path=str(RAW), probe="(lambda k: k.max_threads_per_block)", run_add=True)
    found = _python(cache, script, KSPEC_DEVICE="cpu", KSPEC_COMPILE="never")
    assert found["loaded"] == sources and found["my_add"] is True
    assert found["sources"] == ["cache"] and found["events"] == len(sources)


def test_raw_sm_90_entries_are_the_ones_kernels_look_up(tmp_path, monkeypatch):
    """Warmed for sm_90 in this process; a fresh one compiling each raw kernel for sm_90 through its own
    path (``compile(arch=)`` takes the first call's compile, which logs where it found the module) finds
    every one in the cache."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("KSPEC_CACHE_DIR", str(cache))
    report = kspec.warm(RAW, arch="sm_90", jobs=1)
    sources = [s.name for s in load_library([str(RAW)]).values() if not s.is_binary]
    assert report.compiled == len(sources) and report.cached == 0
    assert all("precompiled binary" in why for _spec, why in report.skipped)
    script = _RAW_SERVE.format(path=str(RAW), probe="(lambda k: k.compile(arch='sm_90'))", run_add=False)
    script = script.replace("(kernel.get_function(function))", "(kernel)")  # a RawModule compiles as a whole
    found = _python(cache, script, KSPEC_COMPILE="never")
    assert found["loaded"] == sources and found["sources"] == ["cache"] and found["events"] == len(sources)


def test_raw_modules_a_build_compiles_are_the_ones_kernels_look_up(tmp_path):
    """``kspec build`` keys a raw spec's module by what determines its source, as its kernel object's first call
    keys its program (kspec.compiler.raw_program): where both compile the same name expressions (one kernel, or
    a module's template instantiations), a build fills the binary cache a later process's kernels find their
    modules in, without rendering. (A module of several plain kernels compiles with their names at build time,
    for the manifest's lowered names, and without at a call, as CuPy's RawModule does: two entries.)"""
    specs = tmp_path / "raw.toml"
    specs.write_text(textwrap.dedent("""
        schema = 1

        [[kernel]]
        kind = "raw"
        name = "scale2"
        kernels = ["scale2"]
        source = '''extern "C" __global__ void scale2(float* y, int n) { int i = threadIdx.x; if (i < n) y[i] *= 2; }'''

        [[kernel]]
        kind = "raw"
        name = "axpy_t"
        name_expressions = ["axpy_t<float>", "axpy_t<double>"]
        source = '''template <typename T> __global__ void axpy_t(T a, const T* x, T* y) { y[threadIdx.x] += a * x[threadIdx.x]; }'''
    """))
    cache = tmp_path / "cache"
    done = _kspec(cache, "build", str(specs), "-o", str(tmp_path / "out"), "--arch", "sm_90")
    assert done.returncode == 0, done.stderr + done.stdout
    script = _RAW_SERVE.format(path=str(specs), probe="(lambda k: k.compile(arch='sm_90'))", run_add=False)
    script = script.replace("(kernel.get_function(function))", "(kernel)")  # a RawModule compiles as a whole
    script = script.replace("print(json.dumps({", "import sys\nprint(json.dumps({'jinja2': 'jinja2' in sys.modules, ")
    found = _python(cache, script, KSPEC_COMPILE="never")
    assert found["loaded"] == ["scale2", "axpy_t"] and found["sources"] == ["cache"] and found["events"] == 2
    assert found["jinja2"] is False
