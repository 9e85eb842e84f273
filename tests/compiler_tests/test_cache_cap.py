"""The binary cache's size cap (LRU eviction, safe with concurrent processes) and its hit/miss counts.

Entries here are made-up programs (no NVRTC needed): the cache stores bytes, whatever they are.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from kspec import CacheWarning, KspecValueError
from kspec.cli import main as kspec_main
from kspec.compiler import BinaryCache, CompiledProgram
from kspec.compiler.cache import _stats as _cache_stats
from kspec.compiler.cache._stats import DEFAULT_MAX_BYTES, max_bytes_from_env, parse_size, read_stats

from helpers.child_env import child_env

ENTRY = 1000  # bytes of binary per made-up entry (the entry file adds a header of ~200 bytes)


def program(tag: int, size: int = ENTRY) -> CompiledProgram:
    return CompiledProgram(binary=bytes([tag % 256]) * size, format="cubin", arch="sm_80", lowered_names={},
                           log="", nvrtc_version=(13, 0), compile_ms=0.0)  # fmt: skip


def key(i: int) -> str:
    return f"{i:064x}"


def entry_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.glob("*.kbin"))


@pytest.fixture()
def cache_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("KSPEC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KSPEC_CACHE_MAX_BYTES", raising=False)
    return tmp_path / "cache"


# --- the setting ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [("0", 0), ("1073741824", 1 << 30), ("512M", 512 << 20),
                                            ("2GiB", 2 << 30), (" 64 kb ", 64 << 10), ("7", 7)])  # fmt: skip
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "-1", "1.5G", "12 parsecs", "G"])
def test_parse_size_rejects(text):
    with pytest.raises(ValueError, match="expected a size in bytes"):
        parse_size(text)


def test_env_default_no_cap_and_bad_value(monkeypatch):
    monkeypatch.delenv("KSPEC_CACHE_MAX_BYTES", raising=False)
    assert max_bytes_from_env() == DEFAULT_MAX_BYTES == 1 << 30
    monkeypatch.setenv("KSPEC_CACHE_MAX_BYTES", "0")
    assert max_bytes_from_env() is None and BinaryCache("x").max_bytes is None
    monkeypatch.setenv("KSPEC_CACHE_MAX_BYTES", "20M")
    assert BinaryCache("x").max_bytes == 20 << 20 and BinaryCache("x", max_bytes=5).max_bytes == 5
    monkeypatch.setenv("KSPEC_CACHE_MAX_BYTES", "lots-unique-value")
    with pytest.warns(CacheWarning, match="KSPEC_CACHE_MAX_BYTES.*lots-unique-value"):
        assert max_bytes_from_env() == DEFAULT_MAX_BYTES  # a typo must not stop kernels: warn, use the default
    with pytest.raises(KspecValueError, match="max_bytes"):
        BinaryCache("x", max_bytes=-1)


# --- eviction ---------------------------------------------------------------------------------------------


def test_tiny_cap_keeps_the_total_under_it(cache_dir):
    cap = 6 * (ENTRY + 300)
    cache = BinaryCache(cache_dir, max_bytes=cap)
    for i in range(40):
        cache.put(key(i), program(i))
        assert entry_bytes(cache_dir) <= cap
    remaining = sorted(p.stem for p in cache_dir.glob("*.kbin"))
    assert key(39) in remaining and key(0) not in remaining  # the newest stay
    assert cache.info().evictions == 40 - len(remaining)
    for k in remaining:  # what stays is whole
        assert BinaryCache(cache_dir).get(k) is not None


def test_least_recently_used_goes_first(cache_dir):
    cache = BinaryCache(cache_dir, max_bytes=0)  # no cap while filling
    for i in range(5):
        cache.put(key(i), program(i))
        os.utime(cache_dir / f"{key(i)}.kbin", (1000 + i, 1000 + i))  # written in order, long ago
    assert BinaryCache(cache_dir).get(key(0)) is not None  # a hit from disk marks entry 0 as just used
    capped = BinaryCache(cache_dir, max_bytes=4 * (ENTRY + 300))
    capped.put(key(5), program(5))
    remaining = {p.stem for p in cache_dir.glob("*.kbin")}
    assert key(0) in remaining and key(5) in remaining
    assert key(1) not in remaining  # the oldest one not used since


def test_the_entry_just_written_is_never_evicted(cache_dir):
    cache = BinaryCache(cache_dir, max_bytes=100)  # smaller than any entry
    cache.put(key(1), program(1))
    cache.put(key(2), program(2))
    assert [p.stem for p in cache_dir.glob("*.kbin")] == [key(2)]
    assert BinaryCache(cache_dir).get(key(2)) is not None


def test_trim_leaves_temporary_and_foreign_files(cache_dir):
    cache = BinaryCache(cache_dir, max_bytes=0)
    for i in range(4):
        cache.put(key(i), program(i))
    writing = cache_dir / f".{key(9)[:16]}.abcdefgh.tmp"  # an entry being written by another process
    writing.write_bytes(b"KSPECBIN" + b"\0" * 5000)
    foreign = cache_dir / f"{key(8)}.kbin"  # named like an entry, not kspec's
    foreign.write_bytes(b"not an entry")
    os.utime(foreign, (1, 1))  # the oldest of all
    other = cache_dir / "notes.txt"
    other.write_text("mine")
    removed, _ = _cache_stats.trim(cache_dir, 2 * (ENTRY + 300))
    assert removed >= 2
    assert writing.exists() and foreign.exists() and other.exists()


def test_trim_tolerates_files_vanishing(cache_dir, monkeypatch):
    cache = BinaryCache(cache_dir, max_bytes=0)
    for i in range(6):
        cache.put(key(i), program(i))
    real_unlink = Path.unlink

    def racing_unlink(self, missing_ok=False):  # another process removes each file first
        real_unlink(self)
        raise FileNotFoundError(self)

    monkeypatch.setattr(Path, "unlink", racing_unlink)
    _cache_stats.trim(cache_dir, 2 * (ENTRY + 300))
    assert entry_bytes(cache_dir) <= 2 * (ENTRY + 300)


def test_an_old_oversized_cache_is_trimmed_at_the_first_write(cache_dir):
    BinaryCache(cache_dir, max_bytes=0)  # written by a kspec without the cap: no stats file
    for i in range(10):
        BinaryCache(cache_dir, max_bytes=0).put(key(i), program(i))
    (cache_dir / _cache_stats.STATS_NAME).unlink()
    BinaryCache(cache_dir, max_bytes=3 * (ENTRY + 300)).put(key(10), program(10))
    assert entry_bytes(cache_dir) <= 3 * (ENTRY + 300)


def test_trims_are_batched(cache_dir):
    # After a trim, the next ones wait for cap / 16 more bytes: a put does not scan the directory each time.
    cap = 64 * (ENTRY + 300)
    cache = BinaryCache(cache_dir, max_bytes=cap)
    calls = []
    real = _cache_stats.trim
    _cache_stats.trim = lambda *a, **k: calls.append(1) or real(*a, **k)  # type: ignore[assignment]
    try:
        for i in range(16):
            cache.put(key(i), program(i))
    finally:
        _cache_stats.trim = real  # type: ignore[assignment]
    assert 1 <= len(calls) <= 6


# --- counts -----------------------------------------------------------------------------------------------


def test_hits_and_misses_in_process_and_after_exit(cache_dir, capsys):
    cache = BinaryCache(cache_dir)
    assert cache.get(key(1)) is None  # miss
    cache.put(key(1), program(1))  # flushes the miss
    assert cache.get(key(1)) is not None  # hit (memory)
    assert BinaryCache(cache_dir).get(key(1)) is not None  # hit (disk), another object
    info = cache.info()
    assert (info.hits, info.misses) == (1, 1)  # this object's own pending hit + the flushed miss
    assert read_stats(cache_dir).misses == 1
    assert kspec_main(["cache", "info", "--dir", str(cache_dir)]) == 0
    out = capsys.readouterr().out
    assert "misses:    1" in out and "cap 1.0 GiB" in out and "evicted:   0 entries" in out


def test_counts_from_several_processes_add_up(cache_dir):
    # Each child: 3 misses, 2 puts, 5 hits; counts go to the stats file at the put and at exit.
    child = (
        "import sys\nfrom kspec.compiler import BinaryCache, CompiledProgram\n"
        "c = BinaryCache(sys.argv[1])\nn = int(sys.argv[2])\n"
        "p = CompiledProgram(b'x' * 100, 'cubin', 'sm_80', {}, '', (13, 0), 0.0)\n"
        "for i in range(3): assert c.get(f'{n:032x}{i:032x}') is None\n"
        "for i in range(2): c.put(f'{n:032x}{i:032x}', p)\n"
        "for i in range(5): assert c.get(f'{n:032x}{i % 2:032x}') is not None\n"
    )
    env = child_env()
    procs = [subprocess.Popen([sys.executable, "-c", child, str(cache_dir), str(n)], env=env) for n in range(6)]
    assert [p.wait(timeout=120) for p in procs] == [0] * 6
    stats = read_stats(cache_dir)
    assert (stats.hits, stats.misses) == (30, 18)


def test_clear_resets_the_counts(cache_dir, capsys):
    cache = BinaryCache(cache_dir)
    cache.get(key(1))
    cache.put(key(1), program(1))
    assert kspec_main(["cache", "clear", "--dir", str(cache_dir)]) == 0
    info = BinaryCache(cache_dir).info()
    assert (info.entries, info.hits, info.misses, info.evictions) == (0, 0, 0, 0)


def test_memory_only_cache_counts_too():
    cache = BinaryCache(None)
    cache.get(key(1))
    cache.put(key(1), program(1))
    cache.get(key(1))
    info = cache.info()
    assert (info.hits, info.misses, info.max_bytes) == (1, 1, None)


# --- several processes at once with a tiny cap ------------------------------------------------------------

WRITER = """
import os, sys, time
from kspec.compiler import BinaryCache, CompiledProgram
directory, n, cap, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
while not os.path.exists(go):
    time.sleep(0.001)
