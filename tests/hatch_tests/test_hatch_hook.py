"""The hatchling build hook (kspec.hatch) and examples/deploy, on a machine without a GPU.

Builds go through ``python -m build --no-isolation`` (see deploy_build.py: the PEP 517 path a user takes,
not hatchling's API, since build's dependency check passes here). Finer checks of the hook (editable
rewrites, clean, errors) drive hatchling's WheelBuilder in-process, with the plugin registered directly.
Nothing is written into the repository: every build works on a copy of examples/deploy under tmp_path.
"""

from __future__ import annotations

import json
import re
import site
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("hatchling", reason="the build hook's tests need hatchling (the test extra)")

from kspec import CompileError, KspecValueError, SpecError  # noqa: E402
from kspec.hatch import COMMAND, BuildHookError, HookOptions, KspecBuildHook  # noqa: E402

from helpers.deploy_build import (  # noqa: E402
    NO_NVRTC, ROOT, build, build_env, copy_example, entry_point_shim, make_venv, one, pip_install,
)

PREFIX = "tool.hatch.build.hooks.kspec"
PACKAGE = "deploy_example/kernels"
ARCHS = ("sm_80", "sm_90")
# (kernel, instantiation, inputs passed by value): `float32 scale` is compiled both as an array and as a number
INSTANTIATIONS = {
    ("scaled_diff", "T=float32", ()), ("scaled_diff", "T=float16", ()),
    ("scaled_diff", "T=float32", ("scale",)), ("scaled_diff", "T=float16", ("scale",)),
    ("l2norm", "default", ()),
}  # fmt: skip
MODULES = len(INSTANTIATIONS) * 2  # two archs


# -- option validation ---------------------------------------------------------------------------------------


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "specs").mkdir()
    return tmp_path


def test_defaults(project: Path) -> None:
    options = HookOptions.from_config({"output": "./src/pkg/kernels/"}, project)
    assert options == HookOptions(specs="specs", output="src/pkg/kernels", archs=None, ptx=False,
                                  skip_env="KSPEC_SKIP_COMPILE", jobs=None)  # fmt: skip


def test_all_options_and_hatchling_keys(project: Path) -> None:
    (project / "kspec-specs").mkdir()
    config = {
        "specs": "kspec-specs", "output": "pkg/kernels", "archs": ["sm_90", "sm_80", "sm_90"], "ptx": True,
        "skip-env": "NO_CUDA_BUILD", "jobs": 3, "dependencies": [], "enable-by-default": True,
    }  # fmt: skip
    options = HookOptions.from_config(config, project)
    assert (options.specs, options.archs, options.ptx, options.skip_env, options.jobs) == (
        "kspec-specs", ("sm_90", "sm_80"), True, "NO_CUDA_BUILD", 3)  # fmt: skip


@pytest.mark.parametrize(
    ("config", "option", "words"),
    [
        ({}, "output", "required"),
        ({"output": 5}, "output", "expected a path"),
        ({"output": "/abs/kernels"}, "output", "inside the project"),
        ({"output": "../elsewhere/kernels"}, "output", "inside the project"),
        ({"output": "src/pkg/my-kernels"}, "output", "not a Python identifier"),
        ({"output": "src/pkg/class"}, "output", "not a Python identifier"),
        ({"output": "k", "specs": "nowhere"}, "specs", "no directory 'nowhere'"),
        ({"output": "k", "specs": ["specs"]}, "specs", "expected a path"),
        ({"output": "k", "archs": "sm_90"}, "archs", "non-empty list"),
        ({"output": "k", "archs": []}, "archs", "non-empty list"),
        ({"output": "k", "archs": ["sm_90", "sm90"]}, "archs[1]", "'sm90'"),
        ({"output": "k", "archs": [90]}, "archs[0]", "90"),
        ({"output": "k", "ptx": "yes"}, "ptx", "true or false"),
        ({"output": "k", "skip-env": ""}, "skip-env", "environment variable name"),
        ({"output": "k", "skip-env": "1SKIP"}, "skip-env", "environment variable name"),
        ({"output": "k", "jobs": 0}, "jobs", "positive integer"),
        ({"output": "k", "jobs": "4"}, "jobs", "positive integer"),
        ({"output": "k", "jobs": True}, "jobs", "positive integer"),
        ({"output": "k", "arch": ["sm_90"]}, "arch", "did you mean 'archs'"),
        ({"output": "k", "bogus": 1}, "bogus", "unknown option"),
    ],
)
def test_bad_option_names_it(project: Path, config: dict[str, Any], option: str, words: str) -> None:
    with pytest.raises(BuildHookError) as info:
        HookOptions.from_config(config, project)
    message = str(info.value)
    assert message.startswith(f"{PREFIX}.{option}: "), message
    assert words in message, message
    assert isinstance(info.value, KspecValueError) and isinstance(info.value, ValueError)


