"""Precompiled binaries without a GPU: the store's choice of binary per device, and libraries built on it."""

from __future__ import annotations

import json
import pickle

import pytest

import kspec
from kspec.kernels import BinaryStore, load_specs
from kspec.spec import load_file, spec_to_data


def write_store(tmp_path, entries):
    for e in entries:
        path = tmp_path / e["file"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"binary " + e["arch"].encode())
    manifest = {"kspec_manifest": 1, "kspec_version": kspec.__version__, "entries": entries}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    return BinaryStore(tmp_path)


def entry(key, arch, fmt="cubin"):
    return {
        "kernel": "k", "kind": "elementwise", "instantiation": {}, "arch": arch, "format": fmt,
        "file": f"k/default.{arch}.{fmt}", "lowered_names": {"k__contig<long long, 4>": "_Z1k"},
        "specialization_key": key,
    }


@pytest.mark.parametrize(
    "archs, device, expected",
    [
        (["sm_80", "sm_90"], "sm_90", "sm_90"),
        (["sm_80", "sm_90"], "sm_86", "sm_80"),  # same major, highest minor not above the device's
        (["sm_80", "sm_86"], "sm_89", "sm_86"),
        (["sm_86"], "sm_80", None),  # a newer minor does not run on an older one
        (["sm_80"], "sm_90", None),  # another major never
        (["sm_100", "sm_120"], "sm_120", "sm_120"),
    ],
)
def test_best_cubin_for_the_device(tmp_path, archs, device, expected):
    store = write_store(tmp_path, [entry("key", a) for a in archs])
    found = store.find("key", device)
    assert (found.arch if found else None) == expected
    assert store.find("other", device) is None
    assert store.archs("key") == sorted(archs)


def test_ptx_when_no_cubin_fits(tmp_path):
    store = write_store(tmp_path, [entry("key", "sm_80", "ptx"), entry("key", "sm_100")])
    found = store.find("key", "sm_90")
    assert found.format == "ptx" and found.arch == "sm_80" and found.read().endswith(b"\0")


def test_a_directory_without_manifest(tmp_path):
    with pytest.raises(kspec.KspecValueError, match="manifest"):
        BinaryStore(tmp_path)
    lib = load_specs([spec_to_data(s) for s in load_file("specs/elementwise.toml")], binaries=tmp_path / "none")
    assert lib.squared_diff._binaries is None  # nothing shipped: compile on first call


def test_load_specs_builds_the_callables_and_keeps_the_store_through_pickling(tmp_path):
    store = write_store(tmp_path, [entry("key", "sm_90")])
    tables = [spec_to_data(s) for s in load_file("specs/reduction.toml")]
    lib = load_specs(tables, binaries=tmp_path)
    assert isinstance(lib.l2norm, kspec.ReductionKernel) and lib.l2norm._binaries is not None
    assert lib.spec("l2norm") == next(s for s in load_file("specs/reduction.toml") if s.name == "l2norm")
    clone = pickle.loads(pickle.dumps(lib.l2norm))
    assert clone.spec == lib.l2norm.spec and clone._binaries.directory == store.directory