cache = BinaryCache(directory, max_bytes=cap)
bad = 0
for i in range(60):
    k = f"{n:032x}{i:032x}"
    cache.put(k, CompiledProgram(bytes([n]) * 1000, "cubin", "sm_80", {}, "", (13, 0), 0.0))
    for j in range(0, i, 7):  # read others' entries and own older ones: whole or missing, never damaged
        other = f"{(n + j) % 6:032x}{j:032x}"
        got = BinaryCache(directory).get(other)
        if got is not None and got.binary != bytes([(n + j) % 6]) * 1000:
            bad += 1
print(bad)
"""


def test_concurrent_writers_and_readers_with_a_tiny_cap(cache_dir, tmp_path):
    cap = 20 * 1300
    cache_dir.mkdir()
    go = tmp_path / "go"
    env = child_env()
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(cache_dir), str(n), str(cap), str(go)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        for n in range(6)
    ]
    time.sleep(0.3)
    go.write_text("")
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and "Traceback" not in err, err
        assert out.strip() == "0"  # no reader ever saw a damaged entry
    assert not list(cache_dir.glob(".*.tmp"))  # no temporary file left behind
    # every writer trims at most cap/16 bytes late, so the total stays near the cap (6 processes x 1 entry)
    assert entry_bytes(cache_dir) <= cap + 6 * 1300
    stats = json.loads((cache_dir / _cache_stats.STATS_NAME).read_text())
    assert stats["evictions"] == 6 * 60 - len(list(cache_dir.glob("*.kbin")))  # every removal was counted once
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for path in cache_dir.glob("*.kbin"):
            assert BinaryCache(cache_dir).get(path.stem) is not None
