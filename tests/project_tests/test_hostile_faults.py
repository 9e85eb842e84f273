"""Issue 27, faults: what used to be a traceback, a silent skip or a late NVRTC error is a typed error (or a
one-line CLI error) naming the file, the parameter or the kernel. No GPU needed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import kspec
from kspec.cli import main
from kspec.spec import load_file, parse_spec

from helpers.child_env import child_env

REPO = Path(__file__).resolve().parents[2]
SPECS = REPO / "specs"
RAW = SPECS / "raw.toml"


# --- JSON spec files with a duplicate key -----------------------------------------------------------------


@pytest.mark.parametrize("where", ["top", "kernel"])
def test_json_duplicate_key_is_refused_naming_file_and_key(tmp_path, where, capsys):
    kernel = '{"kind": "raw", "name": "r", "source": "x", "kernels": ["k"]'
    if where == "top":
        text = '{"schema": 1, "kernel": [' + kernel + '}], "schema": 1}'
        key = "schema"
    else:
        text = '{"schema": 1, "kernel": [' + kernel + ', "name": "other"}]}'
        key = "name"
    path = tmp_path / "dup.json"
    path.write_text(text)
    with pytest.raises(kspec.SpecFileError) as info:
        load_file(path)
    assert f"duplicate key {key!r}" in str(info.value) and str(path) in str(info.value)
    assert main(["validate", str(path)]) == 1
    assert f"duplicate key {key!r}" in capsys.readouterr().out


def test_toml_duplicate_key_was_already_refused(tmp_path):
    path = tmp_path / "dup.toml"
    path.write_text('schema = 1\nschema = 1\n')
    with pytest.raises(kspec.SpecFileError, match="invalid TOML"):
        load_file(path)


# --- reductions: a and b are reduce_expr's operands ---------------------------------------------------------


def _reduction(**fields: object) -> dict[str, object]:
    table: dict[str, object] = dict(kind="reduction", name="r", in_params="T x", out_params="T y", map_expr="x",
                                    reduce_expr="a + b", post_map_expr="y = a", identity="0")  # fmt: skip
    table.update(fields)
    return table


@pytest.mark.parametrize("letter", ["a", "b"])
def test_reduction_placeholder_a_or_b_is_refused_at_validate(letter):
    table = _reduction(in_params=f"{letter} x", out_params=f"{letter} y", instantiations=[{letter: "float32"}])
    with pytest.raises(kspec.ReservedNameError, match=f"type placeholder '{letter}'.*reduce_expr's operands"):
        parse_spec(table)
    with pytest.raises(kspec.ReservedNameError, match=f"type placeholder '{letter}'"):
        kspec.ReductionKernel(f"{letter} x", f"{letter} y", "x", "a + b", "y = a", "0", "r")


def test_reduction_parameter_named_a_is_still_refused():
    with pytest.raises(kspec.ReservedNameError, match="parameter name 'a'"):
        parse_spec(_reduction(in_params="T a", map_expr="a"))


@pytest.mark.parametrize("instantiations", [[], [{"T": "float32"}]])
def test_reduce_type_placeholder_no_parameter_binds_is_said_plainly(instantiations):
    with pytest.raises(kspec.SpecError) as info:
        parse_spec(_reduction(reduce_type="U", instantiations=instantiations))
    text = str(info.value)
    assert "reduce_type 'U' is a type placeholder that no parameter uses" in text
    assert "no call can give it a type" in text and "'T'" in text
    assert info.value.field == "reduce_type"  # not an instantiation that "leaves U unbound"


# --- kspec build --arch sm_80,sm_80 ----------------------------------------------------------------------------


def test_repeated_arch_compiles_once_with_a_note(monkeypatch, capsys):
    seen = {}

    def fake(units, **_):
        seen["archs"] = sorted({u.arch for u in units})
        seen["units"] = len(units)
        return [], 0.0

    monkeypatch.setattr("kspec.build.precompile_with_progress", fake)
    assert main(["build", str(RAW), "--arch", "sm_80"]) == 0
    once = seen["units"]
    capsys.readouterr()
    assert main(["build", str(RAW), "--arch", "sm_80,sm_90,sm_80"]) == 0
    assert seen["archs"] == ["sm_80", "sm_90"] and seen["units"] == 2 * once
    err = capsys.readouterr().err
    assert "note: --arch names sm_80 more than once; each target is compiled once" in err
    assert main(["build", str(RAW), "--arch", "sm_80,sm_80", "-q"]) == 0
    assert "note" not in capsys.readouterr().err  # --quiet: errors only


# --- kspec generate -o ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["existing file", "under a file", "/proc"])
def test_generate_o_problems_are_one_line_errors(tmp_path, capsys, case):
    a_file = tmp_path / "file"
    a_file.write_text("mine")
    target = {"existing file": a_file, "under a file": a_file / "sub", "/proc": Path("/proc/kspec-out")}[case]
    if case == "/proc" and not Path("/proc").is_dir():
        pytest.skip("no /proc here")
    assert main(["generate", str(SPECS), "-o", str(target)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("kspec: error: output ") and "Traceback" not in err
    assert a_file.read_text() == "mine" and (target == a_file or not target.exists())  # nothing created


def test_generate_that_fails_mid_write_changes_nothing(tmp_path, monkeypatch, capsys):
    out = tmp_path / "gen"
    assert main(["generate", str(SPECS), "-o", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    for p in out.iterdir():
        p.write_text("# stale\n")  # every module must be rewritten
    stale = {p.name: p.read_bytes() for p in out.iterdir()}
    import tempfile  # where kspec/_atomic.py makes its temporary files (imported there when it writes)

    real = tempfile.mkstemp
    calls = []

    def full_after_two(*args, **kwargs):
        calls.append(1)
        if len(calls) > 2 and "kspec-probe" not in kwargs.get("prefix", ""):
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", full_after_two)
    capsys.readouterr()
    assert main(["generate", str(SPECS), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "No space left on device" in err and "nothing written" in err and "Traceback" not in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == stale  # no module half-written, no tmp file left
    monkeypatch.undo()
    assert main(["generate", str(SPECS), "-o", str(out)]) == 0
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


# --- RawModule arguments, checked before any device work ------------------------------------------------------


@pytest.mark.parametrize("value", [5, {"f": 1}, {"f"}, b"f", 1.5])
def test_raw_module_name_expressions_not_a_sequence_of_str(value):
    with pytest.raises(kspec.KspecTypeError, match="name_expressions: expected a sequence of str"):
        kspec.RawModule(code="x", name_expressions=value)


@pytest.mark.parametrize("value", [[1], ["f", ""], ("f", None)])
def test_raw_module_name_expressions_items(value):
    with pytest.raises(kspec.KspecTypeError, match="name_expressions: every item must be a non-empty str"):
        kspec.RawModule(code="x", name_expressions=value)


def test_raw_module_name_expressions_accepted_forms():
    assert kspec.RawModule(code="x", name_expressions="f<int>").name_expressions == ("f<int>",)
    assert kspec.RawModule(code="x", name_expressions=["f", "g"]).name_expressions == ("f", "g")
    assert kspec.RawModule(code="x", name_expressions=(e for e in ["f"])).name_expressions == ("f",)


def test_raw_module_path_missing_is_a_file_not_found_error(tmp_path):
    with pytest.raises(kspec.KspecFileNotFoundError, match="path: no such file") as info:
        kspec.RawModule(path=tmp_path / "missing.cubin")
    assert isinstance(info.value, FileNotFoundError) and isinstance(info.value, kspec.KspecError)


@pytest.mark.parametrize("name", ["d.cubin", "plain_dir"])
def test_raw_module_path_directory_is_a_value_error(tmp_path, name):
    (tmp_path / name).mkdir()
    with pytest.raises(kspec.KspecValueError, match="path: .* is a directory"):
        kspec.RawModule(path=tmp_path / name)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_raw_module_path_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "k.cubin"
    os.mkfifo(fifo)  # opening it for reading would wait for a writer forever
    with pytest.raises(kspec.KspecValueError, match="not a regular file"):
        kspec.RawModule(path=fifo)


def test_raw_module_path_type():
    with pytest.raises(kspec.KspecTypeError, match="path: expected a file path"):
        kspec.RawModule(path=5)


# --- KSPEC_CACHE_DIR / cache --dir that cannot be a cache ----------------------------------------------------------


def _cache_targets(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    a_file = tmp_path / "file"
    a_file.write_text("mine")
    return {
        "regular file": (a_file, "is not a directory"),
        "/dev/null": (Path("/dev/null"), "is not a directory"),
        "under a file": (a_file / "sub", "cannot be created"),
        "/proc dir": (Path("/proc/self"), "cannot be written"),
        "/proc new": (Path("/proc/kspec-cache"), "cannot be created"),
    }


@pytest.mark.parametrize("how", ["--dir", "env"])
@pytest.mark.parametrize("action", ["info", "clear"])
@pytest.mark.parametrize("case", ["regular file", "/dev/null", "under a file", "/proc dir", "/proc new"])
def test_cache_dir_that_cannot_be_a_cache_is_an_error(tmp_path, monkeypatch, capsys, case, action, how):
    target, phrase = _cache_targets(tmp_path)[case]
    if case.startswith("/") and not Path(case.split()[0]).exists():
        pytest.skip(f"no {case.split()[0]} here")
    argv = ["cache", action]
    if how == "--dir":
        argv += ["--dir", str(target)]
    else:
        monkeypatch.setenv("KSPEC_CACHE_DIR", str(target))
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert phrase in captured.err and ("--dir" if how == "--dir" else "KSPEC_CACHE_DIR") in captured.err
    assert "entries" not in captured.out and "removed" not in captured.out  # not reported as an empty cache
    assert (tmp_path / "file").read_text() == "mine"


def test_cache_dir_not_created_yet_is_an_empty_cache(tmp_path, capsys):
    assert main(["cache", "info", "--dir", str(tmp_path / "new" / "cache")]) == 0
    assert "entries:   0" in capsys.readouterr().out


def test_cache_clear_in_a_directory_it_may_not_write_says_why(tmp_path, monkeypatch, capsys):
    # root ignores permission bits, so a read-only mount is simulated where the probe writes
    import kspec.cli._common as common

    def read_only(*args, **kwargs):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(common.tempfile, "mkstemp", read_only)
    assert main(["cache", "clear", "--dir", str(tmp_path)]) == 1
    assert "cannot be written: Read-only file system" in capsys.readouterr().err


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root may write a directory whatever its mode")
def test_cache_clear_in_a_read_only_directory_for_real(tmp_path, capsys):
    tmp_path.chmod(0o555)
    try:
        assert main(["cache", "clear", "--dir", str(tmp_path)]) == 1
        assert "cannot be written" in capsys.readouterr().err
    finally:
        tmp_path.chmod(0o755)



# --- spec directories: what cannot be searched is reported ---------------------------------------------------


@pytest.fixture
def spec_dir(tmp_path: Path) -> Path:
    root = tmp_path / "specs"
    (root / "real").mkdir(parents=True)
    (root / "real" / "raw.toml").write_bytes(RAW.read_bytes())
    return root


def _problems(root: Path) -> dict[str, tuple[str, str]]:
    """name -> (how to make it under root, the phrase reported)."""
    return {
        "dangling": ("gone.toml -> nowhere.toml", "leads to 'nowhere.toml', which does not exist"),
        "self": ("self.toml -> self.toml", "refers to itself"),
        "dangling dir": ("more -> missing_dir", "leads to 'missing_dir', which does not exist"),
        "loop": ("real/up -> ..", "a directory that contains it: a loop"),
    }


@pytest.mark.parametrize("case", ["dangling", "self", "dangling dir", "loop"])
def test_broken_links_in_a_spec_directory_are_reported(spec_dir, case, capsys):
    how, phrase = _problems(spec_dir)[case]
    name, target = how.split(" -> ")
    (spec_dir / name).symlink_to(target)
    with pytest.raises(kspec.SpecFileError, match=phrase) as info:
        kspec.load(spec_dir)
    assert info.value.file == str(spec_dir / name)
    assert main(["validate", str(spec_dir)]) == 1
    out = capsys.readouterr().out
    assert f"error: {spec_dir / name}: symbolic link" in out
    assert "raw.toml: 5 kernels, ok" in out and "1 file, 5 kernels, 1 errors" in out  # the rest is still checked
    assert main(["build", str(spec_dir), "--arch", "sm_80"]) == 1
    assert phrase in capsys.readouterr().err


def test_unreadable_subdirectory_is_reported(spec_dir, monkeypatch, capsys):
    # root reads any directory whatever its mode: the refusal is simulated where the search lists it
    import kspec.spec._scan as scan

    locked = spec_dir / "locked"
    locked.mkdir()
    real_scandir = os.scandir

    def scandir(path):  # type: ignore[no-untyped-def]
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied")
        return real_scandir(path)

    monkeypatch.setattr(scan.os, "scandir", scandir)
    with pytest.raises(kspec.SpecFileError, match="cannot read this directory: Permission denied") as info:
        kspec.load(spec_dir)
    assert info.value.file == str(locked)
    assert main(["validate", str(spec_dir)]) == 1
    assert f"error: {locked}: cannot read this directory" in capsys.readouterr().out


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root may read a directory whatever its mode")
def test_unreadable_subdirectory_for_real(spec_dir):
    locked = spec_dir / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        with pytest.raises(kspec.SpecFileError, match="cannot read this directory"):
            kspec.load(spec_dir)
    finally:
        locked.chmod(0o755)


def test_linked_spec_directory_is_searched_once(spec_dir):
    (spec_dir / "alias").symlink_to("real")
    assert sorted(kspec.load(spec_dir)) == sorted(kspec.load(RAW))  # no duplicate kernel names


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_named_like_a_spec_file_is_reported_not_read(spec_dir):
    os.mkfifo(spec_dir / "pipe.toml")  # reading it would block
    with pytest.raises(kspec.SpecFileError, match="not a regular file"):
        kspec.load(spec_dir)


def test_editor_lock_links_are_passed_over(spec_dir):
    (spec_dir / "real" / ".#raw.toml").symlink_to("user@host.1234")  # what Emacs leaves while editing raw.toml
    assert len(kspec.load(spec_dir)) == 5


# --- a build killed between its binaries and its manifest ---------------------------------------------------------

_KILLABLE = """schema = 1
[[kernel]]
kind = "raw"
name = "stays"
source = 'extern "C" __global__ void stays(float* y) {{ y[0] = 1; }}'
kernels = ["stays"]
[[kernel]]
kind = "raw"
name = "changes"
source = 'extern "C" __global__ void changes(float* y) {{ y[0] = {value}; }}'
kernels = ["changes"]
[[kernel]]
kind = "elementwise"
name = "scale"
in_params = "float32 x"
out_params = "{out_type} y"
operation = "y = x * {value}"
"""


def _spec_version(directory: Path, value: int, out_type: str = "float32") -> Path:
    path = directory / f"v{value}.toml"
    path.write_text(_KILLABLE.format(value=value, out_type=out_type))
    return path


def _served(out: Path) -> dict[str, bytes]:
    """What a reader of ``out`` gets: every manifest entry's binary, verified against its digest (a warning
    would be an error here), and each launch interface file it names."""
    import hashlib
    import warnings

    from kspec.build import read_manifest

    manifest = read_manifest(out)
    assert manifest is not None
    served = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for entry in manifest["entries"]:
            data = (out / entry["file"]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == entry["sha256"], entry["file"]
            served[entry["kernel"]] = data
            if "interface" in entry:
                assert (out / entry["interface"]).is_file()
    return served


def _listed(out: Path) -> set[Path]:
    from kspec.build import read_manifest

    entries = read_manifest(out)["entries"]
    return {out / e[f] for e in entries for f in ("file", "interface") if f in e} | {out / "manifest.json"}


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory):
    """A binary cache holding both spec versions' modules: the tests' builds then compile nothing."""
    base = tmp_path_factory.mktemp("two-builds")
    cache = base / "cache"
    previous = os.environ.get("KSPEC_CACHE_DIR")
    os.environ["KSPEC_CACHE_DIR"] = str(cache)
    try:
        for value, out_type in ((1, "float32"), (2, "float64")):
            spec = _spec_version(base, value, out_type)
            assert main(["build", str(spec), "--arch", "sm_80", "-o", str(base / f"warm{value}"), "-q"]) == 0
    finally:
        if previous is None:
            del os.environ["KSPEC_CACHE_DIR"]
        else:
            os.environ["KSPEC_CACHE_DIR"] = previous
    return cache


@pytest.fixture
def two_builds(tmp_path, monkeypatch, warm_cache):
    """An output directory built from spec version 1, and the spec of version 2 (other binaries, same names
    of kernels and instantiations)."""
    monkeypatch.setenv("KSPEC_CACHE_DIR", str(warm_cache))
    out = tmp_path / "out"
    v1, v2 = _spec_version(tmp_path, 1), _spec_version(tmp_path, 2, out_type="float64")
    assert main(["build", str(v1), "--arch", "sm_80", "-o", str(out), "-q"]) == 0
    return out, v1, v2


def test_build_killed_before_its_manifest_leaves_the_previous_build_whole(two_builds, tmp_path):
    import subprocess
    import sys

    out, v1, v2 = two_builds
    before = _served(out)
    # a real kill: the build process SIGKILLs itself where it would rename its manifest into place
    script = tmp_path / "killed_build.py"
    script.write_text(
        "import os, signal, sys\n"
        "import kspec._atomic as atomic\n"
        "from kspec.cli import main\n"
        "real = atomic.os.replace\n"
        "def replace(src, dst):\n"
        "    if str(dst).endswith('manifest.json'):\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    real(src, dst)\n"
        "atomic.os.replace = replace\n"
        f"sys.exit(main(['build', {str(v2)!r}, '--arch', 'sm_80', '-o', {str(out)!r}, '-q']))\n"
    )
    done = subprocess.run([sys.executable, str(script)], env=child_env(), capture_output=True, timeout=120)
    assert done.returncode == -9, done.stderr.decode()[-2000:]
    assert _served(out) == before  # the old manifest, and every byte it describes
    written = {p for p in out.rglob("*") if p.is_file()}
    assert len(written) > len(_listed(out))  # the killed build's new binaries are there, unlisted
    # the next build swaps in its set and removes the killed build's files as well as the old ones
    assert main(["build", str(v2), "--arch", "sm_80", "-o", str(out), "-q"]) == 0
    after = _served(out)
    assert after["stays"] == before["stays"] and after["changes"] != before["changes"]
    assert {p for p in out.rglob("*") if p.is_file()} == _listed(out)


@pytest.mark.parametrize("stop", ["manifest write", "after the manifest"])
def test_a_reader_sees_the_old_set_or_the_new_one_never_a_mix(two_builds, monkeypatch, stop):
    import kspec.build._output as output

    out, v1, v2 = two_builds
    before = _served(out)
    if stop == "manifest write":
        real = output._write_if_changed

        def killed(path, data):  # type: ignore[no-untyped-def]
            if path.name == "manifest.json":
                raise KeyboardInterrupt  # what SIGINT does between the binaries and the manifest
            real(path, data)

        monkeypatch.setattr(output, "_write_if_changed", killed)
    else:

        def killed_removing(*args, **kwargs):  # type: ignore[no-untyped-def]
            raise KeyboardInterrupt

        monkeypatch.setattr(output, "_remove_orphans", killed_removing)
        monkeypatch.setattr(output, "confined_file", killed_removing)
    with pytest.raises(KeyboardInterrupt):
        main(["build", str(v2), "--arch", "sm_80", "-o", str(out), "-q"])
    now = _served(out)
    if stop == "manifest write":
        assert now == before
    else:
        assert now["changes"] != before["changes"]  # the new set, whole, with the old files still beside it
    monkeypatch.undo()
    assert main(["build", str(v2), "--arch", "sm_80", "-o", str(out), "-q"]) == 0
    assert {p for p in out.rglob("*") if p.is_file()} == _listed(out)


def test_files_that_only_look_like_a_builds_are_kept(two_builds):
    out, v1, v2 = two_builds
    mine = out / "changes" / "notes.0123456789abcdef.cubin"  # a digest-like name its bytes do not match
    mine.write_bytes(b"my own file")
    assert main(["build", str(v2), "--arch", "sm_80", "-o", str(out), "-q"]) == 0
    assert mine.read_bytes() == b"my own file"


def test_a_damaged_binary_warns_once_naming_the_file(two_builds):
    import warnings

    from kspec.build import read_manifest
    from kspec.kernels import BinaryStore

    out, v1, v2 = two_builds
    entry = next(e for e in read_manifest(out)["entries"] if e["kernel"] == "changes")
    (out / entry["file"]).write_bytes(b"\x7fELF, but not these bytes")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):  # each kspec.load / generated module opens its own store
            assert BinaryStore(out).find(entry["specialization_key"], "sm_80") is None
    messages = [str(w.message) for w in caught if issubclass(w.category, kspec.BinaryWarning)]
    assert len(messages) == 1 and str(out / entry["file"]) in messages[0] and "sha256" in messages[0]


# --- a compile that does not end -----------------------------------------------------------------------------------


@pytest.mark.skipif(os.name != "posix", reason="compiles run in worker processes on POSIX only (no time limit elsewhere)")
def test_a_slow_compile_is_stopped_by_the_timeout_and_named_the_build_goes_on(tmp_path, monkeypatch, capsys):
    """A real NVRTC compile, not a stand-in: 8000 terms take NVRTC tens of seconds (its time grows faster
    than the expression; 50k terms did not finish in 120 s)."""
    import time

    big = "y = " + " + ".join(["x"] * 8000)
    spec = tmp_path / "slow.toml"
    spec.write_text('schema = 1\n[[kernel]]\nkind = "elementwise"\nname = "runaway"\nin_params = "float32 x"\n'
                    f'out_params = "float32 y"\noperation = "{big}"\n'
                    '[[kernel]]\nkind = "raw"\nname = "quick"\n'
                    "source = 'extern \"C\" __global__ void quick(float* y) { y[0] = 1; }'\nkernels = [\"quick\"]\n")  # fmt: skip
    monkeypatch.setenv("KSPEC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("KSPEC_COMPILE_TIMEOUT", "3")
    out = tmp_path / "out"
    start = time.monotonic()
    assert main(["build", str(spec), "--arch", "sm_80", "-o", str(out), "-q"]) == 1
    assert time.monotonic() - start < 30
    err = capsys.readouterr().err
    assert "FAILED runaway [-] sm_80" in err and "kernel 'runaway': compiling it took more than 3 s and was stopped" in err
    assert "KSPEC_COMPILE_TIMEOUT" in err
    from kspec.build import read_manifest

    assert [e["kernel"] for e in read_manifest(out)["entries"]] == ["quick"]  # the rest was built and written


def test_compile_timeout_from_the_environment_and_its_errors(monkeypatch, capsys):
    from kspec.compiler import DEFAULT_COMPILE_TIMEOUT_S, compile_timeout

    seen = {}

    def fake(units, *, timeout=None, **_):
        seen["timeout"] = timeout
        return [], 0.0

    monkeypatch.setattr("kspec.build.precompile_with_progress", fake)
    monkeypatch.delenv("KSPEC_COMPILE_TIMEOUT", raising=False)
    assert compile_timeout() == DEFAULT_COMPILE_TIMEOUT_S == 600
    monkeypatch.setenv("KSPEC_COMPILE_TIMEOUT", "42")
    assert main(["build", str(RAW), "--arch", "sm_80"]) == 0 and seen["timeout"] == 42
    assert main(["build", str(RAW), "--arch", "sm_80", "--compile-timeout", "0"]) == 0 and seen["timeout"] == 0
    for bad in ("-1", "nan", "inf", "ten"):
        monkeypatch.setenv("KSPEC_COMPILE_TIMEOUT", bad)
        capsys.readouterr()
        assert main(["build", str(RAW), "--arch", "sm_80"]) == 1
        assert f"KSPEC_COMPILE_TIMEOUT: expected seconds >= 0 (0: no limit), got {bad!r}" in capsys.readouterr().err
    with pytest.raises(kspec.KspecValueError, match="compile-timeout"):
        compile_timeout(True, param="compile-timeout")


def test_build_hook_compile_timeout_option(tmp_path, monkeypatch):
    pytest.importorskip("hatchling")
    from kspec.hatch._hook import HookOptions

    (tmp_path / "specs").mkdir()
    base = {"output": "pkg/kernels"}
    assert HookOptions.from_config(base, tmp_path).compile_timeout is None
    assert HookOptions.from_config({**base, "compile-timeout": 30}, tmp_path).compile_timeout == 30
    for bad in (-1, "30", True, [30]):
        with pytest.raises(kspec.KspecValueError, match="compile-timeout"):  # a BuildHookError
            HookOptions.from_config({**base, "compile-timeout": bad}, tmp_path)
