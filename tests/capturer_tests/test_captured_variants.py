"""Captured launch variants: a capture writes the entry points its calls loaded (a specialization's ``variants``);
a build compiles those alone, each as the program a first call compiles (the same binary-cache key), the store
serves them one by one, and re-running a capture merges them. No GPU: NVRTC compiles for sm_90 here."""

from __future__ import annotations

import json
import typing
import warnings

import pytest

import kspec
from kspec import InstantiationError, KspecValueError
from kspec.build import plan_build, plan_warm, precompile, write_output
from kspec.capturer import CaptureMergeError, Recorder, merge_captured, write_captured
from kspec.compiler import cache_key, compile_program, default_cache, link_available, variant_program
from kspec.kernels import BinaryStore
from kspec.render import VariantKey, specialize
from kspec.spec import VARIANT_ENTRIES, VARIANT_INDEX_TYPES, load_file, parse_spec, parse_variant

SPEC = {"kind": "elementwise", "name": "axpy_v", "in_params": "T a, T x, T y", "out_params": "T z",
        "operation": "z = a * x + y"}


def _spec(variants: list[str] | None = None):
    entry = {"types": {"T": "float32"}, **({"variants": variants} if variants else {})}
    return parse_spec({**SPEC, "specializations": [entry]})


def test_the_spec_spelling_covers_the_renderers_variants():
    from kspec.render import _variants  # the Literal types the spec layer mirrors without importing render

    assert set(VARIANT_ENTRIES) == set(typing.get_args(_variants.Entry))
    assert set(VARIANT_INDEX_TYPES) == set(typing.get_args(_variants.IndexType))
    reduction = parse_spec({"kind": "reduction", "name": "sum_v", "in_params": "T x", "out_params": "T y",
                            "map_expr": "x", "reduce_expr": "a + b", "post_map_expr": "y = a", "identity": "0"})
    for specialization in (specialize(_spec(), {"T": "float32"}), specialize(reduction, {"T": "float16"})):
        for variant in specialization.variants:
            assert VariantKey(*parse_variant(variant.text)) == variant


def test_build_compiles_each_captured_variant_under_the_first_calls_cache_key(tmp_path, monkeypatch):
    """A first call's program (kspec.compiler.compile_program, what a kernel without binaries compiles) is in the
    cache; the build of the captured spec finds it there, and its manifest names the variant."""
    monkeypatch.setenv("KSPEC_CACHE_DIR", str(tmp_path / "cache"))
    spec = _spec(["contig/int64/0/4", "strided/int32/2/1"])
    specialization = specialize(spec, {"T": "float32"})
    contig = specialization.name_expression(VariantKey("contig", "int64", 0, 4))
    first_call = compile_program(specialization, "sm_90", None, (contig,))
    program = variant_program(specialization, "sm_90", (contig,))
    assert first_call.cache_key == cache_key(source_key=program.source_key, options=program.options,
                                             name_expressions=program.name_expressions, needs=program.needs)
    plan = plan_build([spec], ["sm_90"])
    assert [u.variant for u in plan.units] == [("contig", "int64", 0, 4), ("strided", "int32", 2, 1)]
    results = precompile(plan.units, jobs=1, isolate=False)
    assert [r.error for r in results] == [None, None]
    assert [r.cache_hit for r in results] == [True, False]  # the second variant was never called: compiled now
    assert list(results[0].program.lowered_names) == [contig]  # the entry point alone
    assert results[0].program.binary == first_call.binary
    write_output(results, tmp_path / "build")
    entries = json.loads((tmp_path / "build" / "manifest.json").read_text())["entries"]
    assert sorted(e["variant"] for e in entries) == ["contig/int64/0/4", "strided/int32/2/1"]
    assert len({e["interface"] for e in entries}) == 1  # one launch interface for the module's variants

    store = BinaryStore(tmp_path / "build")
    key = specialization.key
    assert store.has(key) and store.archs(key) == ["sm_90"]
    assert store.find(key, "sm_90") is None  # no whole module
    found = store.find_variant(key, "contig/int64/0/4", "sm_90")
    assert found is not None and found.read() and list(found.lowered_names) == [contig]
    assert store.find_variant(key, "contig/int64/0/4", "sm_80") is None
    assert store.find_variant(key, "tiled/int32/0/128", "sm_90") is None
    # kspec warm compiles the same programs: one unit per captured variant
    warm = plan_warm([spec], ["sm_90"])
    assert [u.expression for u in warm.units] == [contig, specialization.name_expression(VariantKey("strided", "int32", 2, 1))]


def test_a_variant_the_module_lacks_fails_its_unit_by_name():
    spec = _spec(["tiled/int32/0/128", "contig/int64/0/4"])  # tiles are 8, 16, 32 or 64 wide
    (unit,) = [u for u in plan_build([spec], ["sm_90"]).units if u.variant[0] == "tiled"]
    (result,) = precompile([unit], jobs=1, isolate=False)
    error = result.error
    assert isinstance(error, InstantiationError) and error.field == "specializations.variants"
    assert "tiled/int32/0/128 is not a launch variant" in str(error)
    assert "contig/int64/0/4" in str(error)  # what the module has


