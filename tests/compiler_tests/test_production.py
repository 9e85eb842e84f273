"""Production mode: the compile policy (KSPEC_COMPILE, kspec.compile_policy) and the compile log
(kspec.compile_log, KSPEC_LOG=compile), on kspec's CPU device (the host compiler goes through the same
binary cache and the same policy check as NVRTC).

Each test gets a fresh binary-cache directory; kernels get names of their own (``_unique``), so the
process-wide tables (loaded kernels, prepared calls, warned keys) never serve one test from another's work.
Serving from a cache entry or a precompiled binary is checked in a fresh interpreter, where nothing is in
memory yet.
"""

from __future__ import annotations

import itertools
import os
import pickle
import subprocess
import sys
import uuid
import warnings
from pathlib import Path

import numpy as np
import pytest

import kspec
from kspec import jit
from kspec.compiler import BinaryCache, CompileOptions, CompileRequest, compile_cached, compile_log
from kspec.compiler import _compile, _log, _policy

from helpers.child_env import child_env

_counter = itertools.count()


def _unique(stem: str) -> str:
    return f"{stem}_{uuid.uuid4().hex[:8]}_{next(_counter)}"


@pytest.fixture(autouse=True)
def _fresh_state(tmp_path, monkeypatch):
    """A binary cache of this test's own, the policy back to allow, KSPEC_LOG off."""
    monkeypatch.setenv("KSPEC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KSPEC_LOG", raising=False)
    monkeypatch.setattr(_policy, "_ENV_VALUE", None)
    monkeypatch.setattr(_policy, "_set_mode", None)
    yield


def _adder(name: str) -> kspec.ElementwiseKernel:
    return kspec.ElementwiseKernel("T x, T y", "T z", "z = x + y", name)


def _no_compiling(monkeypatch) -> None:
    """compile_source fails the test if reached: what must not compile raises before it gets there."""

    def refuse(*args, **kwargs):
        raise AssertionError("compile_source was called")

    monkeypatch.setattr(_compile, "compile_source", refuse)


def _entries(kernel: str) -> list[kspec.CompileEvent]:
    return [e for e in compile_log() if e.kernel == kernel]


# -- the policy's setting -----------------------------------------------------------------------------------


def test_compile_policy_returns_the_previous_mode_and_restores_it_as_a_context_manager():
    assert kspec.compile_policy() == "allow"
    with kspec.compile_policy("never") as previous:
        assert previous == "allow"
        assert kspec.compile_policy() == "never"
        with kspec.compile_policy("warn"):
            assert kspec.compile_policy() == "warn"
        assert kspec.compile_policy() == "never"
    assert kspec.compile_policy() == "allow"
    assert kspec.compile_policy("warn") == "allow"  # a plain call sets it for the process
    assert kspec.compile_policy("allow") == "warn"


def test_the_environment_variable_sets_the_default(monkeypatch):
    monkeypatch.setattr(_policy, "_ENV_VALUE", " Never ")
    assert kspec.compile_policy() == "never"
    with kspec.compile_policy("allow"):
        assert kspec.compile_policy() == "allow"
    assert kspec.compile_policy() == "never"  # back to the variable's value


def test_a_bad_environment_value_names_the_variable_and_the_accepted_values(monkeypatch):
    monkeypatch.setattr(_policy, "_ENV_VALUE", "sometimes")
    with pytest.raises(kspec.KspecValueError, match=r"KSPEC_COMPILE: expected one of never, warn, allow .*'sometimes'"):
        kspec.compile_policy()


def test_a_bad_mode_is_a_value_error():
    with pytest.raises(kspec.KspecValueError, match=r"mode: expected one of never, warn, allow, got 'off'"):
        kspec.compile_policy("off")
    assert kspec.compile_policy() == "allow"


def test_the_forbidden_error_is_a_runtime_error_and_pickles():
    error = kspec.CompileForbiddenError("kernel 'k' would compile", kernel="k")
    assert isinstance(error, kspec.KspecError) and isinstance(error, RuntimeError)
    again = pickle.loads(pickle.dumps(error))
    assert (type(again), str(again), again.kernel) == (kspec.CompileForbiddenError, str(error), "k")
    assert issubclass(kspec.CompileWarning, UserWarning)