def test_config_must_be_a_table(project: Path) -> None:
    with pytest.raises(BuildHookError, match=re.escape(f"{PREFIX}: expected a table")):
        HookOptions.from_config(["specs"], project)  # type: ignore[arg-type]


@pytest.mark.parametrize(("value", "skip"), [("1", True), ("true", True), ("YES", True), (" on ", True), ("", False),
                                             ("0", False), ("false", False), ("off", False), (None, False)])  # fmt: skip
def test_skip_env_values(project: Path, value: str | None, skip: bool) -> None:
    options = HookOptions.from_config({"output": "k", "skip-env": "MY_SKIP"}, project)
    environ = {} if value is None else {"MY_SKIP": value}
    assert options.skip_requested(environ) is skip


def test_skip_env_bad_value_names_variable_and_option(project: Path) -> None:
    options = HookOptions.from_config({"output": "k"}, project)
    with pytest.raises(BuildHookError) as info:
        options.skip_requested({"KSPEC_SKIP_COMPILE": "maybe"})
    assert "KSPEC_SKIP_COMPILE='maybe'" in str(info.value) and f"{PREFIX}.skip-env" in str(info.value)


def test_compile_archs(project: Path) -> None:
    from kspec.compiler import DEFAULT_ARCHS, supported_archs

    default = HookOptions.from_config({"output": "k"}, project).compile_archs()
    assert default == [a for a in DEFAULT_ARCHS if a in supported_archs()] and "sm_90" in default
    ptx = HookOptions.from_config({"output": "k", "archs": ["sm_90", "sm_80"], "ptx": True}, project)
    assert ptx.compile_archs() == ["sm_90", "sm_80", "compute_90"]
    old = HookOptions.from_config({"output": "k", "archs": ["sm_80", "sm_35"]}, project)
    with pytest.raises(BuildHookError, match=re.escape(f"{PREFIX}.archs[1]: 'sm_35' is not a target of the installed NVRTC")):
        old.compile_archs()


# -- registration and layering -------------------------------------------------------------------------------


def test_entry_point_declared_and_registers_the_hook() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["entry-points"]["hatch"] == {"kspec": "kspec.hatch._plugin"}
    from kspec.hatch import _plugin

    assert _plugin.hatch_register_build_hook() is KspecBuildHook
    assert KspecBuildHook.PLUGIN_NAME == "kspec"


