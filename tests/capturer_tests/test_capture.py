"""kspec capture (issue [CAP]): a program's constructor calls recorded as spec files, built, and served by content in
a fresh process with NVRTC blocked and KSPEC_COMPILE=never. The loop runs on the CPU device (``--arch host``): no GPU;
tests/capturer_tests/test_capture_gpu.py runs it on a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

import kspec
from kspec import InstantiationError, SpecError
from kspec.capturer import Recorder, write_captured
from kspec.render import raw_module_key, specialize
from kspec.spec import ElementwiseSpec, RawSpec, load_file, parse_spec

from helpers.child_env import child_env

PROGRAM = '''
import numpy as np
import kspec

scaled = kspec.ElementwiseKernel("T x, T y", "T z", "z = x + y * SCALE", "combine", preamble="#define SCALE 2")
minus = kspec.ElementwiseKernel("T x, T y", "T z", "z = x - y", "combine")  # the same name, other code
total = kspec.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "total")
scale = kspec.RawKernel(r"""
extern "C" __global__ void scale(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}""", "scale")
module = kspec.RawModule(code=r"""
extern "C" __global__ void twice(float* y, int n) { int i = threadIdx.x; if (i < n) y[i] *= 2; }
extern "C" __global__ void half(float* y, int n) { int i = threadIdx.x; if (i < n) y[i] /= 2; }
""")
x = kspec.asarray(np.arange(8, dtype=np.float32))
y = kspec.asarray(np.ones(8, dtype=np.float32))
out = kspec.zeros(8, np.float32)
scale((1,), (8,), (x, out, np.float32(3), np.int32(8)))
module.get_function("twice")((1,), (8,), (out, np.int32(8)))
module.get_function("half")((1,), (4,), (out, np.int32(4)))
results = [scaled(x, y), minus(x, y), scaled(x, 3.0), total(x), out,
           scaled(kspec.asarray(np.arange(4.0)), kspec.asarray(np.ones(4)))]
print([(r.get() if hasattr(r, "get") else np.asarray(r)).tolist() for r in results])
'''

SERVE = '''
import sys
sys.modules["cuda.bindings.nvrtc"] = None  # NVRTC blocked: importing it fails
import kspec
exec(open("program.py").read())
print([(e.kernel, e.source) for e in kspec.compile_log()])
'''


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    return child_env(unset=("KSPEC_BINARIES",), KSPEC_DEVICE="cpu", **extra)


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    tmp = tmp_path_factory.mktemp("capture")
    (tmp / "program.py").write_text(PROGRAM)
    env = _env(tmp)
    run = _run([sys.executable, "-m", "kspec", "capture", "-o", "specs", "--", sys.executable, "program.py"], tmp, env)
    return {"dir": tmp, "env": env, "run": run, "expected": run.stdout.splitlines()[0]}


def test_capture_writes_one_spec_file_per_module_with_every_specialization(captured):
    tmp = captured["dir"]
    assert "5 kernels in 1 changed spec files (5 new kernels, 5 new specializations" in captured["run"].stdout
    files = sorted(p.name for p in (tmp / "specs").iterdir())
    assert files == ["call-path.txt", "main.toml"]  # the spec file, and the call path's code the calls used
    text = (tmp / "specs" / "main.toml").read_text()
    assert text.startswith("# Captured by `kspec capture`: the kernels that the code of module __main__ built")
    assert "# program.py:5\n[[kernel]]" in text and 'doc = "built at program.py:5"' in text
    specs = {s.name: s for s in load_file(tmp / "specs" / "main.toml")}
    assert set(specs) == {"combine", "combine_2", "total", "scale", "raw_module"}
    assert specs["raw_module"].kernels == ("half", "twice")  # the functions the program looked up
    # the second kernel named "combine" keeps its C++ name and so its content key
    assert specs["combine_2"].cuda_name == "combine" and specs["combine_2"].operation == "z = x - y"
    # each with the launch variants its calls loaded (contiguous arrays: the vectorised contiguous entry)
    assert [dict(e) for e in specs["combine"].specializations] == [
        {"types": {"T": "float32"}, "scalars": ["y"], "variants": ["contig/int64/0/4"]},
        {"types": {"T": "float32"}, "variants": ["contig/int64/0/4"]},
        {"types": {"T": "float64"}, "variants": ["contig/int64/0/2"]}]
    assert [dict(e) for e in specs["total"].specializations] == [{"types": {"T": "float32"}, "variants": ["rows/int64/1/4"]}]
    assert isinstance(specs["scale"], RawSpec) and specs["scale"].kernels == ("scale",)
    # one line per call signature: a diff shows a new one as one line
    assert '    { types = { T = "float32" }, scalars = ["y"], variants = ["contig/int64/0/4"] },\n' in text


def test_rerun_merges_and_prune_drops_what_a_run_no_longer_builds(captured, tmp_path):
    env = captured["env"]
    out = tmp_path / "specs"
    (tmp_path / "program.py").write_text(PROGRAM)
    cmd = [sys.executable, "-m", "kspec", "capture", "-o", str(out), "--", sys.executable, "program.py"]
    _run(cmd, tmp_path, env)
    first = (out / "main.toml").read_text()
    again = _run(cmd, tmp_path, env)
    assert "0 new kernels, 0 new specializations" in again.stdout and (out / "main.toml").read_text() == first
    # the program's code changes: a new kernel is added beside the old one, --prune then drops the old one
    (tmp_path / "program.py").write_text(PROGRAM.replace("z = x - y", "z = y - x"))
    merged = _run(cmd, tmp_path, env)
    assert "1 new kernels" in merged.stdout
    names = {s.name: s.operation for s in load_file(out / "main.toml") if s.name.startswith("combine")}
    assert sorted(names.values()) == ["z = x + y * SCALE", "z = x - y", "z = y - x"]
    pruned = _run([*cmd[:6], "--prune", *cmd[6:]], tmp_path, env)
    assert "1 pruned" in pruned.stdout
    names = {s.name: s.operation for s in load_file(out / "main.toml") if s.name.startswith("combine")}
    assert sorted(names.values()) == ["z = x + y * SCALE", "z = y - x"]


def test_captured_build_serves_a_fresh_process_without_compiler(captured, tmp_path):
    """validate and build the captured specs (the CPU device's --arch host), then run the same program in a fresh
    process: empty cache, NVRTC blocked, KSPEC_COMPILE=never, the build named by KSPEC_BINARIES. Every kernel
    is a binary load, and the results are the capture run's."""
    tmp, env = captured["dir"], captured["env"]
    _run([sys.executable, "-m", "kspec", "validate", "specs"], tmp, env)
    build = _run([sys.executable, "-m", "kspec", "build", "specs", "-o", "build", "--arch", "host"], tmp, env)
    assert "7/7 modules built for host" in build.stdout + build.stderr
    (tmp / "serve.py").write_text(SERVE)
    serve_env = {**env, "KSPEC_COMPILE": "never", "KSPEC_BINARIES": str(tmp / "build"),
                 "KSPEC_CACHE_DIR": str(tmp_path / "cache"), "KSPEC_MEMO_DIR": str(tmp_path / "memo")}
    served = _run([sys.executable, "serve.py"], tmp, serve_env)
    lines = served.stdout.splitlines()
    assert lines[0] == captured["expected"]
    log = eval(lines[1])  # noqa: S307 - our own program's printed list
    assert log and {source for _, source in log} == {"binary"}, log
    # the typed kernels' binaries are the captured launch variants, each its own program
    manifest = json.loads((tmp / "build" / "manifest.json").read_text())
    assert sorted(e.get("variant", "-") for e in manifest["entries"] if e["kind"] != "raw") == [
        "contig/int64/0/2", "contig/int64/0/4", "contig/int64/0/4", "contig/int64/0/4", "rows/int64/1/4"]
    assert {kernel for kernel, _ in log} == {"combine", "total", "scale", "raw_module"}
    # the call path's code the capture's calls used ships compiled with the build: the served process compiled
    # none of it (its memo directory, where compiled code is kept, got nothing)
    assert "def launch_call(" in (tmp / "specs" / "call-path.txt").read_text()
    assert len(list((tmp / "build" / "callpath").glob("*.marshal"))) >= 4
    assert not list((tmp_path / "memo").glob("callpath/*.marshal"))
    # a call the capture never saw is refused by name under never
    (tmp / "unseen.py").write_text(SERVE.replace('exec(open("program.py").read())', textwrap.dedent('''
        import numpy as np
        k = kspec.ElementwiseKernel("T x, T y", "T z", "z = x - y", "combine")
        try:
            k(kspec.asarray(np.arange(3, dtype=np.int16)), kspec.asarray(np.arange(3, dtype=np.int16)))
        except kspec.CompileForbiddenError as exc:
            print("refused:", "combine" in str(exc))
        # captured types, but a layout the capture never passed (a broadcast row): the strided entry point
        x = kspec.asarray(np.arange(16, dtype=np.float32).reshape(4, 4))
        try:
            k(x, kspec.asarray(np.ones((1, 4), np.float32)))
        except kspec.CompileForbiddenError as exc:
            print("layout refused:", "variant combine__strided" in str(exc))''')))
    refused = _run([sys.executable, "unseen.py"], tmp, serve_env)
    assert "refused: True" in refused.stdout and "layout refused: True" in refused.stdout, refused.stdout


FALLBACK = '''
import numpy as np
import kspec

x = kspec.asarray(np.arange(6, dtype=np.float32))
try:  # as cuCIM's filters do: a kernel that may not compile, and other code when it does not
    fast = kspec.RawModule(code='extern "C" __global__ void fast(float* y) { y[0] = no_such_function(y); }')
    fast.get_function("fast")((1,), (1,), (x,))  # kspec compiles at the first launch, CuPy at get_function
    path = "fast"
except kspec.CompileError as exc:
    path = "fallback" + (" (no_such_function)" if "no_such_function" in str(exc) else "")
y = kspec.ElementwiseKernel("T x", "T y", "y = x + x", "twice_fallback")(x)
print(path, y.get().tolist())
'''


def test_a_module_that_failed_to_compile_fails_again_where_served(tmp_path):
    """Code that falls back when a kernel does not compile: the capture keeps the failing module
    (``compile_fails``), the build stores the compile's message in place of a binary, and a served process, with
    no compiler, gets the same CompileError and takes the same path."""
    env = _env(tmp_path)
    (tmp_path / "program.py").write_text(FALLBACK)
    run = _run([sys.executable, "-m", "kspec", "capture", "-o", "specs", "--", sys.executable, "program.py"], tmp_path, env)
    assert run.stdout.splitlines()[0] == "fallback (no_such_function) [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]"
    specs = {s.name: s for s in load_file(tmp_path / "specs" / "main.toml")}
    assert specs["raw_module"].compile_fails and specs["raw_module"].kernels == ("fast",)
    assert "compile_fails = true" in (tmp_path / "specs" / "main.toml").read_text()
    build = _run([sys.executable, "-m", "kspec", "build", "specs", "-o", "build", "--arch", "host"], tmp_path, env)
    assert "2/2 modules built for host" in build.stdout + build.stderr
    entries = json.loads((tmp_path / "build" / "manifest.json").read_text())["entries"]
    failed = [e for e in entries if e["kind"] == "raw"]
    assert [e["format"] for e in failed] == ["failed"]
    assert "no_such_function" in (tmp_path / "build" / failed[0]["file"]).read_text()
    (tmp_path / "serve.py").write_text(SERVE)
    serve_env = {**env, "KSPEC_COMPILE": "never", "KSPEC_BINARIES": str(tmp_path / "build"),
                 "KSPEC_CACHE_DIR": str(tmp_path / "cache"), "KSPEC_MEMO_DIR": str(tmp_path / "memo")}
    served = _run([sys.executable, "serve.py"], tmp_path, serve_env).stdout.splitlines()
    assert served[0] == run.stdout.splitlines()[0]
    assert eval(served[1]) == [("twice_fallback", "binary")]  # noqa: S307 - our own program's printed list
    # a later capture that compiles the module (another compiler, fixed code) drops the mark
    records = tmp_path / "records"
    records.mkdir()
    module = specs["raw_module"]
    line = {"kind": "raw", "code": module.source, "options": [], "name_expressions": [], "translate_cucomplex": False,
            "backend": "nvrtc", "label": "raw_module", "site": {"module": "__main__", "file": "program.py", "line": 6}}
    (records / "records-1.jsonl").write_text(json.dumps(line) + "\n")
    write_captured(records, tmp_path / "specs")
    assert not {s.name: s for s in load_file(tmp_path / "specs" / "main.toml")}["raw_module"].compile_fails


# -- content keys ------------------------------------------------------------------------------------------


def test_a_constructor_call_and_its_captured_spec_share_a_content_key():
    made = kspec.ElementwiseKernel("T x, T y", "T z", "z = x * y", "mul_xy")
    captured = ElementwiseSpec(name="mul_xy_2", cuda_name="mul_xy", doc="built at lib.py:3", in_params="T x, T y",
                               out_params="T z", operation="z = x * y", cupy_headers=True,
                               specializations=[{"types": {"T": "float32"}}])
    mine = specialize(made.spec, {"T": "float32"})
    theirs = specialize(captured, {"T": "float32"})
    assert mine.key == theirs.key and theirs.name == "mul_xy"
    other = ElementwiseSpec(name="mul_xy", in_params="T x, T y", out_params="T z", operation="z = x * y + 0",
                            cupy_headers=True)
    assert specialize(other, {"T": "float32"}).key != mine.key  # the code decides


def test_raw_module_key_is_the_raw_specs():
    code = 'extern "C" __global__ void k(float* x) { x[0] = 1; }\ntemplate<int N> __global__ void t(float* x) {}'
    module = RawSpec(name="anything", source=code, name_expressions=["t<3>"], options=["-DX=1"])
    assert specialize(module).key == raw_module_key(code, ("-DX=1",), ("t<3>",))
    single = RawSpec(name="k", source=code, kernels=["k"], launch={"block": 64})  # launch defaults are not code
    assert specialize(single).key == raw_module_key(code, (), ("k",))
    assert raw_module_key(code, (), ("k",)) != raw_module_key(code, ("-DX=1",), ("k",))


# -- the specializations field -----------------------------------------------------------------------------


@pytest.mark.parametrize(("entries", "field", "words"), [
    ([{"types": {"T": "float32"}, "size": 3}], "specializations[0]", "unknown key 'size'"),
    ([{"types": {"U": "float32"}}], "specializations[0].types", "unknown placeholder 'U'"),
    ([{}], "specializations[0].types", "does not bind placeholder 'T'"),
    ([{"types": {"T": "float32"}, "scalars": ["z"]}], "specializations[0].scalars", "'z' is not an input"),
    ([{"types": {"T": "float32"}, "raw_layouts": {"x": [2, True]}}], "specializations[0].raw_layouts",
     "'x' is not a raw parameter"),
    ([{"types": {"T": "float32"}, "raw_layouts": {"w": [2, "yes"]}}], "specializations[0].raw_layouts",
     "expected [ndim, c_contiguous]"),
    ({"types": {"T": "float32"}}, "specializations", "must be a list"),
    ([{"types": {"T": "float32"}, "variants": ["fast/int64/0/1"]}], "specializations[0].variants",
     "'fast/int64/0/1' is not a launch variant"),
    ([{"types": {"T": "float32"}, "variants": ["contig/int16/0/1"]}], "specializations[0].variants", "int32 or int64"),
    ([{"types": {"T": "float32"}, "variants": "contig/int64/0/4"}], "specializations[0].variants", "non-empty list"),
])
def test_specializations_errors_name_the_entry(entries, field, words):
    with pytest.raises(InstantiationError) as info:
        parse_spec({"kind": "elementwise", "name": "k", "in_params": "T x, raw T w", "out_params": "T z",
                    "operation": "z = x", "specializations": entries})
    assert isinstance(info.value, SpecError) and info.value.field == field and words in str(info.value)


# -- what cannot be captured -------------------------------------------------------------------------------


def test_what_cannot_be_a_spec_is_reported_not_written(tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    site = {"module": "lib.filters", "file": "lib/filters.py", "line": 7}
    lines = [
        {"kind": "raw", "code": "__global__ void f() {}", "options": [], "name_expressions": [], "backend": "nvcc",
         "translate_cucomplex": False, "label": "raw_module", "site": site},
        {"kind": "elementwise", "spec": {"kind": "elementwise", "name": "k", "in_params": "T x", "out_params": "T y",
                                          "operation": "y = x"}, "types": {"T": "float128"}, "scalars": [],
         "raw_layouts": {}, "site": site},
        {"kind": "elementwise", "spec": {"kind": "elementwise", "name": "ok", "in_params": "T x", "out_params": "T y",
                                          "operation": "y = x"}, "types": {"T": "int8"}, "scalars": [],
         "raw_layouts": {}, "site": site},
    ]
    (records / "records-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines) + '{"kind": "elem')  # a cut line
    report = write_captured(records, tmp_path / "out")
    assert report.kernels == 1 and [p.name for p in report.files] == ["lib_filters.toml"]
    whys = dict(report.not_captured)
    assert any("backend='nvcc'" in why for why in whys.values()), whys
    assert any("float128" in why for why in whys.values()), whys


def test_recorder_records_constructor_site_and_stops(tmp_path):
    recorder = Recorder(tmp_path).start()
    try:
        k = kspec.ElementwiseKernel("T x", "T y", "y = x + 7", "plus_seven_recorded")
        spec = k.spec
        from kspec.kernels.records import _specialization_memo  # the memo a call fills: specialize as a call would

        _specialization_memo.specialization_of(spec, k._key, {"T": "float32"}, frozenset())
    finally:
        recorder.stop()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        record = json.loads(recorder.path.read_text().splitlines()[-1])
    assert record["spec"]["name"] == "plus_seven_recorded" and record["types"] == {"T": "float32"}
    assert record["site"]["file"].endswith("test_capture.py") and record["site"]["module"] == __name__
    after = kspec.ElementwiseKernel("T x", "T y", "y = x + 8", "plus_eight_recorded")
    _specialization_memo.specialization_of(after.spec, after._key, {"T": "float32"}, frozenset())
    assert "plus_eight" not in recorder.path.read_text()  # stopped: no more records


def test_a_generated_modules_kernels_served_by_their_binaries_are_not_captured(tmp_path, on_cpu_device):
    # a generated module's kernels (load_specs with binaries=) are specs already: capturing them again would add a
    # second copy of each to the captured specs, a raw one named after kspec's launch code as its site
    import numpy as np

    from kspec.kernels import load_specs

    (tmp_path / "k.toml").write_text(textwrap.dedent("""\
        schema = 1
        [[kernel]]
        kind = "raw"
        name = "triple_captured"
        kernels = ["triple_captured"]
        source = '''
        extern "C" __global__ void triple_captured(float* y, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] *= 3; }
        '''
        [[kernel]]
        kind = "elementwise"
        name = "plus_one_captured"
        in_params = "T x"
        out_params = "T y"
        operation = "y = x + 1"
        instantiations = [{T = ["float32"]}]
        """))
    _run([sys.executable, "-m", "kspec", "build", "k.toml", "-o", "out", "--arch", "host", "-q"], tmp_path, _env(tmp_path))
    library = load_specs([spec.to_data() for spec in load_file(tmp_path / "k.toml")], binaries=tmp_path / "out")
    recorder = Recorder(tmp_path / "records").start()
    try:
        y = np.ones(4, dtype=np.float32)  # the CPU device's arrays: NumPy's
        library.triple_captured((1,), (4,), (y, np.int32(4)))
        plus = library.plus_one_captured(y)
        mine = kspec.RawKernel('extern "C" __global__ void mine_captured(float* y) { y[0] = 1; }', "mine_captured")
        mine((1,), (1,), (y,))
    finally:
        recorder.stop()
    assert y.tolist() == [1.0, 3.0, 3.0, 3.0] and plus.tolist() == [4.0, 4.0, 4.0, 4.0]
    assert {e.source for e in kspec.compile_log() if e.kernel.endswith("_captured") and "mine" not in e.kernel} == {"binary"}
    lines = [json.loads(line) for line in recorder.path.read_text().splitlines()]
    lines = [line for line in lines if line["kind"] != "call_path"]  # generated code the calls used: any kernel's
    assert lines and all(line["kind"] == "raw" and "mine_captured" in line["code"] for line in lines), lines
    assert all(line["site"]["file"].endswith("test_capture.py") for line in lines), lines  # the constructor's site


# -- the stores a kernel finds its binary in by content ----------------------------------------------------


def test_register_binaries_refuses_a_directory_without_a_build(tmp_path):
    with pytest.raises(kspec.KspecValueError, match="manifest.json"):
        kspec.register_binaries(tmp_path)


def test_stores_from_the_environment_and_installed_packages(tmp_path):
    """KSPEC_BINARIES entries and <prefix>/share/kspec/binaries registrations are found once per process; a damaged
    one warns and is skipped (the kernels compile as they would without it)."""
    share = tmp_path / "prefix" / "share" / "kspec" / "binaries"
    share.mkdir(parents=True)
    site = tmp_path / "site"
    binaries = site / "pkg" / "kernels" / "_binaries"
    binaries.mkdir(parents=True)
    (binaries / "manifest.json").write_text(json.dumps({"kspec_manifest": 2, "kspec_version": "0", "entries": []}))
    (share / "pkg.json").write_text(json.dumps({"kspec_binaries": 1, "binaries": "pkg/kernels/_binaries"}))
    (share / "broken.json").write_text("{not json")
    (share / "gone.json").write_text(json.dumps({"kspec_binaries": 1, "binaries": "gone/_binaries"}))
    code = textwrap.dedent(f"""
        import sys, warnings
        sys.prefix = {str(tmp_path / 'prefix')!r}
        sys.path.insert(0, {str(site)!r})
        import kspec
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            stores = kspec.registered_binaries()
        print([str(s.directory) for s in stores])
        print(sorted(type(w.message).__name__ + ": " + str(w.message)[:300] for w in caught))
    """)
    env = {**_env(tmp_path), "KSPEC_BINARIES": os.pathsep.join([str(tmp_path / "missing"), ""])}
    out = _run([sys.executable, "-c", code], tmp_path, env).stdout.splitlines()
    stores, warned = eval(out[0]), eval(out[1])  # noqa: S307 - our own program's printed lists
    assert stores == [str(binaries)]
    assert len(warned) == 3 and all(w.startswith("BinaryWarning") for w in warned), warned
    assert any("KSPEC_BINARIES names" in w for w in warned) and any("broken.json" in w for w in warned)


STALE_PROGRAM = '''
import numpy as np
import kspec

body = """
const ptrdiff_t n1 = _raw_y.shape()[1], n2 = _raw_y.shape()[2];
y = x[i] * 2 + (Y)((i / n2) % n1 * 10 + i % n2);"""
k = kspec.ElementwiseKernel("raw X x", "Y y", body, "views_only_stale", reduce_dims=False)
y = np.zeros((2, 3, 4), np.float32)
k(np.arange(24, dtype=np.float32), y)
print(y.ravel().tolist())
'''


def test_a_capture_made_before_dense_entries_still_serves_under_never(tmp_path):
    """A capture made before the planner chose an indexed module's dense entry recorded the strided one (here: a
    capture's variant rewritten as such a capture wrote it). A C-contiguous call plans the dense entry; served from
    that build (KSPEC_COMPILE=never, empty cache) it loads the stored strided entry, which takes the same
    parameters, instead of being refused."""
    import numpy as np

    env = _env(tmp_path)
    (tmp_path / "program.py").write_text(STALE_PROGRAM)
    run = _run([sys.executable, "-m", "kspec", "capture", "-o", "specs", "--", sys.executable, "program.py"], tmp_path, env)
    captured = (tmp_path / "specs" / "main.toml").read_text()
    assert '"dense/int32/3/1"' in captured and "strided/" not in captured
    (tmp_path / "specs" / "main.toml").write_text(captured.replace('"dense/int32/3/1"', '"strided/int32/3/1"'))
    _run([sys.executable, "-m", "kspec", "build", "specs", "-o", "build", "--arch", "host", "-q"], tmp_path, env)
    entries = json.loads((tmp_path / "build" / "manifest.json").read_text())["entries"]
    assert [e.get("variant") for e in entries if e["kind"] != "raw"] == ["strided/int32/3/1"]
    (tmp_path / "serve.py").write_text(SERVE)
    serve_env = {**env, "KSPEC_COMPILE": "never", "KSPEC_BINARIES": str(tmp_path / "build"),
                 "KSPEC_CACHE_DIR": str(tmp_path / "cache"), "KSPEC_MEMO_DIR": str(tmp_path / "memo")}
    served = _run([sys.executable, "serve.py"], tmp_path, serve_env).stdout.splitlines()
    coords = np.indices((2, 3, 4))
    want = np.arange(24, dtype=np.float32).reshape(2, 3, 4) * 2 + coords[1] * 10 + coords[2]
    assert served[0] == run.stdout.splitlines()[0] == str(want.ravel().tolist())
    assert eval(served[1]) == [("views_only_stale", "binary")]  # noqa: S307 - our own program's printed list