# -- never ---------------------------------------------------------------------------------------------------


def test_never_raises_before_compiling_and_names_kernel_types_arch_and_advice(on_cpu_device, monkeypatch):
    name = _unique("never_add")
    kernel = _adder(name)
    _no_compiling(monkeypatch)
    x = np.arange(6, dtype=np.float64)
    with kspec.compile_policy("never"):
        with pytest.raises(kspec.CompileForbiddenError) as caught:
            kernel(x, x)
    message = str(caught.value)
    assert caught.value.kernel == name
    assert f"kernel {name!r} (T=float64; variant " in message
    assert "for host (the CPU device)" in message
    assert "new specialization" in message and "kspec.compile_policy('never')" in message
    assert "KSPEC_COMPILE=allow" in message and "kspec build <spec file> --arch host" in message
    assert _entries(name) == []  # nothing was loaded
    assert BinaryCache(os.environ["KSPEC_CACHE_DIR"]).info().entries == 0


def test_never_without_nvrtc_is_the_policys_error_not_a_missing_compiler(monkeypatch):
    # a worker with no NVRTC serving precompiled kernels: a kernel it lacks is a forbidden compile, named as such
    from kspec.compiler import _key

    def missing() -> tuple[int, int]:
        raise kspec.NvrtcNotFoundError("NVRTC could not be loaded (blocked)")

    monkeypatch.setattr(_key, "nvrtc_version", missing)
    _no_compiling(monkeypatch)
    name = _unique("no_nvrtc")
    request = CompileRequest(name, "T=float32; variant contiguous", False)
    source = 'extern "C" __global__ void k() {}'
    with kspec.compile_policy("never"), pytest.raises(kspec.CompileForbiddenError, match="no NVRTC to key") as caught:
        compile_cached(source, name=name, options=CompileOptions(arch="sm_90"), request=request)
    assert caught.value.kernel == name
    with pytest.raises(kspec.NvrtcNotFoundError):  # allowed to compile: then the compiler is what is missing
        compile_cached(source, name=name, options=CompileOptions(arch="sm_90"), request=request)


def test_never_names_scalar_inputs(on_cpu_device, monkeypatch):
    name = _unique("never_scale")
    kernel = kspec.ElementwiseKernel("T x, T a", "T z", "z = x * a", name)
    _no_compiling(monkeypatch)
    with kspec.compile_policy("never"), pytest.raises(kspec.CompileForbiddenError, match="T=float32; scalar inputs a; variant"):
        kernel(np.ones(3, np.float32), np.float32(2))


def test_never_for_a_spec_file_gives_the_build_line_and_the_missing_instantiation(on_cpu_device, monkeypatch, tmp_path):
    name = _unique("filed")
    spec = tmp_path / "k.toml"
    spec.write_text(
        f'schema = 1\n[[kernel]]\nkind = "elementwise"\nname = "{name}"\nin_params = "T x"\nout_params = "T y"\n'
        'operation = "y = x + x"\ninstantiations = [{T = "float32"}]\n'
    )
    kernel = kspec.load(spec)[name]
    _no_compiling(monkeypatch)
    with kspec.compile_policy("never"):
        with pytest.raises(kspec.CompileForbiddenError) as declared:
            kernel(np.ones(3, np.float32))
        with pytest.raises(kspec.CompileForbiddenError) as undeclared:
            kernel(np.ones(3, np.int64))
    assert str(declared.value).endswith(f"to produce it: kspec build {spec} --arch host")
    assert f'add {{T = "int64"}} to its instantiations in {spec}, then kspec build {spec} --arch host' in str(undeclared.value)


def test_never_stops_raw_and_jit_kernels_with_their_name_and_arch(on_cpu_device, monkeypatch):
    name = _unique("raw_never")
    raw = kspec.RawKernel(f'extern "C" __global__ void {name}(float* x) {{ x[threadIdx.x] = 1.0f; }}', name)
    _no_compiling(monkeypatch)
    x = np.zeros(4, np.float32)
    with kspec.compile_policy("never"):
        with pytest.raises(kspec.CompileForbiddenError, match=rf"kernel '{name}' \(name expressions {name}\) for host"):
            raw((1,), (4,), (x,))
        with pytest.raises(kspec.CompileForbiddenError, match=r"KSPEC_COMPILE=allow .*kspec build"):
            _fill_ones[1, 4](x)


