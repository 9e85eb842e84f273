"""The binary cache: memory and disk layers, damaged entries, unwritable directories, several processes,
and `kspec cache info|clear`. Runs without a GPU."""

from __future__ import annotations

import dataclasses
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
from kspec.cli import main as kspec_main
from kspec.compiler import (
    BinaryCache,
    CacheInfo,
    CompiledProgram,
    CompileOptions,
    cache_key,
    compile_cached,
    default_cache,
)
from kspec.compiler.cache import _entry, _stats as _cache_stats
from kspec.compiler import _compile as compile_module

from helpers.child_env import child_env

TEMPLATE = """
template<typename T>
__global__ void fx3(T* arr, int N) {
    unsigned int tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid < N) arr[tid] *= 3;
}
"""
NAMES = ("fx3<float>", "fx3<double>")

# Run in a fresh interpreter: compile TEMPLATE through the default cache, print what came back.
CHILD = f"""
import hashlib, json, sys
from kspec.compiler import compile_cached
program, hit = compile_cached({TEMPLATE!r}, name="fx3", name_expressions={NAMES!r})
print(json.dumps({{"hit": hit, "sha": hashlib.sha256(program.binary).hexdigest(),
                  "lowered": dict(program.lowered_names)}}))
"""


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("KSPEC_CACHE_DIR", str(directory))
    monkeypatch.delenv("KSPEC_DUMP_SOURCE", raising=False)
    return directory


def _entries(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.kbin"))


def _compile(**kwargs) -> tuple[CompiledProgram, bool]:
    return compile_cached(TEMPLATE, name="fx3", name_expressions=NAMES, **kwargs)


def _no_nvrtc(monkeypatch) -> None:
    def fail(*args, **kwargs):
        raise AssertionError("NVRTC was called on what should be a cache hit")

    monkeypatch.setattr(compile_module, "run_nvrtc", fail)


# --- hits -----------------------------------------------------------------------------------------------


def test_hit_in_process(cache_dir, monkeypatch):
    first, hit = _compile()
    assert not hit and first.compile_ms > 0
    _no_nvrtc(monkeypatch)
    second, hit = _compile()
    assert hit and second.compile_ms == 0.0
    assert second.binary == first.binary and second.lowered_names == first.lowered_names
    assert len(_entries(cache_dir)) == 1


def test_memory_layer_skips_the_disk(cache_dir, monkeypatch):
    _compile()
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail("disk read on a memory hit"))
    assert _compile()[1]


def test_hit_from_disk_in_a_new_cache_object(cache_dir, monkeypatch):
    first, _ = _compile()
    _no_nvrtc(monkeypatch)
    program, hit = _compile(cache=BinaryCache(cache_dir))
    assert hit and program.compile_ms == 0.0
    assert program.binary == first.binary
    assert dict(program.lowered_names) == dict(first.lowered_names)
    assert (program.format, program.arch, program.nvrtc_version) == ("cubin", "sm_90", first.nvrtc_version)


def test_hit_across_processes(cache_dir, monkeypatch):
    out = subprocess.run(
        [sys.executable, "-c", CHILD], env=child_env(KSPEC_CACHE_DIR=str(cache_dir)), capture_output=True, text=True,
        check=True,
    )
    child = json.loads(out.stdout)
    assert child["hit"] is False
    _no_nvrtc(monkeypatch)
    program, hit = _compile()
    assert hit and program.compile_ms == 0.0
    assert hashlib.sha256(program.binary).hexdigest() == child["sha"]
    assert dict(program.lowered_names) == child["lowered"]


def test_different_options_are_different_entries(cache_dir):
    _compile()
    _, hit = _compile(options=CompileOptions(arch="sm_80"))
    assert not hit
    assert len(_entries(cache_dir)) == 2


def test_explicit_memory_only_cache(cache_dir):
    cache = BinaryCache(None)
    assert not _compile(cache=cache)[1]
    assert _compile(cache=cache)[1]
    assert not cache_dir.exists()
    info = cache.info()
    assert info.directory is None and info.entries == 1 and info.total_bytes > 0
    assert cache.clear() == 1 and cache.info().entries == 0


# --- damaged entries ------------------------------------------------------------------------------------