def test_layering(env: dict[str, str]) -> None:
    """The hook never imports the runtime or the kernels (no GPU on a build machine); only kspec.hatch imports hatchling."""
    code = (
        "import sys, kspec.hatch, kspec.hatch._plugin, kspec.build, kspec.codegen; "
        "bad = [m for m in sys.modules if m.startswith(('kspec.runtime', 'kspec.kernels', 'cuda.bindings.driver'))]; "
        "assert not bad, bad; "
        "[sys.modules.pop(m) for m in list(sys.modules) if m.startswith(('kspec', 'hatchling'))]; "
        "import kspec, kspec.build, kspec.codegen, kspec.cli, kspec.cli._build_cmd, kspec.cli._generate_cmd; "
        "assert not [m for m in sys.modules if m.startswith('hatchling')], 'hatchling imported by kspec'"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# -- helpers for builds --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of build and install subprocesses (KSPEC_CACHE_DIR stays the session's: later builds hit it)."""
    return build_env(entry_point_shim(tmp_path_factory.mktemp("entry-point")))


def _members(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        assert len(names) == len(set(names)), "duplicate entries in the wheel"
        return {n: z.read(n) for n in names}


# -- the example, built by python -m build ------------------------------------------------------------------


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("deploy")
    project = copy_example(base / "deploy")
    tree = build(project, base / "from-tree", "--wheel", env=env)
    both = build(project, base / "from-sdist", env=env)  # no --sdist/--wheel: an sdist, then a wheel built from it
    assert not (project / "src" / PACKAGE).exists(), "a standard build wrote into the source tree"
    return {
        "wheel": one(base / "from-tree", "*.whl"),
        "sdist": one(base / "from-sdist", "*.tar.gz"),
        "sdist_wheel": one(base / "from-sdist", "*.whl"),
        "log": tree.stdout + tree.stderr,
        "sdist_log": both.stdout + both.stderr,
        "project": project,
    }


def test_wheel_is_pure_and_has_modules_and_binaries(builds: dict[str, Any]) -> None:
    wheel: Path = builds["wheel"]
    assert wheel.name == "deploy_example-0.1.0-py3-none-any.whl"
    files = _members(wheel)
    wheel_meta = files["deploy_example-0.1.0.dist-info/WHEEL"].decode()
    assert "Root-Is-Purelib: true" in wheel_meta and "Tag: py3-none-any" in wheel_meta
    for module in ("deploy_example/__init__.py", f"{PACKAGE}/__init__.py", f"{PACKAGE}/ops.py"):
        assert module in files, sorted(files)
    # PEP 561 markers: the generated package, and its top-level package (which the example ships without one)
    assert files[f"{PACKAGE}/py.typed"] == b"" and files["deploy_example/py.typed"] == b""
    ops = files[f"{PACKAGE}/ops.py"].decode()
    assert ops.startswith(f"# Generated by kspec 0.1.0 with: {COMMAND}\n")
    assert "spec file specs/ops.toml" in ops.splitlines()[1]  # relative to the project: reproducible
    assert "def scaled_diff(" in ops and "def l2norm(" in ops

    manifest = json.loads(files[f"{PACKAGE}/_binaries/manifest.json"])
    entries = manifest["entries"]
    assert {(e["kernel"], "default" if not e["instantiation"] else ",".join(f"{k}={v}" for k, v in e["instantiation"].items()),
             tuple(e["scalars"]), e["arch"])
            for e in entries} == {(k, i, sc, a) for k, i, sc in INSTANTIATIONS for a in ARCHS}  # fmt: skip
    fields = {"kernel", "kind", "instantiation", "scalars", "arch", "format", "file", "lowered_names", "source_sha256",
              "specialization_key", "nvrtc_version", "registers"}  # fmt: skip
    for e in entries:
        assert fields <= set(e), set(e) ^ fields
        assert e["format"] == "cubin" and e["lowered_names"] and len(e["nvrtc_version"]) == 2
        data = files[f"{PACKAGE}/_binaries/{e['file']}"]
        assert data[:4] == b"\x7fELF", e["file"]  # a CUBIN is an ELF image
        if e["kind"] != "raw":  # the launch interface, read by the process serving the binary
            assert json.loads(files[f"{PACKAGE}/_binaries/{e['interface']}"])["interface"]
    # the binaries registered for lookup by content (issue [CAP]): shared data installed under <prefix>/share/kspec
    registration = json.loads(files["deploy_example-0.1.0.data/data/share/kspec/binaries/deploy_example.json"])
    assert registration == {"kspec_binaries": 1, "binaries": f"{PACKAGE}/_binaries"}
    binaries = {n for n in files if n.startswith(f"{PACKAGE}/_binaries/") and not n.endswith("manifest.json")}
    listed = {e[field] for e in entries for field in ("file", "interface") if field in e}
    assert binaries == {f"{PACKAGE}/_binaries/{rel}" for rel in listed}  # nothing the manifest does not name


def test_build_prints_a_summary(builds: dict[str, Any]) -> None:
    assert re.search(rf"kspec: {MODULES} modules for sm_80,sm_90 in [\d.]+ s \(\d+ from the cache\)", builds["log"]), builds["log"]


def test_sdist_ships_specs_not_generated_files(builds: dict[str, Any]) -> None:
    import tarfile

    with tarfile.open(builds["sdist"]) as tar:
        names = {n.partition("/")[2] for n in tar.getnames()}
    assert {"specs/ops.toml", "pyproject.toml", "src/deploy_example/__init__.py"} <= names, sorted(names)
    assert not [n for n in names if "kernels" in n or n.endswith(".cubin")], sorted(names)


def test_wheel_from_sdist_is_the_same(builds: dict[str, Any]) -> None:
    from_tree, from_sdist = _members(builds["wheel"]), _members(builds["sdist_wheel"])
    assert sorted(from_tree) == sorted(from_sdist)
    for name in from_tree:
        if name.startswith(PACKAGE + "/"):
            assert from_tree[name] == from_sdist[name], name


def test_skip_env_ships_typed_modules_without_binaries(tmp_path: Path, env: dict[str, str]) -> None:
    project = copy_example(tmp_path / "deploy")
    proc = build(project, tmp_path / "dist", "--wheel", env={**env, "KSPEC_SKIP_COMPILE": "1"})
    assert "KSPEC_SKIP_COMPILE is set: compiling nothing" in proc.stdout + proc.stderr
    files = _members(one(tmp_path / "dist", "*.whl"))
    assert {f"{PACKAGE}/__init__.py", f"{PACKAGE}/ops.py"} <= set(files)
    assert not [n for n in files if "_binaries" in n], sorted(files)


# -- installs --------------------------------------------------------------------------------------------------


_venv, _pip = make_venv, pip_install  # kept in deploy_build.py: test_capture_wheel.py installs wheels too


_IMPORT_CHECK = NO_NVRTC + r'''
import json
from pathlib import Path

import deploy_example
from deploy_example.kernels import ops
from kspec.kernels import BinaryStore
from kspec.render import specialize

print("deploy_example:", deploy_example.__file__)
assert callable(deploy_example.scaled_diff) and callable(ops.scaled_diff) and callable(ops.l2norm)
binaries = Path(ops.__file__).resolve().parent / "_binaries"
store = BinaryStore(binaries)
# What a device would load: the CUBIN of its major arch with the highest minor not above its own.
picks = {"sm_80": "sm_80", "sm_86": "sm_80", "sm_89": "sm_80", "sm_90": "sm_90", "sm_100": None, "sm_75": None}
for name, bindings in (("scaled_diff", [{"T": "float32"}, {"T": "float16"}]), ("l2norm", [{}])):
    spec = ops._KERNELS.spec(name)
    for types in bindings:
        key = specialize(spec, types).key
        for device, arch in picks.items():
            found = store.find(key, device)
            assert (found.arch if found else None) == arch, (name, types, device, found)
import kspec.compiler._nvrtc as nvrtc_layer
assert nvrtc_layer._module is None, "NVRTC was loaded"
assert "cuda.bindings.nvrtc" not in sys.modules and not [m for m in sys.modules if m.startswith("nvidia.cuda_nvrtc")]
print("ok")
'''


def _run(python: Path, code: str, cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run([str(python), "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_installed_wheel_imports_without_nvrtc(builds: dict[str, Any], tmp_path: Path, env: dict[str, str]) -> None:
    python = _venv(tmp_path / "venv")
    _pip(python, env, "--no-index", str(builds["wheel"]))
    out = _run(python, _IMPORT_CHECK, tmp_path, env)
    assert str(tmp_path / "venv") in out and out.strip().endswith("ok"), out
    # the installed package's binaries serve any kernel of the same code by content, found without importing it
    code = ("import sys, kspec; stores = kspec.registered_binaries(); "
            "assert 'deploy_example' not in sys.modules; print([str(s.directory) for s in stores])")
    listed = _run(python, code, tmp_path, {k: v for k, v in env.items() if k != "KSPEC_BINARIES"})
    assert f"{PACKAGE}/_binaries" in listed and str(tmp_path / "venv") in listed, listed


_USER_SCRIPT = """
from deploy_example.kernels import ops

def good(x: object) -> None:
    ops.scaled_diff(1.0, 2.0, 0.5)

def wrong() -> None:
    ops.scaled_diff("not an array", 2.0, 0.5)
    ops.l2norm(1.0, 2.0, 3.0, axis=1)
"""


def test_type_checker_sees_the_installed_wheels_typed_api(builds: dict[str, Any], tmp_path: Path, env: dict[str, str]) -> None:
    """mypy on a user's script, against the wheel installed in a fresh venv (not the source tree): the generated
    functions are typed (py.typed in the wheel), so a wrong call is rejected and a right one is not."""
    pytest.importorskip("mypy")
    python = _venv(tmp_path / "venv")
    _pip(python, env, "--no-index", str(builds["wheel"]))
    script = tmp_path / "user.py"
    script.write_text(_USER_SCRIPT)
    proc = subprocess.run([str(python), "-m", "mypy", "--no-incremental", "--cache-dir", str(tmp_path / ".mypy"), str(script)],
                          env=env, capture_output=True, text=True, cwd=tmp_path, timeout=300)  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "missing library stubs or py.typed marker" not in out, out
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert {line.split(":")[1] for line in errors} == {"8", "9"}, out  # the two wrong calls, nothing else


def test_child_venv_has_nvidia_wheels_of_its_own_and_nothing_of_the_base(tmp_path: Path) -> None:
    """What the install tests' venvs see: NVRTC where cuda.pathfinder looks (the venv's site-packages), and
    no site directory of the interpreter the venv is based on (only this environment's, through the .pth)."""
    if not any(Path(d, "nvidia").is_dir() for d in site.getsitepackages()):
        pytest.skip("this environment has no NVIDIA wheels (NVRTC comes from the system)")
    python = _venv(tmp_path / "venv")
    code = ("import site, sys\n"
            "from cuda.pathfinder import load_nvidia_dynamic_lib\n"
            "print(load_nvidia_dynamic_lib('nvrtc').abs_path)\n"
            "print(*site.getsitepackages(), sep='\\n')\n")  # fmt: skip
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    nvrtc, *site_dirs = proc.stdout.splitlines()
    assert site_dirs and all(Path(d).is_relative_to(tmp_path / "venv") for d in site_dirs), site_dirs
    assert any(Path(nvrtc).is_relative_to(Path(d, "nvidia")) for d in site_dirs), nvrtc


def test_editable_install_writes_into_the_source_tree(tmp_path: Path, env: dict[str, str]) -> None:
    project = copy_example(tmp_path / "deploy")
    python = _venv(tmp_path / "venv")
    _pip(python, env, "--no-build-isolation", "-e", str(project))
    generated = project / "src" / PACKAGE
    assert {"__init__.py", "ops.py"} <= {p.name for p in generated.glob("*.py")}
    manifest = json.loads((generated / "_binaries" / "manifest.json").read_text())
    assert len(manifest["entries"]) == MODULES and all((generated / "_binaries" / e["file"]).is_file() for e in manifest["entries"])
    out = _run(python, _IMPORT_CHECK, tmp_path, env)
    assert str(project / "src" / "deploy_example") in out and out.strip().endswith("ok"), out


# -- the hook driven in-process (editable rewrites, clean, errors) ------------------------------------------


def _builder(project: Path) -> Any:
    from hatchling.builders.wheel import WheelBuilder
    from hatchling.plugin.manager import PluginManager

    from kspec.hatch import _plugin

    manager = PluginManager()
    manager.manager.register(_plugin, name="kspec")  # the entry point of that name, if installed, is then skipped
    return WheelBuilder(str(project), plugin_manager=manager)


def _hooks(project: Path, version: str, tmp_path: Path) -> None:
    list(_builder(project).build(directory=str(tmp_path / "dist"), versions=[version], hooks_only=True))


def _snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {p.relative_to(directory).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(directory.rglob("*")) if p.is_file()}  # fmt: skip


def test_editable_rebuild_rewrites_only_changes_and_clean_removes_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KSPEC_SKIP_COMPILE", raising=False)
    project = copy_example(tmp_path / "deploy")
    generated = project / "src" / PACKAGE
    generated.mkdir(parents=True)
    (generated / "helpers.py").write_text("# a file of the user's: never touched\n")
    _hooks(project, "editable", tmp_path)
    first = _snapshot(generated)
    assert "ops.py" in first and "_binaries/manifest.json" in first
    assert any(re.fullmatch(r"_binaries/l2norm/default\.sm_90\.[0-9a-f]{16}\.cubin", name) for name in first)
    _hooks(project, "editable", tmp_path)
    assert _snapshot(generated) == first  # same bytes, same mtimes: nothing rewritten

    # A renamed spec file: its old module goes, the new one comes, the binaries stay (same kernels).
    (project / "specs" / "ops.toml").rename(project / "specs" / "vector_ops.toml")
    _hooks(project, "editable", tmp_path)
    after = _snapshot(generated)
    assert "ops.py" not in after and "vector_ops.py" in after
    assert {k: v for k, v in after.items() if k.startswith("_binaries/")} == {k: v for k, v in first.items() if k.startswith("_binaries/")}

    list(_builder(project).build(directory=str(tmp_path / "dist"), versions=["editable"], clean_only=True))
    assert sorted(p.name for p in generated.rglob("*")) == ["helpers.py"]


def test_standard_wheel_after_editable_build_has_no_duplicates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KSPEC_SKIP_COMPILE", raising=False)
    project = copy_example(tmp_path / "deploy")
    (project / ".gitignore").unlink()  # the generated files in the tree are now selected as project files too
    _hooks(project, "editable", tmp_path)
    staging_before = set(Path(tempfile.gettempdir()).glob("kspec-hatch-*"))
    (wheel,) = _builder(project).build(directory=str(tmp_path / "dist"), versions=["standard"])
    files = _members(Path(wheel))  # asserts unique names
    assert f"{PACKAGE}/ops.py" in files and f"{PACKAGE}/_binaries/manifest.json" in files
    assert set(Path(tempfile.gettempdir()).glob("kspec-hatch-*")) == staging_before  # finalize removed the staging


def _tiny_project(tmp_path: Path, spec: str) -> Path:
    project = tmp_path / "tiny"
    (project / "specs").mkdir(parents=True)
    (project / "specs" / "k.toml").write_text(spec)
    (project / "src" / "tiny").mkdir(parents=True)
    (project / "src" / "tiny" / "__init__.py").write_text("")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
        '[project]\nname = "tiny"\nversion = "0"\n'
        '[tool.hatch.build.targets.wheel]\npackages = ["src/tiny"]\n'
        '[tool.hatch.build.hooks.kspec]\noutput = "src/tiny/kernels"\narchs = ["sm_90"]\n'
    )
    return project


_KERNEL = 'schema = 1\n[[kernel]]\nkind = "elementwise"\nname = "k"\nin_params = "{x}"\nout_params = "float32 y"\noperation = "{op}"\n'


def test_spec_error_names_the_file(tmp_path: Path) -> None:
    project = _tiny_project(tmp_path, _KERNEL.format(x="float99 x", op="y = x"))
    with pytest.raises(SpecError) as info:
        _hooks(project, "standard", tmp_path)
    assert "k.toml" in str(info.value) and "float99" in str(info.value)


def test_compile_failure_lists_the_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KSPEC_SKIP_COMPILE", raising=False)
    project = _tiny_project(tmp_path, _KERNEL.format(x="float32 x", op="y = no_such_function(x)"))
    with pytest.raises(CompileError) as info:
        _hooks(project, "standard", tmp_path)
    message = str(info.value)
    assert "1 of 1 kernel modules failed to compile" in message and "FAILED k [-] sm_90" in message, message
    assert "no_such_function" in info.value.log


def test_sdist_target_does_nothing(tmp_path: Path) -> None:
    project = _tiny_project(tmp_path, _KERNEL.format(x="float99 x", op="y = x"))  # invalid: never read for an sdist
    from hatchling.builders.sdist import SdistBuilder
    from hatchling.plugin.manager import PluginManager

    from kspec.hatch import _plugin

    manager = PluginManager()
    manager.manager.register(_plugin, name="kspec")
    list(SdistBuilder(str(project), plugin_manager=manager).build(directory=str(tmp_path / "dist"), hooks_only=True))


def test_wheel_of_a_tuned_spec_ships_its_winners_and_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tuned raw spec (issue [AT]) with its record beside it: the wheel holds each config the record names for
    the hook's arch and the default, and the record's entries (each bucket's winner) as _binaries/tuning.json."""
    monkeypatch.delenv("KSPEC_SKIP_COMPILE", raising=False)
    repo = Path(__file__).resolve().parents[2]
    project = _tiny_project(tmp_path, (repo / "specs" / "tuned.toml").read_text())
    record = json.loads((repo / "specs" / "tuned.tune.json").read_text())
    (project / "specs" / "k.tune.json").write_text(json.dumps(record))
    (wheel,) = _builder(project).build(directory=str(tmp_path / "dist"), versions=["standard"])
    files = _members(Path(wheel))
    carried = json.loads(files["tiny/kernels/_binaries/tuning.json"])
    # what a call reads: each kernel's entry with each bucket's winner (not the runners-up, the skipped)
    for name, entry in record["archs"]["sm_90"]["kernels"].items():
        got = carried["archs"]["sm_90"]["kernels"][name]
        assert {k: v for k, v in got.items() if k != "buckets"} == {k: v for k, v in entry.items() if k != "buckets"}
        assert got["buckets"] == {label: {"winner": data["winner"]} for label, data in entry["buckets"].items()}
    winners = {f"transpose_tiled__ROWS{d['winner']['config']['ROWS']}_TILE{d['winner']['config']['TILE']}"
               for d in record["archs"]["sm_90"]["kernels"]["transpose_tiled"]["buckets"].values()}  # fmt: skip
    for name in winners | {"transpose_tiled__ROWS32_TILE32", "stencil5__BX16_BY16_PY1"}:
        assert any(m.startswith(f"tiny/kernels/_binaries/{name}/") and m.endswith(".cubin") for m in files), name
    assert "tiny/kernels/k.py" in files and not any(m.endswith(".tune.json") for m in files)
