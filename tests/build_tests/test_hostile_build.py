"""Issue 20, crashes and hangs: one kernel that crashes NVRTC or never finishes compiling fails alone;
hostile spec files and output directories give errors, not tracebacks, and `-o` is checked before any
compile. No GPU needed."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import kspec
import kspec.build._workers as workers
from kspec.build import plan_build, precompile, read_manifest
from kspec.cli import main
from kspec.compiler import DEFAULT_COMPILE_TIMEOUT_S, BinaryCache
from kspec.spec import load_file, parse_spec

from helpers.child_env import child_path

REPO = Path(__file__).resolve().parents[2]
RAW = REPO / "specs" / "raw.toml"
HELPERS = Path(__file__).resolve().parents[1] / "helpers"  # where hostile_worker.py is


def ew(name: str, operation: str = "y = x") -> kspec.spec.ElementwiseSpec:
    return parse_spec(dict(kind="elementwise", name=name, in_params="float32 x", out_params="float32 y", operation=operation))


@pytest.fixture
def hostile_worker(monkeypatch):
    """Builds use tests/helpers/hostile_worker.py: `crasher` kills its worker with SIGSEGV, `sleeper` hangs."""
    monkeypatch.setattr(workers, "WORKER_MODULE", "hostile_worker")
    monkeypatch.setenv("PYTHONPATH", child_path(HELPERS))  # kspec puts itself first; pydantic may be on the path


@pytest.mark.skipif(not workers.ISOLATED, reason="compiles run in worker processes on POSIX only")
def test_a_crashing_compile_fails_alone(hostile_worker):
    units = plan_build([ew("crasher"), ew("fine"), ew("also_fine")], ["sm_80"]).units
    results = {r.unit.spec.name: r for r in precompile(units, jobs=2, cache=BinaryCache(None))}
    assert results["fine"].ok and results["also_fine"].ok
    error = results["crasher"].error
    assert isinstance(error, kspec.CompileError) and "crashed" in str(error) and "SIGSEGV" in str(error)


@pytest.mark.skipif(not workers.ISOLATED, reason="compiles run in worker processes on POSIX only")
def test_a_pool_closing_while_a_build_thread_drops_its_worker(hostile_worker):
    """A build stopped by SIGTERM closes its pool while the threads whose workers died drop them: a worker
    killed twice said ``ValueError: seek of closed file`` over the build's own message."""
    pool = workers.CompilePool(1, timeout=None)
    worker = pool._take()
    first = worker.kill()
    assert "killed by SIGKILL" in first and worker.kill() == first
    pool.close()


@pytest.mark.skipif(not workers.ISOLATED, reason="compiles run in worker processes on POSIX only")
def test_a_compile_past_its_timeout_fails_alone(hostile_worker):
    units = plan_build([ew("sleeper"), ew("fine")], ["sm_80"]).units
    start = time.monotonic()
    # 8 s: a fine compile's fresh worker (Python, NVRTC's import, the compile) must fit it on a loaded 2-core runner
    results = {r.unit.spec.name: r for r in precompile(units, jobs=2, cache=BinaryCache(None), timeout=8)}
    assert time.monotonic() - start < 60
    assert results["fine"].ok, results["fine"].error
    error = results["sleeper"].error
    assert isinstance(error, kspec.CompileTimeoutError) and "more than 8 s" in str(error)
    assert "--compile-timeout" in str(error)


def test_compile_timeout_option_and_default(tmp_path, monkeypatch, capsys):
    assert DEFAULT_COMPILE_TIMEOUT_S == 600
    seen = {}

    def fake(units, *, jobs=None, timeout=None, **_):
        seen["timeout"] = timeout
        return [], 0.0

    monkeypatch.setattr("kspec.build.precompile_with_progress", fake)
    assert main(["build", str(RAW), "--arch", "sm_80"]) == 0
    assert seen["timeout"] == DEFAULT_COMPILE_TIMEOUT_S
    assert main(["build", str(RAW), "--arch", "sm_80", "--compile-timeout", "5"]) == 0
    assert seen["timeout"] == 5
    assert main(["build", str(RAW), "--arch", "sm_80", "--compile-timeout", "-1"]) == 1
    assert "--compile-timeout" in capsys.readouterr().err


def test_fifty_thousand_terms_compile_in_a_build(tmp_path):
    """NVRTC recurses once per operator: on a default thread stack this SIGSEGVs the whole build."""
    source = 'extern "C" __global__ void huge(float* y, const float* x) { y[0] = ' + " + ".join(["x[0]"] * 50_000) + "; }"
    huge = parse_spec(dict(kind="raw", name="huge", source=source, kernels=["huge"]))
    units = plan_build([huge, ew("fine")], ["sm_80"]).units
    for isolate in (True, False):  # worker processes, and the in-process threads (with a large stack)
        results = precompile(units, jobs=2, cache=BinaryCache(None), isolate=isolate)
        assert all(r.ok for r in results), [str(r.error)[:300] for r in results if not r.ok]