def _damage_and_recompile(cache_dir: Path, damage) -> None:
    first, _ = _compile()
    (entry,) = _entries(cache_dir)
    damage(entry)
    fresh = BinaryCache(cache_dir)  # no memory layer: the damaged file is what it reads
    key = cache_key(TEMPLATE, name_expressions=NAMES)
    assert fresh.get(key) is None
    program, hit = _compile(cache=fresh)
    assert not hit and program.binary == first.binary
    # the next put replaced the damaged file with a valid one
    assert BinaryCache(cache_dir).get(key) is not None
    assert _entries(cache_dir) == [entry]


def test_truncated_entry_is_a_miss(cache_dir):
    def truncate(entry: Path) -> None:
        data = entry.read_bytes()
        entry.write_bytes(data[: len(data) // 2])

    _damage_and_recompile(cache_dir, truncate)


def test_corrupted_entry_is_a_miss(cache_dir):
    def flip_a_byte(entry: Path) -> None:
        data = bytearray(entry.read_bytes())
        data[-100] ^= 0xFF  # inside the CUBIN
        entry.write_bytes(bytes(data))

    _damage_and_recompile(cache_dir, flip_a_byte)


@pytest.mark.parametrize("content", [b"", b"garbage", b"KSPECBIN" + b"\0" * 100], ids=["empty", "text", "zeros"])
def test_garbage_entry_is_a_miss(cache_dir, content):
    _damage_and_recompile(cache_dir, lambda entry: entry.write_bytes(content))


def test_entry_under_another_key_is_a_miss(cache_dir):
    program, _ = _compile()
    (entry,) = _entries(cache_dir)
    other = "0" * 64
    entry.rename(cache_dir / f"{other}.kbin")
    assert BinaryCache(cache_dir).get(other) is None


def test_entry_of_another_format_version_is_a_miss():
    program = CompiledProgram(b"\x7fELF...", "cubin", "sm_90", {"a": "b"}, "", (13, 0), 1.0)
    data = bytearray(_entry.encode_entry("k", program))
    assert _entry.decode_entry(bytes(data), "k") == dataclasses.replace(program, compile_ms=0.0)
    data[8] += 1  # the u32 format version after the magic
    assert _entry.decode_entry(bytes(data), "k") is None


def test_bad_key_names_key(cache_dir):
    with pytest.raises(kspec.KspecValueError, match="key"):
        BinaryCache(cache_dir).get("../escape")


# --- unwritable directories -----------------------------------------------------------------------------


def _unwritable_dirs(tmp_path: Path) -> dict[str, Path]:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    return {"file_as_dir": blocker, "under_a_file": blocker / "cache"}


@pytest.mark.parametrize("case", ["file_as_dir", "under_a_file"])
def test_unwritable_dir_warns_once_and_keeps_working(tmp_path, monkeypatch, case):
    directory = _unwritable_dirs(tmp_path)[case]
    monkeypatch.setenv("KSPEC_CACHE_DIR", str(directory))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program, hit = _compile()
        other, _ = compile_cached('extern "C" __global__ void k2(int* a) { a[0] = 2; }', name="k2")
        again, hit_again = _compile()
        BinaryCache(directory).put(cache_key("x"), program)  # another cache object, same dir: still one warning
    cache_warnings = [w for w in caught if issubclass(w.category, kspec.CacheWarning)]
    assert len(cache_warnings) == 1
    assert str(directory) in str(cache_warnings[0].message)
    assert program.binary[:4] == b"\x7fELF" and other.binary[:4] == b"\x7fELF"
    assert not hit and hit_again and again.binary == program.binary  # memory layer still serves hits


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_dir_warns_once(tmp_path, monkeypatch):
    parent = tmp_path / "ro"
    parent.mkdir()
    parent.chmod(0o500)
    try:
        monkeypatch.setenv("KSPEC_CACHE_DIR", str(parent / "cache"))
        with pytest.warns(kspec.CacheWarning):
            program, _ = _compile()
        assert program.binary[:4] == b"\x7fELF"
    finally:
        parent.chmod(0o700)


def test_unreadable_dir_info_and_clear_do_not_raise(tmp_path):
    cache = BinaryCache(_unwritable_dirs(tmp_path)["under_a_file"])
    assert cache.info().entries == 0 and cache.clear() == 0


# --- several processes ----------------------------------------------------------------------------------


def test_concurrent_processes_same_key(cache_dir, tmp_path):
    # Each child imports kspec and loads NVRTC, says it is ready, and waits for the go file: the compiles
    # and the writes of the same entry then overlap.
    go, ready = tmp_path / "go", tmp_path / "ready"
    ready.mkdir()
    wait = (
        "import os, time\nimport kspec.compiler as c\nc.nvrtc_version()\n"
        f"open(os.path.join({str(ready)!r}, str(os.getpid())), 'w').close()\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.001)\n"
    )
    env = child_env(KSPEC_CACHE_DIR=str(cache_dir))
    children = [
        subprocess.Popen(
            [sys.executable, "-c", wait + CHILD], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    deadline = time.monotonic() + 60
    while len(list(ready.iterdir())) < 4 and time.monotonic() < deadline:
        if any(child.poll() is not None for child in children):
            break  # a child died early; its stderr is reported below
        time.sleep(0.005)
    go.write_text("")
    results = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        results.append(json.loads(out))
    assert len({r["sha"] for r in results}) == 1
    assert all(r["lowered"] == results[0]["lowered"] for r in results)
    entries = _entries(cache_dir)
    assert len(entries) == 1
    # no temporary files left behind; the stats file is the cache's bookkeeping (hits, misses, the cap's trims)
    assert sorted(p.name for p in cache_dir.iterdir()) == sorted([entries[0].name, _cache_stats.STATS_NAME])
    program = BinaryCache(cache_dir).get(entries[0].stem)
    assert program is not None and hashlib.sha256(program.binary).hexdigest() == results[0]["sha"]


# --- default_cache --------------------------------------------------------------------------------------


def test_default_cache_follows_env(tmp_path, monkeypatch, cache_dir):
    first = default_cache()
    assert first.directory == cache_dir and default_cache() is first
    monkeypatch.setenv("KSPEC_CACHE_DIR", str(tmp_path / "other"))
    second = default_cache()
    assert second is not first and second.directory == tmp_path / "other"


def test_default_cache_platform_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("KSPEC_CACHE_DIR")
    if sys.platform.startswith("linux"):
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert default_cache().directory == tmp_path / "xdg" / "kspec"
        monkeypatch.delenv("XDG_CACHE_HOME")
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        assert default_cache().directory == tmp_path / "home" / ".cache" / "kspec"
    else:
        assert "kspec" in default_cache().directory.parts


def test_constructing_a_cache_touches_no_disk(tmp_path):
    BinaryCache(tmp_path / "lazy")
    assert not (tmp_path / "lazy").exists()


# --- kspec cache info | clear ---------------------------------------------------------------------------


def test_cli_info_and_clear(cache_dir, capsys):
    _compile()
    compile_cached('extern "C" __global__ void k2(int* a) { a[0] = 2; }', name="k2")
    size = sum(p.stat().st_size for p in _entries(cache_dir))

    assert kspec_main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert str(cache_dir) in out and "entries:   2" in out and f"({size} bytes)" in out

    assert kspec_main(["cache", "clear"]) == 0
    assert "removed 2 entries" in capsys.readouterr().out
    assert _entries(cache_dir) == []

    assert kspec_main(["cache", "info"]) == 0
    assert "entries:   0" in capsys.readouterr().out
    # cleared also in memory: the next compile is a miss that writes the entry again
    assert not _compile()[1] and len(_entries(cache_dir)) == 1


@pytest.mark.parametrize("content", [b"", b"garbage"], ids=["empty", "garbage"])
def test_cli_clear_reports_an_entry_it_cannot_recognise(cache_dir, capsys, content):
    """An empty or garbage file where a binary was: clear removes the real entries, names that file and why it
    was left (nothing shows kspec wrote it: in a shared directory it may be a user's), and succeeds."""
    _compile()
    compile_cached('extern "C" __global__ void k3(int* a) { a[0] = 3; }', name="k3")
    damaged = _entries(cache_dir)[0]
    damaged.write_bytes(content)
    assert kspec_main(["cache", "clear"]) == 0
    out = capsys.readouterr()
    text = out.out + out.err
    assert "removed 1 entry" in text and damaged.name in text and "does not start with kspec's magic" in text
    assert _entries(cache_dir) == [damaged]


def test_cli_dir_option(tmp_path, capsys, cache_dir):
    other = tmp_path / "elsewhere"
    _compile(cache=BinaryCache(other))
    assert kspec_main(["cache", "info", "--dir", str(other)]) == 0
    out = capsys.readouterr().out
    assert str(other) in out and "entries:   1" in out
    assert kspec_main(["cache", "clear", "--dir", str(other)]) == 0
    assert "removed 1 entry" in capsys.readouterr().out
    assert not _entries(other)


def test_cli_missing_dir(tmp_path, capsys):
    assert kspec_main(["cache", "info", "--dir", str(tmp_path / "none")]) == 0
    assert "entries:   0" in capsys.readouterr().out
    assert kspec_main(["cache", "clear", "--dir", str(tmp_path / "none")]) == 0
    assert "removed 0 entries" in capsys.readouterr().out


def test_cli_needs_an_action(capsys):
    with pytest.raises(SystemExit) as info:
        kspec_main(["cache"])
    assert info.value.code == 2


def test_cache_info_type(cache_dir):
    _compile()
    info = default_cache().info()
    assert isinstance(info, CacheInfo) and info.directory == cache_dir and info.entries == 1


def test_permission_denied_warns_once(monkeypatch):
    # What a read-only directory does for a non-root user (root, which runs CI containers, ignores modes).
    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    import tempfile

    monkeypatch.setattr(tempfile, "mkstemp", denied)  # where cache writes create their temp file (kspec/_atomic.py)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program, _ = _compile()
        compile_cached('extern "C" __global__ void k3(int* a) { a[0] = 3; }', name="k3")
    assert [w.category for w in caught] == [kspec.CacheWarning]
    assert "Permission denied" in str(caught[0].message)
    assert program.binary[:4] == b"\x7fELF"


# --- name expressions --------------------------------------------------------------------------------------------

# Templates whose name expressions may be spelled several ways that C++ mangling erases or normalises: spaces,
# `float *` / `float*`, a typedef (size_t), a constant expression as a non-type argument, a scoped enumerator.
NAME_EXPRESSION_SOURCE = """
namespace mylib {
enum class Tag { A, B };
}

template <typename T, typename U>
__global__ void multi_param(T* out, const U* in) { out[threadIdx.x] = static_cast<T>(in[threadIdx.x]); }

template <typename P>
__global__ void ptr_param(P p, unsigned long long* out) { out[0] = sizeof(p); }

template <typename T, int N>
__global__ void non_type_param(T* a) {
    for (int i = 0; i < N; ++i) a[i] *= 2;
}

template <mylib::Tag tag>
__global__ void enum_param(int* a) { a[0] = tag == mylib::Tag::B; }
"""


@pytest.mark.parametrize(
    "expr",
    [
        "multi_param<float, double>",
        "multi_param<float,double>",
        "ptr_param<float *>",
        "ptr_param<float*>",
        "ptr_param<const float*>",
        "non_type_param<float, 3>",
        "non_type_param<float, 1 + 2>",
        "ptr_param<size_t>",
        "enum_param<mylib::Tag::B>",
    ],
)
def test_name_expression_spellings_hit_from_disk(cache_dir, monkeypatch, expr):
    """A disk hit gives back the lowered name stored under the spelling the caller used, whatever mangling made
    of it."""

    def compile_expr(**kwargs) -> tuple[CompiledProgram, bool]:
        return compile_cached(NAME_EXPRESSION_SOURCE, name="spellings", name_expressions=(expr,),
                              options=CompileOptions(extra=("-std=c++17",)), **kwargs)  # fmt: skip

    first, hit = compile_expr()
    assert not hit and first.lowered_names[expr].startswith("_Z")
    assert len(_entries(cache_dir)) == 1
    _no_nvrtc(monkeypatch)
    program, hit = compile_expr(cache=BinaryCache(cache_dir))  # a new object: no memory layer, the disk entry
    assert hit and program.compile_ms == 0.0
    assert program.lowered_names[expr] == first.lowered_names[expr]
