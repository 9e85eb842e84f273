"""Issue 20, data loss: kspec deletes only what it wrote, never serves a binary that is not the one its
manifest describes, and writes a build only into a directory it owns. No GPU needed."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest

import kspec
from kspec._manifest import read_index
from kspec.build import MANIFEST_NAME, plan_build, precompile, read_manifest, write_output
from kspec.cli import main
from kspec.compiler import BinaryCache, compile_cached
from kspec.kernels import BinaryStore
from kspec.render import specialize
from kspec.spec import load_file

REPO = Path(__file__).resolve().parents[2]
RAW = REPO / "specs" / "raw.toml"
SOURCE = 'extern "C" __global__ void f(float* y) { y[0] = 1; }'


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """The raw kernels of specs/raw.toml for sm_80, compiled once for this module."""
    specs = load_file(RAW)
    out = precompile(plan_build(specs, ["sm_80"]).units, cache=BinaryCache(tmp_path_factory.mktemp("cache")))
    assert all(r.ok for r in out)
    return out


# --- kspec cache clear ------------------------------------------------------------------------------------


def _old(path: Path) -> Path:
    past = time.time() - 7200  # older than the orphan age: clear would take it if it were kspec's
    os.utime(path, (past, past))
    return path


def test_cache_clear_deletes_only_kspec_entries(tmp_path, capsys):
    shared = tmp_path / "work"
    shared.mkdir()
    compile_cached(SOURCE, name="f", name_expressions=("f",), cache=BinaryCache(shared))
    (entry,) = [p for p in shared.glob("*.kbin")]
    user = {
        "notes.tmp": b"my notes",
        "thesis.kbin": b"chapter 1",
        f"{'0' * 64}.kbin": b"looks like a key, is not an entry",
        ".thesis.abcd1234.tmp": b"not kspec's magic",
        "draft.txt": b"draft",
    }
    for name, data in user.items():
        (shared / name).write_bytes(data)
        _old(shared / name)
    orphan = shared / f".{entry.stem[:16]}.zz99xx88.tmp"
    orphan.write_bytes(entry.read_bytes()[:100])  # a writer killed mid-write: kspec's magic, old
    _old(orphan)
    assert main(["cache", "clear", "--dir", str(shared)]) == 0
    assert "removed 1 entry" in capsys.readouterr().out
    assert not entry.exists() and not orphan.exists()
    for name, data in user.items():
        assert (shared / name).read_bytes() == data, name
    assert BinaryCache(shared).info().entries == 0


def test_cache_clear_reports_what_it_could_not_delete(tmp_path, monkeypatch, capsys):
    cache_dir = tmp_path / "cache"
    compile_cached(SOURCE, name="f", name_expressions=("f",), cache=BinaryCache(cache_dir))
    real_unlink = Path.unlink

    def refuse(self, missing_ok=False):
        if self.suffix == ".kbin":
            raise PermissionError(13, "Permission denied", str(self))
        return real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", refuse)
    assert main(["cache", "clear", "--dir", str(cache_dir)]) == 1
    captured = capsys.readouterr()
    assert "removed 0 entries" in captured.out
    assert "could not remove" in captured.err and "Permission denied" in captured.err
    report = BinaryCache(cache_dir).clear_report()
    assert report.removed == 0 and len(report.failed) == 1


def test_cache_clear_on_an_unlistable_directory_or_a_file_fails(tmp_path, monkeypatch, capsys):
    a_file = tmp_path / "f"
    a_file.write_text("x")
    assert main(["cache", "clear", "--dir", str(a_file)]) == 1
    assert "not a directory" in capsys.readouterr().err
    directory = tmp_path / "d"
    directory.mkdir()
    real_iterdir = Path.iterdir
    monkeypatch.setattr(Path, "iterdir", lambda self: (_ for _ in ()).throw(PermissionError(13, "Permission denied"))
                        if self == directory else real_iterdir(self))  # fmt: skip
    assert main(["cache", "clear", "--dir", str(directory)]) == 1
    assert "Permission denied" in capsys.readouterr().err


def _finishes(fn, seconds: float = 20.0):
    """fn()'s result, failing the test (instead of hanging it) when fn does not return in time."""
    import threading

    box = []
    worker = threading.Thread(target=lambda: box.append(fn()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert box, f"{fn} did not return in {seconds} s (blocked on a FIFO?)"
    return box[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs and symbolic links (POSIX)")
def test_cache_clear_names_entry_names_that_are_not_regular_files(tmp_path, capsys):
    cache_dir = tmp_path / "cache"
    compile_cached(SOURCE, name="f", name_expressions=("f",), cache=BinaryCache(cache_dir))
    (entry,) = cache_dir.glob("*.kbin")
    outside = tmp_path / "outside.kbin"
    outside.write_bytes(entry.read_bytes())  # a real entry, outside the cache: a link to it must not lead there
    odd = {
        "a" * 64 + ".kbin": "a directory",
        "b" * 64 + ".kbin": "a symbolic link",
        "c" * 64 + ".kbin": "a symbolic link",  # dangling
        "d" * 64 + ".kbin": "a FIFO",
    }
    (cache_dir / ("a" * 64 + ".kbin")).mkdir()
    (cache_dir / ("b" * 64 + ".kbin")).symlink_to(outside)
    (cache_dir / ("c" * 64 + ".kbin")).symlink_to(tmp_path / "nowhere")
    os.mkfifo(cache_dir / ("d" * 64 + ".kbin"))
    assert _finishes(lambda: main(["cache", "clear", "--dir", str(cache_dir)])) == 1
    captured = capsys.readouterr()
    assert "removed 1 entry" in captured.out and not entry.exists()  # the others did not stop it
    for name, kind in odd.items():
        line = next(line for line in captured.err.splitlines() if name in line)
        assert "could not remove" in line and f"not a regular file but {kind}" in line, line
        assert os.path.lexists(cache_dir / name)  # left in place
    assert outside.read_bytes()[:8] == b"KSPECBIN"  # never followed
    report = BinaryCache(cache_dir).clear_report()
    assert report.removed == 0 and sorted(p.name for p, _ in report.failed) == sorted(odd)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs (POSIX)")
def test_a_fifo_named_like_an_entry_is_a_miss_not_a_hang(tmp_path):
    cache = BinaryCache(tmp_path)
    key = "e" * 64
    os.mkfifo(tmp_path / f"{key}.kbin")
    assert _finishes(lambda: cache.get(key)) is None
    assert _finishes(lambda: cache.info().entries) == 0
    assert _finishes(lambda: len(cache.entries())) == 0


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs (POSIX)")
def test_a_fifo_named_like_the_stats_file_is_no_stats_not_a_hang(tmp_path):
    os.mkfifo(tmp_path / ".kspec-stats.json")
    cache = BinaryCache(tmp_path)
    info = _finishes(lambda: cache.info())
    assert info.hits == 0 and info.misses == 0


# --- manifest digests -------------------------------------------------------------------------------------


def test_manifest_records_each_binarys_sha256(results, tmp_path):
    write_output(results, tmp_path)
    manifest = read_manifest(tmp_path)
    assert manifest["kspec_manifest"] == 2
    for e in manifest["entries"]:
        assert e["sha256"] == hashlib.sha256((tmp_path / e["file"]).read_bytes()).hexdigest()
    index = read_index(tmp_path)  # and an index, by which a served process reads only the keys it looks up
    assert index is not None and index.count == len({e["specialization_key"] for e in manifest["entries"]}) > 1


def _key(name: str) -> str:
    return specialize(next(s for s in load_file(RAW) if s.name == name)).key


@pytest.mark.parametrize("damage", ["truncate", "other_build", "missing"])
def test_a_binary_that_does_not_match_its_digest_is_a_miss_with_a_warning(results, tmp_path, damage):
    write_output(results, tmp_path)
    entry = next(e for e in read_manifest(tmp_path)["entries"] if e["kernel"] == "my_add")
    path = tmp_path / entry["file"]
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "other_build":  # a build killed after its binaries, before its manifest
        other = next(r for r in results if r.unit.spec.name == "vector_add")
        path.write_bytes(other.program.binary)
    else:
        path.unlink()
    store = BinaryStore(tmp_path)
    if damage == "missing":
        with pytest.warns(kspec.BinaryWarning, match="is missing"):
            assert store.find(_key("my_add"), "sm_80") is None
        return
    with pytest.warns(kspec.BinaryWarning, match="sha256"):
        assert store.find(_key("my_add"), "sm_80") is None
    assert store.find(_key("vector_add"), "sm_80").read()[:4] == b"\x7fELF"  # the others still serve


def test_a_killed_manifest_write_leaves_no_tmp_file(results, tmp_path, monkeypatch):
    write_output(results, tmp_path)
    before = (tmp_path / MANIFEST_NAME).read_bytes()
    # a kill during the write: the temporary file is left, the old manifest stays
    (tmp_path / ".manifest.ab12cd34.tmp").write_text('{"partial": ')
    (tmp_path / "my_add" / ".default.sm_80.zz12zz34.tmp").write_bytes(b"\x7fEL")
    write_output(results[:2], tmp_path)
    assert not list(tmp_path.rglob("*.tmp"))
    assert (tmp_path / MANIFEST_NAME).read_bytes() != before
    # an exception during the write (disk full, SIGTERM turned into SystemExit) removes its own file
    import kspec._atomic as atomic

    def fail(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", fail)
    with pytest.raises(kspec.BuildOutputError, match="No space left"):
        write_output(results, tmp_path)
    assert not list(tmp_path.rglob("*.tmp"))


# --- where a build writes and what it deletes -------------------------------------------------------------


def test_o_into_another_programs_manifest_is_refused(results, tmp_path):
    theirs = tmp_path / "site"
    theirs.mkdir()
    (theirs / MANIFEST_NAME).write_text('{"name": "my web app", "icons": []}')
    with pytest.raises(kspec.BuildOutputError, match="kspec did not write"):
        write_output(results, theirs)
    assert json.loads((theirs / MANIFEST_NAME).read_text())["name"] == "my web app"
    assert sorted(p.name for p in theirs.iterdir()) == [MANIFEST_NAME]


def test_o_into_a_non_empty_foreign_directory_is_refused(results, tmp_path):
    (tmp_path / "thesis.tex").write_text("...")
    with pytest.raises(kspec.BuildOutputError, match="not empty"):
        write_output(results, tmp_path)


def test_stale_cleanup_never_leaves_the_output_directory(results, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    victims = [tmp_path / "victim.txt", tmp_path / "victim.cubin", tmp_path / "abs.cubin"]
    for v in victims:
        v.write_text("keep me")
    inside = out / "notes.txt"
    entries = [{"file": "../victim.txt"}, {"file": "../victim.cubin"}, {"file": str(tmp_path / "abs.cubin")},
               {"file": "k/../../victim.cubin"}, {"file": "notes.txt"}, {"file": None}, "junk"]  # fmt: skip
    (out / MANIFEST_NAME).write_text(json.dumps({"kspec_manifest": 1, "entries": entries}))
    inside.write_text("a kspec manifest listed me, but I am no binary")
    write_output(results, out)
    for v in victims:
        assert v.read_text() == "keep me"
    assert inside.exists()
    # a symbolic link inside the directory that leads out of it is not followed either
    (out / "link").symlink_to(tmp_path)
    (out / MANIFEST_NAME).write_text(json.dumps({"kspec_manifest": 2, "entries": [{"file": "link/victim.cubin"}]}))
    write_output(results, out)
    assert (tmp_path / "victim.cubin").exists()


def test_hatch_clean_is_confined_too(tmp_path):
    from kspec.build import confined_file

    assert confined_file(tmp_path, "../x.cubin") is None
    assert confined_file(tmp_path, "/etc/passwd") is None
    assert confined_file(tmp_path, "k/a.txt") is None
    assert confined_file(tmp_path, "k/a.sm_80.cubin") == tmp_path / "k" / "a.sm_80.cubin"


# --- damaged manifests given to binaries= -------------------------------------------------------------------


def _store_dir(tmp_path: Path, results) -> Path:
    write_output(results, tmp_path)
    return tmp_path


def _rewrite(directory: Path, change) -> None:
    manifest = json.loads((directory / MANIFEST_NAME).read_text())
    change(manifest)
    (directory / MANIFEST_NAME).write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    "change, phrase",
    [
        (lambda m: m.update(entries={"a": 1}), "'entries' is not a list"),
        (lambda m: m["entries"].append(7), "entry 5 is not a table"),
        (lambda m: m["entries"][0].pop("file"), "no str 'file'"),
        (lambda m: m["entries"][0].pop("sha256"), "no str 'sha256'"),
        (lambda m: m["entries"][0].update(lowered_names=None), "no dict 'lowered_names'"),
        (lambda m: m["entries"][0].update(lowered_names={"f": 3}), "must map str to str"),
        (lambda m: m["entries"][0].update(file="../../../etc/passwd"), "not a relative path inside"),
        (lambda m: m["entries"][0].update(file="/etc/passwd.cubin"), "not a relative path inside"),
        (lambda m: m["entries"][0].update(format="exe"), "unknown"),
        (lambda m: m["entries"][0].update(sha256="xyz"), "not a sha256"),
    ],
)
def test_damaged_manifest_is_a_typed_error(results, tmp_path, change, phrase):
    directory = _store_dir(tmp_path, results)
    _rewrite(directory, change)
    with pytest.raises(kspec.KspecValueError, match=phrase) as info:
        kspec.load(RAW, binaries=directory)
    assert "binaries" in str(info.value)


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '"x"', "", '{"kspec_manifest": "2"}'])
def test_unreadable_manifest_is_a_typed_error(results, tmp_path, text):
    directory = _store_dir(tmp_path, results)
    (directory / MANIFEST_NAME).write_text(text)
    with pytest.raises(kspec.KspecValueError, match="no kspec manifest.json"):
        kspec.load(RAW, binaries=directory)


def test_truncated_cubin_is_not_served_through_load(results, tmp_path):
    directory = _store_dir(tmp_path, results)
    entry = next(e for e in read_manifest(directory)["entries"] if e["kernel"] == "my_add")
    (directory / entry["file"]).write_bytes((directory / entry["file"]).read_bytes()[:100])
    lib = kspec.load(RAW, binaries=directory)
    with pytest.warns(kspec.BinaryWarning):
        assert lib.my_add._module._stored("sm_80") is None
    assert lib.vector_add._module._stored("sm_80") is not None


def test_binary_reached_through_an_outward_link_is_refused_when_read(results, tmp_path):
    # the manifest is checked by spelling when loaded (cheap: a store is opened at import); links are
    # followed, and refused, only for a file about to be read
    directory = _store_dir(tmp_path / "out", results)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    entry = next(e for e in read_manifest(directory)["entries"] if e["kernel"] == "my_add")
    (outside / "my_add.cubin").write_bytes((directory / entry["file"]).read_bytes())
    (directory / "evil").symlink_to(outside)
    _rewrite(directory, lambda m: next(e for e in m["entries"] if e["kernel"] == "my_add").update(file="evil/my_add.cubin"))
    lib = kspec.load(RAW, binaries=directory)
    with pytest.raises(kspec.KspecValueError, match="leads outside the directory"):
        lib.my_add._module._stored("sm_80")
    assert lib.vector_add._module._stored("sm_80") is not None


def test_resolves_inside_follows_links_below_the_directory_only_where_there_are_some(tmp_path):
    """A served process checks each binary it reads: an lstat per component below the store where none is a
    link, a full resolve where one is (it may lead back inside, or out)."""
    from kspec._manifest import resolves_inside

    real = tmp_path / "real"
    (real / "k").mkdir(parents=True)
    (real / "k" / "a.cubin").write_bytes(b"x")
    outside = tmp_path / "outside"
    outside.mkdir()
    (real / "out").symlink_to(outside)
    (real / "in").symlink_to(real / "k")
    (tmp_path / "store").symlink_to(real)  # an installed package's directory may itself be a link
    for out in (real, tmp_path / "store"):
        assert resolves_inside(out, out / "k" / "a.cubin")
        assert resolves_inside(out, out / "k" / "missing.cubin")  # reading it fails later, as any missing file
        assert resolves_inside(out, out / "in" / "a.cubin")  # a link that stays inside
        assert not resolves_inside(out, out / "out" / "a.cubin")
        assert not resolves_inside(out, out / ".." / "outside" / "a.cubin")
    assert not resolves_inside(real, outside / "a.cubin")


def test_generated_modules_skip_binaries_of_another_manifest_version(results, tmp_path):
    from kspec.kernels import load_specs
    from kspec.spec import spec_to_data

    write_output(results, tmp_path)
    _rewrite(tmp_path, lambda m: m.update(kspec_manifest=1))
    tables = [spec_to_data(s) for s in load_file(RAW)]
    with pytest.warns(kspec.BinaryWarning, match="manifest version 1"):
        lib = load_specs(tables, binaries=tmp_path)
    assert lib.my_add._module._binaries is None
    with pytest.raises(kspec.KspecValueError, match="version 2"):  # asked for explicitly: an error
        kspec.load(RAW, binaries=tmp_path)


# --- launch interfaces stored beside the binaries -----------------------------------------------------------

EW = REPO / "specs" / "elementwise.toml"


@pytest.fixture(scope="module")
def ew_results(tmp_path_factory):
    """squared_diff of specs/elementwise.toml for sm_90: one elementwise binary and its interface."""
    specs = [s for s in load_file(EW) if s.name == "squared_diff"]
    units = [u for u in plan_build(specs, ["sm_90"]).units if u.spec.name == "squared_diff"]  # not its backward
    out = precompile(units, cache=BinaryCache(tmp_path_factory.mktemp("cache")))
    assert all(r.ok for r in out)
    return out


def _ew_store(tmp_path: Path, ew_results) -> tuple[BinaryStore, str, Path]:
    write_output(ew_results, tmp_path)
    (entry,) = read_manifest(tmp_path)["entries"]
    return BinaryStore(tmp_path), entry["specialization_key"], tmp_path / entry["interface"]


def test_stored_interface_is_the_derived_one(ew_results, tmp_path):
    from kspec.render import module_interface

    store, key, path = _ew_store(tmp_path, ew_results)
    assert path.parent.name == "squared_diff"
    assert path.name == f"default.{hashlib.sha256(path.read_bytes()).hexdigest()[:16]}.interface.json"
    spec = ew_results[0].unit.spec
    stored, derived = store.interface(key), module_interface(specialize(spec, {}))
    assert stored == derived
    for variant in derived.variants:  # each variant's parameter list, asked for one at a time as calls do
        assert stored.abi[variant] == derived.abi[variant] and variant in stored.abi
    assert len(stored.abi) == len(derived.abi)


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_bytes(p.read_bytes()[:200]),  # truncated
        lambda p: p.write_text('{"format": 1, "interface": {"@": "Nope"}}'),
        lambda p: p.write_text("[" * 100000),  # nesting past the decoder's recursion limit
        # an entry's ABI that is not one (its records are decoded when a call first asks for the variant)
        lambda p: p.write_text(p.read_text().replace('"@":"EntryAbi"', '"@":"Slot"', 1)),
    ],
)
def test_damaged_interface_warns_and_is_derived(ew_results, tmp_path, damage):
    store, key, path = _ew_store(tmp_path, ew_results)
    damage(path)
    with pytest.warns(kspec.BinaryWarning, match="not the launch interface"):
        assert store.interface(key) is None  # the kernel derives it
    assert store.find(key, "sm_90") is not None  # the binary itself still serves