def test_a_manifests_variant_must_be_a_name(tmp_path):
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "a.sm_90.0123456789abcdef.cubin").write_bytes(b"x")
    entry = {"specialization_key": "k1", "file": "k/a.sm_90.0123456789abcdef.cubin", "format": "cubin",
             "arch": "sm_90", "sha256": "0" * 64, "lowered_names": {}, "variant": 3}
    (tmp_path / "manifest.json").write_text(json.dumps({"kspec_manifest": 2, "kspec_version": "0", "entries": [entry]}))
    with pytest.raises(KspecValueError, match="'variant' is not a launch variant's name"):
        BinaryStore(tmp_path)


def _record(directory, kernel, variants_by_types):
    """What a process's recorder writes for ``kernel``'s calls: each binding's specialization, then the variants
    its calls loaded."""
    recorder = Recorder(directory)
    for types, variants in variants_by_types:
        specialization = specialize(kernel.spec, types)
        recorder.specialized(kernel.spec, "digest", dict(types), frozenset(), (), specialization.key)
        for variant in variants:
            recorder.variant_loaded(specialization.key, variant)
    recorder.variant_loaded("not-recorded", "contig/int64/0/1")  # a specialization it did not write: ignored
    recorder.stop()


def test_capture_merges_variants_and_keeps_an_earlier_whole_entry_whole(tmp_path):
    kernel = kspec.ElementwiseKernel("T x", "T y", "y = x * 2", "twice_v")
    f32, f64 = {"T": "float32"}, {"T": "float64"}
    _record(tmp_path / "r1", kernel, [(f32, ["contig/int64/0/4"]), (f64, [])])
    write_captured(tmp_path / "r1", tmp_path / "out")
    (spec,) = load_file(next((tmp_path / "out").glob("*.toml")))
    assert [dict(e) for e in spec.specializations] == [
        {"types": f32, "variants": ["contig/int64/0/4"]}, {"types": f64}]  # float64: no variant seen (whole)
    _record(tmp_path / "r2", kernel, [(f32, ["strided/int32/2/1", "contig/int64/0/4"]), (f64, ["contig/int64/0/2"])])
    report = write_captured(tmp_path / "r2", tmp_path / "out")
    (spec,) = load_file(next((tmp_path / "out").glob("*.toml")))
    assert report.new_specializations == 0
    assert [dict(e) for e in spec.specializations] == [
        {"types": f32, "variants": ["contig/int64/0/4", "strided/int32/2/1"]},  # the union of both runs
        {"types": f64}]  # written whole by the first run: every variant is built, a later run narrows nothing


def test_specializations_differing_in_raw_layouts_keep_their_own_interfaces(tmp_path, monkeypatch):
    """Two captured raw layouts of one kernel and binding are two modules: each manifest entry names its own launch
    interface, which the store decodes as that specialization's (it used to be the first one's for both)."""
    monkeypatch.setenv("KSPEC_CACHE_DIR", str(tmp_path / "cache"))
    spec = parse_spec({"kind": "elementwise", "name": "gather_v", "in_params": "raw T w, T x", "out_params": "T z",
                       "operation": "z = w[0] + x",
                       "specializations": [{"types": {"T": "float32"}, "raw_layouts": {"w": [1, True]}},
                                           {"types": {"T": "float32"}, "raw_layouts": {"w": [2, True]}}]})
    results = precompile(plan_build([spec], ["sm_90"]).units, jobs=1, isolate=False)
    assert [r.error for r in results] == [None, None] and results[0].key != results[1].key
    write_output(results, tmp_path / "build")
    entries = json.loads((tmp_path / "build" / "manifest.json").read_text())["entries"]
    assert len({e["interface"] for e in entries}) == 2
    store = BinaryStore(tmp_path / "build")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a mismatched interface file warns
        assert all(store.interface(r.key).key == r.key for r in results)


@pytest.mark.skipif(not link_available(), reason="nvJitLink is not installed (kspec[nvrtc] brings it)")
def test_a_variant_built_for_several_archs_is_compiled_once_and_linked_under_each_first_calls_key(tmp_path, monkeypatch):
    monkeypatch.setenv("KSPEC_CACHE_DIR", str(tmp_path / "cache"))
    spec = _spec(["contig/int64/0/4"])
    results = precompile(plan_build([spec], ["sm_80", "sm_90"]).units, jobs=2, isolate=False)
    assert [(r.unit.arch, r.error, r.linked) for r in results] == [("sm_80", None, True), ("sm_90", None, True)]
    specialization = specialize(spec, {"T": "float32"})
    expression = specialization.name_expression(VariantKey("contig", "int64", 0, 4))
    for result in results:  # what a first call on that arch looks up
        program = variant_program(specialization, result.unit.arch, (expression,))
        key = cache_key(source_key=program.source_key, options=program.options,
                        name_expressions=program.name_expressions, needs=program.needs)
        assert default_cache().get(key).binary == result.program.binary
        assert list(result.program.lowered_names) == [expression]


