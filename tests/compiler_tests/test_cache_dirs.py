"""The binary cache over several directories (KSPEC_CACHE_DIR=a:b): lookups in order, writes to the first
writable one, read-only directories served but never written, touched, trimmed or cleared; `kspec cache
info` per directory and `--by-kernel`; concurrent writers and readers never see a torn entry. No GPU."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

import kspec
from kspec import _memo
from kspec.cli import main as kspec_main
from kspec.compiler import BinaryCache, CompiledProgram, cache_key, compile_cached, default_cache
from kspec.compiler.cache import _dirs as _cache_dirs, _entry, _stats as _cache_stats
from kspec.compiler import _compile as compile_module

from helpers.child_env import child_env

SOURCE = 'extern "C" __global__ void triple(float* a) { a[threadIdx.x] *= 3.0f; }'
OTHER = 'extern "C" __global__ void quad(float* a) { a[threadIdx.x] *= 4.0f; }'
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.fixture(autouse=True)
def _no_dump(monkeypatch):
    monkeypatch.delenv("KSPEC_DUMP_SOURCE", raising=False)


def _program(tag: str, size: int = 64) -> CompiledProgram:
    binary = (hashlib.sha256(tag.encode()).digest() * (size // 32 + 1))[:size]
    return CompiledProgram(binary, "cubin", "sm_90", {"k": tag}, "", (13, 0), 0.0)


def _entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("*.kbin")) if directory.is_dir() else []


def _no_nvrtc(monkeypatch) -> None:
    def fail(*args, **kwargs):
        raise AssertionError("NVRTC was called on what should be a cache hit")

    monkeypatch.setattr(compile_module, "run_nvrtc", fail)


def _read_only(monkeypatch, *directories: Path) -> None:
    """What a read-only mount looks like to kspec's probe (root, which runs these tests, ignores modes)."""
    real = _cache_dirs.writable
    monkeypatch.setattr(_cache_dirs, "writable", lambda d: d not in directories and real(d))


def _seed(directory: Path) -> CompiledProgram:
    """Compile SOURCE into ``directory`` alone (as an image build would), return the program."""
    program, hit = compile_cached(SOURCE, name="triple", cache=BinaryCache(directory))
    assert not hit and _entries(directory)
    return program


# --- KSPEC_CACHE_DIR's list -------------------------------------------------------------------------------