def test_interface_of_another_specialization_is_not_used(ew_results, tmp_path):
    store, key, path = _ew_store(tmp_path, ew_results)
    data = json.loads(path.read_text())
    data["interface"]["key"] = "0" * 64
    path.write_text(json.dumps(data))
    with pytest.warns(kspec.BinaryWarning):
        assert store.interface(key) is None


def test_missing_interface_is_derived_quietly(ew_results, tmp_path, recwarn):
    store, key, path = _ew_store(tmp_path, ew_results)
    path.unlink()
    assert store.interface(key) is None and not recwarn.list


@pytest.mark.parametrize("rel", ["../x.interface.json", "/etc/x.interface.json", "k/x.json", "k/notes.txt", 7])
def test_interface_outside_the_directory_is_a_damaged_manifest(ew_results, tmp_path, rel):
    write_output(ew_results, tmp_path)
    _rewrite(tmp_path, lambda m: m["entries"][0].update(interface=rel))
    with pytest.raises(kspec.KspecValueError, match="interface"):
        BinaryStore(tmp_path)


def test_interface_through_an_outward_link_is_refused_when_read(ew_results, tmp_path):
    directory = tmp_path / "out"
    store, key, path = _ew_store(directory, ew_results)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "x.interface.json").write_bytes(path.read_bytes())
    (directory / "evil").symlink_to(outside)
    _rewrite(directory, lambda m: m["entries"][0].update(interface="evil/x.interface.json"))
    with pytest.raises(kspec.KspecValueError, match="leads outside the directory"):
        BinaryStore(directory).interface(key)


def test_rebuild_without_a_kernel_removes_its_interface(ew_results, tmp_path):
    write_output(ew_results, tmp_path)
    assert list(tmp_path.rglob("*.interface.json"))
    write_output([], tmp_path)
    assert not list(tmp_path.rglob("*.interface.json")) and not list(tmp_path.rglob("*.cubin"))