# --- tracebacks that are errors now -------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_deeply_nested_spec_file_is_a_spec_file_error(tmp_path, suffix, capsys):
    depth = 100_000
    path = tmp_path / f"deep{suffix}"
    if suffix == ".toml":
        path.write_text("schema = 1\nx = " + "[" * depth + "]" * depth + "\n")
    else:
        path.write_text('{"schema": 1, "kernel": [' + "[" * depth + "]" * depth + "]}")
    with pytest.raises(kspec.SpecFileError, match="nested too deeply"):
        load_file(path)
    assert main(["validate", str(path)]) == 1
    assert "nested too deeply" in capsys.readouterr().out


def test_deep_nesting_inside_a_kernel_table(tmp_path):
    depth = 20_000
    kernel = '{"kind": "raw", "name": "r", "source": "x", "kernels": ' + "[" * depth + "]" * depth + "}"
    path = tmp_path / "deep.json"
    path.write_text('{"schema": 1, "kernel": [' + kernel + "]}")
    with pytest.raises(kspec.SpecError):
        load_file(path)


def test_launch_block_float_is_a_spec_error_not_a_type_error(tmp_path):
    path = tmp_path / "k.toml"
    path.write_text('schema = 1\n[[kernel]]\nkind = "raw"\nname = "r"\nsource = "x"\nkernels = ["k"]\n'
                    "launch = {block = 1.5, shared_mem = -1}\n")  # fmt: skip
    with pytest.raises(kspec.SpecErrorGroup) as info:
        load_file(path)
    fields = sorted(e.field for e in info.value.errors)
    assert fields == ["launch.block", "launch.shared_mem"]
    assert all(e.file == str(path) for e in info.value.errors)
    group = kspec.SpecErrorGroup([kspec.SpecError("a"), kspec.SpecError("b")])
    assert [e.file for e in group.located(file="f.toml").errors] == ["f.toml", "f.toml"]


def test_long_kernel_names_give_bounded_file_names(tmp_path, monkeypatch):
    monkeypatch.setenv("KSPEC_CACHE_DIR", str(tmp_path / "cache"))
    name = "k" * 300
    long_scalars = parse_spec(dict(kind="elementwise", name="s", in_params="T x, float32 " + "a" * 200,
                                   out_params="T y", operation="y = x", instantiations=[{"T": "float32"}]))  # fmt: skip
    spec = tmp_path / "long.json"
    from kspec.spec import dumps_json

    spec.write_text(dumps_json([ew(name), long_scalars]))
    out = tmp_path / "out"
    assert main(["build", str(spec), "--arch", "sm_80", "-o", str(out)]) == 0
    for path in out.rglob("*"):
        assert len(path.name) <= 100, path.name
    entries = read_manifest(out)["entries"]
    assert {e["kernel"] for e in entries} == {name, "s"} and len(entries) == 3
    assert all((out / e["file"]).is_file() for e in entries)


# --- -o problems, before any compile -----------------------------------------------------------------------


@pytest.fixture
def no_compile(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("compiled although the output directory is unusable")

    monkeypatch.setattr("kspec.build.precompile_with_progress", refuse)


def _o_cases(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    owned = tmp_path / "owned"
    owned.mkdir()
    (owned / "manifest.json").write_text(json.dumps({"kspec_manifest": 2, "kspec_version": "0", "entries": []}))
    (owned / "my_add").write_text("a file where a kernel directory goes")
    return {
        "regular file": (a_file, "not a directory"),
        "/proc": (Path("/proc/x"), "cannot be written"),
        "under a file": (a_file / "sub", "cannot be written"),
        "OUT/k is a file": (owned, "is a file where kernel 'my_add'"),
    }


@pytest.mark.parametrize("case", ["regular file", "/proc", "under a file", "OUT/k is a file"])
def test_o_problems_are_reported_before_compiling(tmp_path, no_compile, capsys, case):
    target, phrase = _o_cases(tmp_path)[case]
    if case == "/proc" and not Path("/proc").is_dir():
        pytest.skip("no /proc here")
    assert main(["build", str(RAW), "--arch", "sm_80", "-o", str(target)]) == 1
    err = capsys.readouterr().err
    assert phrase in err and "Traceback" not in err


def test_o_unwritable_directory_is_reported_before_compiling(tmp_path, no_compile, monkeypatch, capsys):
    import kspec.build._output as output

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied")  # what a read-only mount says (root ignores chmod)

    monkeypatch.setattr(output.tempfile, "mkstemp", read_only)
    assert main(["build", str(RAW), "--arch", "sm_80", "-o", str(tmp_path / "ro")]) == 1
    assert "cannot be written: Permission denied" in capsys.readouterr().err
