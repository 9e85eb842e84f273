"""Ahead-of-time builds on a machine with no GPU: every declared instantiation of specs/ for sm_80 and sm_90."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kspec.build import MANIFEST_NAME, plan_build, precompile, read_manifest, write_output
from kspec.cli import main
from kspec.compiler import BinaryCache, CompileOptions, compile_source
from kspec.compiler._cubin import register_counts
from kspec.spec import load_library, parse_spec

REPO = Path(__file__).resolve().parents[2]
ARCHS = ("sm_80", "sm_90")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Every declared instantiation of specs/ for sm_80 and sm_90, compiled once for the module's tests."""
    library = load_library(REPO / "specs")
    plan = plan_build(library.values(), ARCHS)
    cache = BinaryCache(tmp_path_factory.mktemp("cache"))
    results = precompile(plan.units, cache=cache)
    return library, plan, results, cache


def modules_of(spec, arch):
    """The modules a build compiles for one spec and arch: a tuned raw spec's default and its record's winners
    for that arch (issue [AT]), any other raw spec's one, the declared instantiations of the rest."""
    from kspec._tuning import kernel_entry, read_record, record_path, winners

    if spec.KIND == "raw" and spec.tune is not None:
        entry = kernel_entry(read_record(record_path(spec.origin)), arch, spec.name)
        return len({json.dumps(c, sort_keys=True) for c in [spec.tune["default"], *winners(entry)]})
    return max(1, len(spec.declared_instantiations()) if spec.KIND != "raw" else 1)


def test_every_instantiation_compiles_for_sm80_and_sm90(built):
    library, plan, results, _ = built
    failures = [f"{r.unit.spec.name}[{r.unit.label}] {r.unit.arch}: {r.error}" for r in results if not r.ok]
    assert not failures, "\n".join(failures)
    from kspec.spec import with_backwards  # specs with gradients: their backwards and the gradient sums too

    specs = with_backwards(library.values())
    assert len(specs) > len(library)
    assert len(results) == sum(modules_of(s, arch) for s in specs for arch in ARCHS)
    assert not plan.skipped  # every kernel of specs/ declares what to precompile
    for r in results:
        assert r.program.binary[:4] == b"\x7fELF" and r.program.arch == r.unit.arch
        assert set(r.program.lowered_names) and all(r.program.lowered_names.values())
        assert r.max_registers and r.max_registers > 0


def test_second_build_is_all_cache_hits(built):
    _, plan, _, cache = built
    again = precompile(plan.units[:6], cache=cache)
    assert all(r.cache_hit and r.program.compile_ms == 0.0 for r in again)


def test_output_directory_and_manifest(built, tmp_path):
    _, _, results, _ = built
    manifest_path = write_output(results, tmp_path)
    manifest = json.loads(manifest_path.read_text())
    assert manifest_path.name == MANIFEST_NAME and manifest == read_manifest(tmp_path)
    entries = manifest["entries"]
    assert len(entries) == len(results)
    e = next(e for e in entries if e["kernel"] == "fx3" and e["arch"] == "sm_90")
    assert e["kind"] == "raw" and e["file"] == f"fx3/default.sm_90.{e['sha256'][:16]}.cubin"  # named by its bytes
    assert e["lowered_names"]["fx3<float>"].startswith("_Z")
    g = next(e for e in entries if e["kernel"] == "squared_diff_generic" and e["instantiation"] == {"T": "float16"})
    assert g["specialization_key"] and len(g["source_sha256"]) == 64
    for e in entries:
        data = (tmp_path / e["file"]).read_bytes()
        assert data[:4] == b"\x7fELF"


def test_stale_binaries_are_removed(built, tmp_path):
    _, _, results, _ = built
    write_output(results, tmp_path)
    first = {p for p in tmp_path.rglob("*") if p.is_file()}
    write_output(results[:2], tmp_path)
    files = {p for p in tmp_path.rglob("*") if p.is_file() and p.name != MANIFEST_NAME}
    entries = json.loads((tmp_path / MANIFEST_NAME).read_text())["entries"]
    listed = {tmp_path / e[field] for e in entries for field in ("file", "interface") if field in e}
    assert files == listed and len(first) > len(files) + 1  # binaries and interfaces of the dropped kernels went
    assert sum(p.name.endswith(".interface.json") for p in listed) >= 1


def test_cli_build_prints_table_and_writes_output(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KSPEC_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "out"
    assert main(["build", str(REPO / "specs" / "raw.toml"), "--arch", "sm_90", "-o", str(out), "--verbose"]) == 0
    text = capsys.readouterr().out
    assert re.search(r"fx3 .* sm_90 .* \d+", text)
    assert "5/5 modules built for sm_90" in text
    assert (out / MANIFEST_NAME).is_file() and len(list((out / "my_add").glob("default.sm_90.*.cubin"))) == 1


def test_cli_build_failure_exits_1_after_building_the_rest(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KSPEC_CACHE_DIR", str(tmp_path / "cache"))
    spec_file = tmp_path / "k.toml"
    spec_file.write_text(
        'schema = 1\n'
        '[[kernel]]\nkind = "elementwise"\nname = "broken"\nin_params = "float32 x"\nout_params = "float32 y"\n'
        'operation = "y = undefined_function(x)"\n'
        '[[kernel]]\nkind = "elementwise"\nname = "fine"\nin_params = "float32 x"\nout_params = "float32 y"\n'
        'operation = "y = x"\n'
    )
    assert main(["build", str(spec_file), "--arch", "sm_80", "-o", str(tmp_path / "out")]) == 1
    captured = capsys.readouterr()
    assert "1/2 modules built" in captured.out and "1 failed" in captured.out
    assert "FAILED broken" in captured.err and "undefined_function" in captured.err
    manifest = read_manifest(tmp_path / "out")
    assert [e["kernel"] for e in manifest["entries"]] == ["fine"]


def test_cli_build_bad_arch(capsys):
    assert main(["build", str(REPO / "specs"), "--arch", "sm_x"]) == 1
    assert "--arch" in capsys.readouterr().err


def test_generic_kernel_without_instantiations_is_skipped_with_a_reason():
    spec = parse_spec(dict(kind="elementwise", name="g", in_params="T x", out_params="T y", operation="y = x"))
    plan = plan_build([spec], ARCHS)
    assert plan.units == [] and "first call" in plan.skipped[0][1]


def test_register_counts_match_ptxas():
    src = 'extern "C" __global__ void small(float* x) { x[threadIdx.x] += 1; }'
    for arch in ARCHS:
        program = compile_source(src, name="regs", options=CompileOptions(arch=arch, extra=("--ptxas-options=-v",)),
                                 name_expressions=("small",))
        reported = re.findall(r"Used (\d+) registers", program.log)
        assert register_counts(program.binary) == {"small": int(reported[0])}


def test_register_counts_of_non_elf_is_empty():
    assert register_counts(b"// PTX\n.version 8.0\n") == {}
    assert register_counts(b"") == {}