def test_split_dirs(monkeypatch, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    text = os.pathsep.join(["", str(a), str(b), "", str(a)])
    assert _memo.split_dirs(text) == (a, b)
    monkeypatch.setenv("KSPEC_CACHE_DIR", text)
    assert default_cache().directories == (a, b)
    monkeypatch.setenv("KSPEC_CACHE_DIR", os.pathsep)  # nothing named: the platform's directory
    assert len(default_cache().directories) == 1


def test_first_hit_wins(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    key = cache_key("anything")
    BinaryCache(second).put(key, _program("second"))
    assert BinaryCache([first, second]).get(key).binary == _program("second").binary
    BinaryCache(first).put(key, _program("first"))
    assert BinaryCache([first, second]).get(key).binary == _program("first").binary


def test_damaged_entry_in_the_first_directory_falls_through(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    key = cache_key("anything")
    BinaryCache(first).put(key, _program("x"))
    BinaryCache(second).put(key, _program("x"))
    path = first / f"{key}.kbin"
    path.write_bytes(path.read_bytes()[:-5])  # torn
    assert BinaryCache([first, second]).get(key).binary == _program("x").binary


# --- read-only directories --------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["chmod", "probe"])
def test_hits_from_a_read_only_directory_writes_to_the_next(tmp_path, monkeypatch, how):
    image, home = tmp_path / "image", tmp_path / "home"
    seeded = _seed(image)
    (entry,) = image.glob("*.kbin")
    old = time.time() - 1000
    os.utime(entry, (old, old))
    image_stats = (image / _cache_stats.STATS_NAME).read_bytes()  # the image build's own counts
    if how == "chmod":
        if ROOT:
            pytest.skip("root ignores directory permissions (the probe case covers the logic)")
        image.chmod(0o555)
    else:
        _read_only(monkeypatch, image)
    try:
        monkeypatch.setenv("KSPEC_CACHE_DIR", os.pathsep.join([str(image), str(home)]))
        cache = default_cache()
        assert cache.directories == (image, home) and cache.directory == home
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no CacheWarning: a read-only directory is expected
            with monkeypatch.context() as m:
                _no_nvrtc(m)
                program, hit = compile_cached(SOURCE, name="triple")
            assert hit and program.binary == seeded.binary
            _, hit = compile_cached(OTHER, name="quad")
            assert not hit
            cache.flush_counts()
        assert entry.stat().st_mtime == pytest.approx(old)  # a hit there does not touch it
        assert len(_entries(image)) == 1 and len(_entries(home)) == 1  # the new entry went to home
        assert (image / _cache_stats.STATS_NAME).read_bytes() == image_stats  # nor do the counts go there
        assert _cache_stats.read_stats(home).hits == 1
    finally:
        image.chmod(0o755)


def test_unwritable_for_another_reason_parent_is_a_file(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    home = tmp_path / "home"
    monkeypatch.setenv("KSPEC_CACHE_DIR", os.pathsep.join([str(blocker / "cache"), str(home)]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not compile_cached(SOURCE, name="triple")[1]
    assert len(_entries(home)) == 1 and blocker.read_text() == "not a directory"
    assert BinaryCache(home).get(next(home.glob("*.kbin")).stem) is not None


def test_nonexistent_first_directory_is_created_by_the_first_write(tmp_path, monkeypatch):
    new, old = tmp_path / "new" / "cache", tmp_path / "old"
    seeded = _seed(old)
    monkeypatch.setenv("KSPEC_CACHE_DIR", os.pathsep.join([str(new), str(old)]))
    assert default_cache().directory == new and not new.exists()  # asking creates nothing
    with monkeypatch.context() as m:
        _no_nvrtc(m)
        program, hit = compile_cached(SOURCE, name="triple")  # the lookup skips the missing directory
    assert hit and program.binary == seeded.binary
    assert not compile_cached(OTHER, name="quad")[1]
    assert len(_entries(new)) == 1 and len(_entries(old)) == 1


def test_a_failed_write_moves_to_the_next_directory_without_a_warning(tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    from kspec.compiler.cache import _store as _cache

    real = _cache.write_atomic

    def full_disk(path, data, **kw):
        if path.parent == first:
            raise OSError(28, "No space left on device")
        real(path, data, **kw)

    monkeypatch.setattr(_cache, "write_atomic", full_disk)
    cache = BinaryCache([first, second])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cache.put(cache_key("a"), _program("a"))
        cache.put(cache_key("b"), _program("b"))
    assert len(_entries(second)) == 2 and cache.directory == second


def test_no_writable_directory_warns_once_and_keeps_memory(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    _read_only(monkeypatch, a, b)
    monkeypatch.setenv("KSPEC_CACHE_DIR", os.pathsep.join([str(a), str(b)]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program, hit = compile_cached(SOURCE, name="triple")
        compile_cached(OTHER, name="quad")
        again, hit_again = compile_cached(SOURCE, name="triple")
    messages = [str(w.message) for w in caught if issubclass(w.category, kspec.CacheWarning)]
    assert len(messages) == 1 and str(a) in messages[0] and str(b) in messages[0] and "none is writable" in messages[0]
    assert not hit and hit_again and again.binary == program.binary
    assert not a.exists() and not b.exists()


def test_trim_applies_to_the_written_directory_only(tmp_path, monkeypatch):
    image, home = tmp_path / "image", tmp_path / "home"
    for i in range(4):
        BinaryCache(image, max_bytes=0).put(cache_key(f"img{i}"), _program(f"img{i}", 4096))
    _read_only(monkeypatch, image)
    cache = BinaryCache([image, home], max_bytes=10_000)
    for i in range(6):
        cache.put(cache_key(f"new{i}"), _program(f"new{i}", 4096))
    assert len(_entries(image)) == 4  # over the cap on its own, but not the cache's to trim
    assert 0 < len(_entries(home)) < 6 and _cache_stats.read_stats(home).evictions > 0


# --- kspec cache info | clear --------------------------------------------------------------------------------


def test_cli_info_and_clear_per_directory(tmp_path, monkeypatch, capsys):
    image, home = tmp_path / "image", tmp_path / "home"
    _seed(image)
    _read_only(monkeypatch, image)
    monkeypatch.setenv("KSPEC_CACHE_DIR", os.pathsep.join([str(image), str(home)]))
    compile_cached(OTHER, name="quad")
    compile_cached('extern "C" __global__ void five(float* a) { a[0] = 5.0f; }', name="five")

    assert kspec_main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"{image}  [read-only]  1 entry" in out and f"{home}  [written]  2 entries" in out
    assert f"written:   {home}" in out and "entries:   3" in out

    assert kspec_main(["cache", "info", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["directory"] == str(home) and report["entries"] == 3
    assert [(d["path"], d["entries"], d["writable"], d["written"]) for d in report["directories"]] == [
        (str(image), 1, False, False), (str(home), 2, True, True)]

    assert kspec_main(["cache", "clear"]) == 0
    out = capsys.readouterr().out
    assert f"skipped {image} (read-only)" in out and f"removed 2 entries from {home}" in out
    assert len(_entries(image)) == 1 and _entries(home) == []


def test_cli_clear_with_every_directory_read_only_is_an_error(tmp_path, monkeypatch, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    _seed(a)
    _read_only(monkeypatch, a, b)
    assert kspec_main(["cache", "info", "--dir", os.pathsep.join([str(a), str(b)])]) == 0
    out = capsys.readouterr().out
    assert "written:   none" in out and f"{a}  [read-only]  1 entry" in out and f"{b}  [read-only, does not exist]" in out
    assert kspec_main(["cache", "clear", "--dir", os.pathsep.join([str(a), str(b)])]) == 1
    captured = capsys.readouterr()
    assert "skipped" in captured.out and "can be written" in captured.err
    assert len(_entries(a)) == 1


def test_cli_several_directories_one_a_file_is_an_error(tmp_path, capsys):
    a_file = tmp_path / "file"
    a_file.write_text("mine")
    assert kspec_main(["cache", "info", "--dir", os.pathsep.join([str(tmp_path / "c"), str(a_file)])]) == 1
    assert "is not a directory" in capsys.readouterr().err


def test_cli_info_by_kernel(tmp_path, monkeypatch, capsys):
    cache_dir = tmp_path / "cache"
    monkeypatch.setenv("KSPEC_CACHE_DIR", str(cache_dir))
    compile_cached(SOURCE, name="triple")
    compile_cached(SOURCE, name="triple", options=kspec.compiler.CompileOptions(arch="sm_80"))
    compile_cached(OTHER, name="quad")
    for _ in range(3):  # hits read from disk by fresh caches (other processes, as far as the counts go)
        fresh = BinaryCache(cache_dir)
        assert compile_cached(SOURCE, name="triple", cache=fresh)[1]
        fresh.flush_counts()
    assert compile_cached(OTHER, name="quad")[1]  # pending in the default cache: counted too

    assert kspec_main(["cache", "info", "--by-kernel", "--json"]) == 0
    kernels = json.loads(capsys.readouterr().out)["kernels"]
    assert [(k["kernel"], k["entries"], k["hits"], k["archs"]) for k in kernels] == [
        ("triple", 2, 3, ["sm_80", "sm_90"]), ("quad", 1, 1, ["sm_90"])]
    assert sum(k["total_bytes"] for k in kernels) == sum(p.stat().st_size for p in cache_dir.glob("*.kbin"))

    assert kspec_main(["cache", "info", "--by-kernel"]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = lines[lines.index(next(line for line in lines if line.startswith("kernel "))):]
    assert table[0].split() == ["kernel", "entries", "size", "hits", "archs"]
    assert table[1].split()[:2] == ["triple", "2"] and table[1].split()[-3:] == ["3", "sm_80", "sm_90"]
    assert table[2].split()[:2] == ["quad", "1"] and table[2].split()[-2:] == ["1", "sm_90"]


def test_by_kernel_old_entry_without_a_name(tmp_path, capsys):
    BinaryCache(tmp_path).put(cache_key("x"), _program("x"))  # no kernel given, as entries before it was recorded
    assert kspec_main(["cache", "info", "--by-kernel", "--dir", str(tmp_path)]) == 0
    assert "(unnamed)" in capsys.readouterr().out


def test_entry_hit_counts_are_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(_cache_stats, "MAX_ENTRY_HITS", 3)
    tmp_path.mkdir(exist_ok=True)
    assert _cache_stats.update_stats(tmp_path, hits=10, entry_hits={"a": 1, "b": 5, "c": 2, "d": 4})
    assert _cache_stats.read_entry_hits(tmp_path) == {"b": 5, "d": 4, "c": 2}
    assert _cache_stats.update_stats(tmp_path, entry_hits={"a": 9})
    assert _cache_stats.read_entry_hits(tmp_path) == {"a": 9, "b": 5, "d": 4}
    assert _cache_stats.update_stats(tmp_path, reset=True)
    assert _cache_stats.read_entry_hits(tmp_path) == {}


# --- concurrent writers and readers ----------------------------------------------------------------------------

PAYLOAD = """
import hashlib
def payload(key):
    size = 200_000 + int(hashlib.sha256(key.encode()).hexdigest()[:4], 16) * 8
    return (hashlib.sha256(key.encode()).digest() * (size // 32 + 1))[:size]
"""
WRITER = PAYLOAD + """
import os, sys, time
from kspec.compiler import BinaryCache, CompiledProgram
directory, me, go = sys.argv[1:4]
while not os.path.exists(go):
    time.sleep(0.001)
for round in range(6):
    for key in ["shared0", "shared1", "shared2", f"own{me}a", f"own{me}b"]:
        program = CompiledProgram(payload(key), "cubin", "sm_90", {"e": key}, "", (13, 0), 0.0)
        BinaryCache(directory, max_bytes=0).put(key, program, kernel=key)
"""
READER = PAYLOAD + """
import json, os, sys, time
from kspec.compiler import BinaryCache
from kspec.compiler.cache import decode_entry
directory, go, stop, writers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
keys = ["shared0", "shared1", "shared2"] + [f"own{w}{s}" for w in range(writers) for s in "ab"]
while not os.path.exists(go):
    time.sleep(0.001)
counts = {"whole": 0, "absent": 0, "torn": 0, "wrong": 0, "misses": 0, "hits": 0}
last = False
while True:
    last = os.path.exists(stop)  # one full pass after the writers are done
    for key in keys:
        try:
            data = open(os.path.join(directory, key + ".kbin"), "rb").read()
        except FileNotFoundError:
            counts["absent"] += 1
        else:
            program = decode_entry(data, key)
            counts["torn" if program is None else "whole" if program.binary == payload(key) else "wrong"] += 1
        program = BinaryCache(directory).get(key)  # a fresh cache: the disk read, as another process does
        if program is None:
            counts["misses"] += 1
        else:
            counts["hits"] += 1
            counts["wrong"] += program.binary != payload(key)
    if last:
        break
print(json.dumps(counts))
"""


def test_concurrent_writers_and_readers_never_see_a_torn_entry(tmp_path):
    directory, go, stop = tmp_path / "cache", tmp_path / "go", tmp_path / "stop"
    env = child_env(KSPEC_CACHE_MAX_BYTES="0")
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(directory), str(i), str(go)], env=env,
                                stderr=subprocess.PIPE, text=True) for i in range(4)]  # fmt: skip
    readers = [subprocess.Popen([sys.executable, "-c", READER, str(directory), str(go), str(stop), "4"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]  # fmt: skip
    time.sleep(0.5)  # let every child import kspec before the writes start
    go.write_text("")
    try:
        for writer in writers:
            _, err = writer.communicate(timeout=120)
            assert writer.returncode == 0, err
    finally:
        stop.write_text("")
    results = []
    for reader in readers:
        out, err = reader.communicate(timeout=120)
        assert reader.returncode == 0, err
        results.append(json.loads(out))
    for counts in results:
        assert counts["torn"] == 0 and counts["wrong"] == 0, counts
        assert counts["whole"] > 0 and counts["hits"] > 0
    # the last pass of each reader ran after every write: all 11 entries whole, no temporary file left
    names = sorted(os.listdir(directory))
    assert names == sorted([f"{k}.kbin" for k in ["shared0", "shared1", "shared2"] +
                            [f"own{w}{s}" for w in range(4) for s in "ab"]] + [_cache_stats.STATS_NAME])  # fmt: skip
    for name in names:
        if name.endswith(".kbin"):
            assert _entry.decode_entry((directory / name).read_bytes(), name[: -len(".kbin")]) is not None
