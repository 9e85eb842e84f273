"""A build's manifest read a bucket of keys at a time (kspec/_manifest.py's index): what a process serving a few
kernels of a large build reads, and what it does with a manifest that is not what its index says. No GPU needed."""

from __future__ import annotations

import hashlib
import json
import warnings

import pytest

import kspec
from kspec._manifest import manifest_bytes, read_index
from kspec.kernels import BinaryStore
from kspec.kernels.binaries import _stores


def _key(n: int) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()


def _entries(tmp_path, count: int, archs=("sm_80", "sm_90")) -> list[dict]:
    entries = []
    for n in range(count):
        for arch in archs:
            data = f"binary {n} {arch}".encode()
            rel = f"k{n}/{arch}.cubin"
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_bytes(data)
            entries.append({
                "kernel": f"k{n}", "kind": "elementwise", "arch": arch, "format": "cubin", "file": rel,
                "lowered_names": {f"k{n}__contig<long long, 1>": f"_Z{n}"}, "specialization_key": _key(n),
                "sha256": hashlib.sha256(data).hexdigest(),
                **({"variant": "contig/int64/0/1"} if n % 3 == 0 else {}),
            })
    return entries


def _write(tmp_path, entries) -> bytes:
    data = manifest_bytes(kspec.__version__, entries)
    (tmp_path / "manifest.json").write_bytes(data)
    return data


@pytest.mark.parametrize("count, prefix", [(0, 1), (5, 1), (300, 2), (3000, 2), (5000, 3)])
def test_index_buckets_hold_the_entries_of_their_keys(tmp_path, count, prefix):
    entries = [{"specialization_key": _key(n), "file": f"{n}.cubin"} for n in range(count)]
    document = json.loads(_write(tmp_path, entries))  # still one JSON document, for every other reader
    assert [e["specialization_key"] for e in document["entries"]] == sorted(_key(n) for n in range(count))
    index = read_index(tmp_path)
    assert index is not None and index.prefix == prefix and index.count == count and index.version == 2
    for n in range(0, count, 97):
        bucket = index.bucket(_key(n))
        assert index.entries(bucket) == [e for e in document["entries"] if e["specialization_key"].startswith(bucket)]
    assert index.entries("zzz"[:prefix]) == []


def test_store_reads_the_buckets_it_looks_up_and_serves_as_the_whole_manifest(tmp_path):
    entries = _entries(tmp_path, 400)
    _write(tmp_path, entries)
    store = BinaryStore(tmp_path)
    assert repr(store).endswith("400 specializations>") and not store._read_buckets
    assert store.has(_key(7)) and store.archs(_key(7)) == ["sm_80", "sm_90"]
    assert store._read_buckets == {_key(7)[:2]}  # one bucket of 256 read
    whole = BinaryStore(tmp_path, manifest=json.loads((tmp_path / "manifest.json").read_text()))
    assert whole._index is None  # the caller's parsed manifest: read whole, as before
    for n in range(400):
        key = _key(n)
        variant = "contig/int64/0/1"
        pairs = [(store.find(key, "sm_90"), whole.find(key, "sm_90")),
                 (store.find_variant(key, variant, "sm_86"), whole.find_variant(key, variant, "sm_86"))]
        for a, b in pairs:
            assert (a and (a.path, a.arch, a.data)) == (b and (b.path, b.arch, b.data))
    assert store.find(_key(3), "sm_90") is None and store.find_variant(_key(3), "contig/int64/0/1", "sm_90").arch == "sm_90"
    assert not store.has(_key(999))


def test_manifest_rewritten_by_another_tool_reads_whole(tmp_path):
    entries = _entries(tmp_path, 20)
    data = _write(tmp_path, entries)
    (tmp_path / "manifest.json").write_text(json.dumps(json.loads(data), indent=1))
    assert read_index(tmp_path) is None
    store = BinaryStore(tmp_path)
    assert store._index is None and store.find(_key(4), "sm_90").arch == "sm_90"


def test_an_index_that_does_not_match_its_entries_is_not_trusted(tmp_path):
    entries = _entries(tmp_path, 300)
    data = _write(tmp_path, entries)
    # edited in place, same length: key 5 now starts with another character, so it sits in another bucket's bytes
    old = _key(5)
    new = ("0" if old[0] != "0" else "1") + old[1:]
    (tmp_path / "manifest.json").write_bytes(data.replace(old.encode(), new.encode()))
    store = BinaryStore(tmp_path)
    assert not store.has(old) and store._index is None  # its bucket's bytes hold another bucket's key: read whole
    assert store.has(new) and store.find(new, "sm_90").arch == "sm_90"


def test_a_damaged_entry_is_a_typed_error_at_every_lookup_of_its_bucket(tmp_path):
    entries = _entries(tmp_path, 300)
    data = _write(tmp_path, entries)
    digest = entries[10]["sha256"].encode()
    (tmp_path / "manifest.json").write_bytes(data.replace(digest, b"z" * len(digest)))
    store = BinaryStore(tmp_path)  # the head is fine: nothing read yet
    for _ in range(2):
        with pytest.raises(kspec.KspecValueError, match="'sha256' is not a sha256 hex digest"):
            store.has(_key(5))
    assert _key(200)[:2] != _key(5)[:2] and store.find(_key(200), "sm_90").arch == "sm_90"  # checked, and whole


@pytest.mark.parametrize("cut", [10, -10])
def test_a_truncated_manifest_is_not_indexed(tmp_path, cut):
    data = _write(tmp_path, _entries(tmp_path, 30))
    (tmp_path / "manifest.json").write_bytes(data[:cut])
    assert read_index(tmp_path) is None
    with pytest.raises(kspec.KspecValueError, match="no kspec manifest.json"):
        BinaryStore(tmp_path)


def test_content_lookup_drops_a_store_found_damaged_and_says_so(tmp_path, monkeypatch):
    good, bad = tmp_path / "good", tmp_path / "bad"
    for directory in (good, bad):
        directory.mkdir()
        _write(directory, _entries(directory, 40))
    data = (bad / "manifest.json").read_bytes()
    (bad / "manifest.json").write_bytes(data.replace(b'"format": "cubin"', b'"format": "cubix"'))
    stores = [BinaryStore(bad), BinaryStore(good)]
    monkeypatch.setattr(_stores, "_registered", stores)
    monkeypatch.setattr(_stores, "_discovered", [])
    with pytest.warns(kspec.BinaryWarning, match="is damaged.*not serving binaries from it"):
        assert _stores.content_store(_key(1)).directory == good
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _stores.content_store(_key(2)).directory == good and len(stores) == 1