@jit.rawkernel()
def _fill_ones(x):
    x[jit.threadIdx.x] = 1.0


def test_explicit_compiles_are_allowed_under_never(on_cpu_device):
    name = _unique("explicit")
    kernel = _adder(name)
    raw_name = _unique("raw_explicit")
    raw = kspec.RawKernel(f'extern "C" __global__ void {raw_name}(int* x) {{ x[0] = 7; }}', raw_name)
    source = 'extern "C" __global__ void direct(int* x) { x[0] = 3; }'
    with kspec.compile_policy("never"):
        kernel.compile(np.ones(2, np.int32), np.ones(2, np.int32))
        raw.compile()
        compile_cached(source, name="direct", options=CompileOptions(arch="host"))  # no request: explicit
        y = kernel(np.arange(3, dtype=np.int32), np.arange(3, dtype=np.int32))  # compiled above: no compile now
        out = np.zeros(1, np.int32)
        raw((1,), (1,), (out,))
    assert y.tolist() == [0, 2, 4] and out.tolist() == [7]


# -- warn ----------------------------------------------------------------------------------------------------


def test_warn_warns_once_per_specialization_and_compiles(on_cpu_device):
    name = _unique("warned")
    kernel = _adder(name)
    with kspec.compile_policy("warn"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        a = kernel(np.ones(3, np.float32), np.ones(3, np.float32))
        kernel(np.ones(5, np.float32), np.ones(5, np.float32))  # the same specialization
        b = kernel(np.ones(3, np.int32), np.ones(3, np.int32))
    ours = [w for w in caught if issubclass(w.category, kspec.CompileWarning)]
    assert [("T=float32" in str(w.message), "T=int32" in str(w.message)) for w in ours] == [(True, False), (False, True)]
    assert all(w.filename == __file__ for w in ours)  # pointing at the call that compiles
    assert "compiles at run time (new specialization; kspec.compile_policy('warn'))" in str(ours[0].message)
    assert a.tolist() == [2.0] * 3 and b.tolist() == [2] * 3


def test_warn_is_once_per_cache_key_even_when_the_cache_misses_again(on_cpu_device):
    source = f'extern "C" __global__ void {_unique("k")}(int* x) {{ x[0] = 1; }}'
    request = CompileRequest("k", "raw module")
    with kspec.compile_policy("warn"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):  # a memory-only cache of its own each time: two misses of one key
            compile_cached(source, name="k", options=CompileOptions(arch="host"), cache=BinaryCache(None), request=request)
    assert len([w for w in caught if issubclass(w.category, kspec.CompileWarning)]) == 1


# -- the compile log ---------------------------------------------------------------------------------------


def test_the_log_records_compiles_with_their_time_and_reason(on_cpu_device, monkeypatch, capsys):
    monkeypatch.setenv("KSPEC_LOG", "other,compile")
    name = _unique("logged")
    kernel = _adder(name)
    kernel(np.ones(3, np.float32), np.ones(3, np.float32))
    [event] = _entries(name)
    assert (event.arch, event.source, event.reason) == ("host", "compiled", "new specialization")
    assert event.what.startswith("T=float32; variant ") and event.ms > 0
    lines = [line for line in capsys.readouterr().err.splitlines() if f" {name} " in line]
    assert lines == [f"kspec compile: compiled {name} [{event.what}] host {event.ms:.3f} ms (new specialization)"]


def test_the_log_reasons_for_a_stale_entry_and_for_missing_arch_binaries(on_cpu_device, tmp_path):
    source = f'extern "C" __global__ void {_unique("k")}(int* x) {{ x[0] = 1; }}'
    options = CompileOptions(arch="host")
    cache = BinaryCache(tmp_path / "stale")
    key = _compile.cache_key(source, options=options)
    (tmp_path / "stale").mkdir()
    (tmp_path / "stale" / f"{key}.kbin").write_bytes(b"not an entry")
    kernel = _unique("stale")
    compile_cached(source, name="k", options=options, cache=cache, request=CompileRequest(kernel, "raw module"))
    compile_cached(source, name="k", options=options, cache=BinaryCache(None),
                   request=CompileRequest(kernel, "raw module", has_binaries=True))
    compile_cached(source, name="k", options=options, cache=cache, request=CompileRequest(kernel, "raw module"))
    assert [(e.source, e.reason) for e in _entries(kernel)] == [
        ("compiled", "stale cache entry"), ("compiled", "no binary for this arch"), ("cache", "")]
    assert all(e.ms > 0 for e in _entries(kernel))


def test_the_log_keeps_the_last_entries_only():
    _log.clear_compile_log()
    for k in range(_log.LOG_MAX + 5):
        _log.record_load("k", str(k), "host", "cache", 0.5)
    entries = compile_log()
    assert len(entries) == _log.LOG_MAX and entries[-1].what == str(_log.LOG_MAX + 4) and entries[0].what == "5"
    _log.clear_compile_log()
    assert compile_log() == []


# -- fresh processes: a cache hit and a precompiled binary under never ------------------------------------

_SERVE = """
import json, sys
import numpy as np, kspec
kspec.use_device("cpu")
lib = kspec.load(sys.argv[1], binaries=sys.argv[2] if len(sys.argv) > 2 else None)
k = lib[{name!r}]
y = k(np.arange(4, dtype=np.float32))
try:
    k(np.arange(4, dtype=np.int16))
    refused = ""
except kspec.CompileForbiddenError as exc:
    refused = str(exc)
print(json.dumps({{"y": y.tolist(), "refused": refused,
                  "log": [[e.kernel, e.source, e.arch, e.ms, e.reason] for e in kspec.compile_log()]}}))
"""


def _spec_file(tmp_path: Path, name: str) -> Path:
    spec = tmp_path / "served.toml"
    spec.write_text(
        f'schema = 1\n[[kernel]]\nkind = "elementwise"\nname = "{name}"\nin_params = "T x"\nout_params = "T y"\n'
        'operation = "y = x * x"\ninstantiations = [{T = "float32"}]\n'
    )
    return spec


def _serve(tmp_path: Path, name: str, *args: str, compile: str = "never", cache: str = "cache") -> tuple[dict, str]:
    import json

    env = child_env(KSPEC_CACHE_DIR=str(tmp_path / cache), KSPEC_COMPILE=compile, KSPEC_LOG="compile")
    done = subprocess.run([sys.executable, "-c", _SERVE.format(name=name), *args], env=env, capture_output=True,
                          text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_never_serves_from_the_binary_cache_in_a_fresh_process(on_cpu_device, tmp_path):
    name = _unique("cached")
    spec = _spec_file(tmp_path, name)
    first, _ = _serve(tmp_path, name, str(spec), compile="allow")  # fills the cache (both types)
    assert [row[1] for row in first["log"]] == ["compiled", "compiled"] and first["refused"] == ""
    served, stderr = _serve(tmp_path, name, str(spec))
    assert served["y"] == [0.0, 1.0, 4.0, 9.0] and served["refused"] == ""
    assert [(row[1], row[2]) for row in served["log"]] == [("cache", "host"), ("cache", "host")]
    assert all(row[3] > 0 for row in served["log"])
    assert stderr.count("kspec compile: cache ") == 2


def test_never_serves_a_precompiled_binary_and_refuses_what_it_lacks(on_cpu_device, tmp_path):
    name = _unique("built")
    spec = _spec_file(tmp_path, name)
    out = tmp_path / "binaries"
    env = child_env(KSPEC_CACHE_DIR=str(tmp_path / "build-cache"))
    done = subprocess.run([sys.executable, "-m", "kspec", "build", str(spec), "-o", str(out), "--arch", "host"],
                          env=env, capture_output=True, text=True, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    served, stderr = _serve(tmp_path, name, str(spec), str(out), cache="empty")
    assert served["y"] == [0.0, 1.0, 4.0, 9.0]
    assert [(row[0], row[1], row[2]) for row in served["log"]] == [(name, "binary", "host")]
    assert served["log"][0][3] > 0
    assert f'add {{T = "int16"}} to its instantiations in {spec}' in served["refused"]
    assert f"kernel '{name}' (T=int16; variant " in served["refused"]
    assert stderr.count("kspec compile: binary ") == 1