def test_merging_captures_of_shards_unites_kernels_specializations_and_variants(tmp_path):
    """Two captures (a test run's shards on two machines) merged into a third directory: what either built, the
    variants of a specialization both saw united, one written whole by either side whole; merging again is a no-op."""
    twice = kspec.ElementwiseKernel("T x", "T y", "y = x * 2", "twice_m")
    thrice = kspec.ElementwiseKernel("T x", "T y", "y = x * 3", "thrice_m")
    f16, f32, f64 = {"T": "float16"}, {"T": "float32"}, {"T": "float64"}
    _record(tmp_path / "r1", twice, [(f32, ["contig/int64/0/4"]), (f64, [])])
    _record(tmp_path / "r2", twice, [(f32, ["strided/int32/2/1"]), (f64, ["contig/int64/0/2"]), (f16, ["contig/int32/0/8"])])
    _record(tmp_path / "r3", thrice, [(f32, ["contig/int64/0/4"])])
    write_captured(tmp_path / "r1", tmp_path / "shard1")
    write_captured(tmp_path / "r2", tmp_path / "shard2")
    write_captured(tmp_path / "r3", tmp_path / "shard2")
    report = merge_captured([tmp_path / "shard1", tmp_path / "shard2"], tmp_path / "all")
    assert (report.kernels, report.new_kernels, report.new_specializations) == (2, 2, 4)
    specs = {s.name: s for s in load_file(next((tmp_path / "all").glob("*.toml")))}
    assert [dict(e) for e in specs["twice_m"].specializations] == [
        {"types": f16, "variants": ["contig/int32/0/8"]},
        {"types": f32, "variants": ["contig/int64/0/4", "strided/int32/2/1"]},
        {"types": f64}]  # whole in shard 1: stays whole
    assert [dict(e) for e in specs["thrice_m"].specializations] == [{"types": f32, "variants": ["contig/int64/0/4"]}]
    text = {p.name: p.read_text() for p in (tmp_path / "all").glob("*.toml")}
    again = merge_captured([tmp_path / "shard2", tmp_path / "shard1"], tmp_path / "all")
    assert (again.new_kernels, again.new_specializations, again.files) == (0, 0, [])
    assert {p.name: p.read_text() for p in (tmp_path / "all").glob("*.toml")} == text
    with pytest.raises(CaptureMergeError, match="'nowhere' is not a directory of captured spec files"):
        merge_captured(["nowhere"], tmp_path / "all")


def test_kspec_capture_merge_on_the_command_line(tmp_path, capsys):
    from kspec.cli import main

    kernel = kspec.ElementwiseKernel("T x", "T y", "y = x * 4", "four_m")
    _record(tmp_path / "r1", kernel, [({"T": "float32"}, ["contig/int64/0/4"])])
    write_captured(tmp_path / "r1", tmp_path / "shard")
    assert main(["capture", "-o", str(tmp_path / "all"), "--merge", str(tmp_path / "shard")]) == 0
    assert "1 kernels in 1 changed spec files (1 new kernels, 1 new specializations" in capsys.readouterr().out
    assert main(["capture", "-o", str(tmp_path / "all"), "--merge", str(tmp_path / "shard"), "--prune"]) == 2
    assert "--merge runs nothing and prunes nothing" in capsys.readouterr().err
    assert main(["capture", "-o", str(tmp_path / "all"), "--merge", str(tmp_path / "none")]) == 2
    assert "is not a directory of captured spec files" in capsys.readouterr().err


def test_a_variant_captured_with_another_vector_width_builds_the_modules_own(tmp_path, monkeypatch):
    """A capture by a kspec whose module vectorised this kernel differently (a body with loop_prep state got vectors
    of 2 float64 before it got a thread per element): the build compiles the module's variant of the same entry,
    index and rank, and the manifest names that one, which is what a call now looks up; warm does the same."""
    monkeypatch.setenv("KSPEC_CACHE_DIR", str(tmp_path / "cache"))
    spec = parse_spec({"kind": "elementwise", "name": "stateful_v", "out_params": "float64 w",
                       "operation": "s += 0.5; w = s", "loop_prep": "double s = 0",
                       "specializations": [{"variants": ["contig/int64/0/2", "strided/int32/2/1"]}]})
    specialization = specialize(spec, {})
    assert specialization.vec == 1
    results = precompile(plan_build([spec], ["sm_90"]).units, jobs=1, isolate=False)
    assert [r.error for r in results] == [None, None]
    assert [r.variant for r in results] == ["contig/int64/0/1", "strided/int32/2/1"]
    write_output(results, tmp_path / "build")
    store = BinaryStore(tmp_path / "build")
    assert store.find_variant(specialization.key, "contig/int64/0/1", "sm_90") is not None
    assert store.find_variant(specialization.key, "contig/int64/0/2", "sm_90") is None
    contig = specialization.name_expression(VariantKey("contig", "int64", 0, 1))
    assert [u.expression for u in plan_warm([spec], ["sm_90"]).units][0] == contig
