"""Precompiled binaries without a GPU: the store's choice of binary per device, and libraries built on it."""

from __future__ import annotations

import hashlib
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
        data = b"binary " + e["arch"].encode()
        path.write_bytes(data)
        e["sha256"] = hashlib.sha256(data).hexdigest()  # manifest version 2: every binary's digest
    manifest = {"kspec_manifest": 2, "kspec_version": kspec.__version__, "entries": entries}
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


def test_raw_specs_find_their_binaries_by_key(tmp_path):
    """A raw spec's binary (real NVRTC output, no GPU) is filed under the key `kspec.load` looks it up by,
    and template kernels resolve through the manifest's lowered names rather than a compile."""
    from kspec.build import plan_build, precompile, write_output
    from kspec.render import specialize

    specs = {spec.name: spec for spec in load_file("specs/raw.toml")}
    plan = plan_build(specs.values(), ["sm_90"])
    results = precompile(plan.units, jobs=4)
    assert all(r.ok for r in results), [str(r.error) for r in results if not r.ok]
    write_output(results, tmp_path)
    store = BinaryStore(tmp_path)
    lib = kspec.load("specs/raw.toml", binaries=tmp_path)
    for name, spec in specs.items():
        assert store.find(specialize(spec).key, "sm_90") is not None, name
        assert store.find(specialize(spec).key, "sm_80") is None, name
    fx3 = lib.fx3  # a RawModule with name expressions
    assert fx3._stored("sm_90") is not None
    lowered = fx3._symbol("fx3<float>", "sm_90")
    assert lowered.startswith("_Z") and "fx3" in lowered
    assert fx3._programs == {}  # nothing was compiled to get there
    my_add = lib.my_add  # a plain RawKernel
    assert my_add._module._stored("sm_90").path.endswith(".cubin")
    assert my_add._module._symbol("my_add", "sm_90") == "my_add"
