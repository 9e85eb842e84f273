"""The planner's tuning space (issue [AT]): elementwise and reduction specs' ``tune.cases``, layout labels, the
knobs a record gives a layout, and the record in a loaded kernel, a build output and a generated module. On
the CPU device (a record's ``host`` section) the whole path runs here; kspec tune itself needs a GPU
(tests/tune_tests/test_plan_tuning_gpu.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kspec
from kspec import ArraySpec, SpecError
from kspec._plan_tuning import choose_knobs, layout_label, parse_layout, plan_digest
from kspec._tuning import BUILD_RECORD, TuningError, dumps, record_path

REPO = Path(__file__).resolve().parents[2]

SPEC = '''schema = 1

[[kernel]]
kind = "elementwise"
name = "sqd"
in_params = "T x, T y"
out_params = "T z"
operation = "z = (x - y) * (x - y)"
cupy_headers = true  # as a CuPy-style constructor call's kernel: the same code (test_a_constructor_kernel...)
instantiations = [{ T = "float32" }]

[kernel.tune]
cases = [
  { args = { x = "float32[64, 48]", y = "float32[48, 64].T" } },
  { args = { x = "float32[4096]", y = "float32[4096]" } },
]

[[kernel]]
kind = "reduction"
name = "ssq"
in_params = "T x"
out_params = "T y"
map_expr = "x * x"
reduce_expr = "a + b"
post_map_expr = "y = a"
identity = "0"
instantiations = [{ T = "float32" }]

[kernel.tune]
cases = [{ args = { x = "float32[64, 1000]" }, axis = [0] }]
'''


@pytest.fixture()
def spec_file(tmp_path):
    path = tmp_path / "planned.toml"
    path.write_text(SPEC)
    return path


def entry_of(spec_file, name, buckets):
    table = kspec.load(spec_file).spec(name).to_data()
    return {"key": ["layout"], "digest": plan_digest(table), "default": {}, "complete": True,
            "buckets": {label: {"winner": {"config": knobs, "ms": 1.0}} for label, knobs in buckets.items()}}


def write_record(spec_file, arch, entries):
    record = {"format": 1, "archs": {arch: {"device": "test", "kernels": entries}}}
    record_path(spec_file).write_text(dumps(record))


# -- the space and the cases ---------------------------------------------------------------------------------


def test_layouts():
    assert parse_layout("float32[64, 48]", "f") == ("float32", (64, 48), None)
    assert parse_layout("float16[2, 3, 4].T", "f").perm == (2, 1, 0)
    assert parse_layout("int8[2, 3, 4].transpose(1, 2, 0)", "f").perm == (1, 2, 0)
    for bad, words in [("float32", "expected"), ("float33[4]", "dtype"), ("float32[0, 4]", "positive"),
                       ("float32[4, 4].transpose(0, 0)", "permutation"), ("float32[a]", "ints"), (4, "expected")]:
        with pytest.raises(TuningError, match=words) as info:
            parse_layout(bad, "tune.cases[0].args.x")
        assert info.value.field == "tune.cases[0].args.x"


@pytest.mark.parametrize("tune, field, words", [
    ({"cases": []}, "tune.cases", "non-empty"),
    ({"cases": [{"args": {"x": "float32[4]", "y": "float32[4]"}}], "params": {}}, "tune", "only 'cases'"),
    ({"cases": [{"args": {"x": "float32[4]"}}]}, "tune.cases[0].args", "'y' is missing"),
    ({"cases": [{"args": {"x": "float32[4]", "y": "float32[4]", "w": "float32[4]"}}]}, "tune.cases[0].args.w", "not a parameter"),
    ({"cases": [{"args": {"x": "float32[4]", "y": "float32[4x]"}}]}, "tune.cases[0].args.y", "must be ints"),
    ({"cases": [{"args": {"x": "float32[4]", "y": "float32[4]", "z": 2.0}}]}, "tune.cases[0].args.z", "not a number"),
    ({"cases": [{"args": {"x": "float32[4]", "y": "float32[4]"}, "axis": 0}]}, "tune.cases[0]", "args required"),
])  # fmt: skip
def test_bad_cases_are_spec_errors_naming_the_field(tune, field, words):
    from kspec.spec import ElementwiseSpec

    with pytest.raises(SpecError, match=words) as info:
        ElementwiseSpec(name="sqd", in_params="T x, T y", out_params="T z", operation="z = x - y", tune=tune)
    assert info.value.field == field


def test_a_reduction_case_takes_axis_and_keepdims():
    from kspec.spec import ReductionSpec

    fields = dict(name="ssq", in_params="T x", out_params="T y", map_expr="x", reduce_expr="a + b", post_map_expr="y = a")
    ReductionSpec(**fields, tune={"cases": [{"args": {"x": "float32[8, 4]"}, "axis": [0], "keepdims": True}]})
    with pytest.raises(SpecError, match="axis") as info:
        ReductionSpec(**fields, tune={"cases": [{"args": {"x": "float32[8, 4]"}, "axis": "0"}]})
    assert info.value.field == "tune.cases[0].axis"


def test_cases_are_not_code(spec_file):
    """Editing the cases recompiles nothing (the binaries' content keys leave them out) and keeps a record's
    entries (its digest leaves them out, and the doc)."""
    spec = kspec.load(spec_file).spec("sqd")
    bare = type(spec)(**{k: v for k, v in spec.to_data().items() if k not in ("kind", "tune")})
    x = np.zeros(4, np.float32)
    assert kspec.ElementwiseKernel.from_spec(spec).specialization(x, x).key == \
        kspec.ElementwiseKernel.from_spec(bare).specialization(x, x).key
    table = spec.to_data()
    assert plan_digest(table) == plan_digest({**table, "tune": {"cases": []}, "doc": "other"})
    assert plan_digest(table) != plan_digest({**table, "operation": "z = x + y"})


def test_labels_and_the_nearest_choice():
    assert layout_label("tiled", 4, (2000, 1000, 3)) == "tiled 4B 2048x1024x4"
    assert layout_label("cols", 2, (), (100,)) == "cols 2B /128"
    entry = {"buckets": {"tiled 4B 2048x2048": {"winner": {"config": {"tile": 16}}},
                         "tiled 4B 64x64": {"winner": {"config": {"tile": 0, "block": 128}}},
                         "dense 4B 2048x2048": {"winner": {"config": {"per_sm": 8}}}}}  # fmt: skip
    assert choose_knobs(entry, "tiled 4B 2048x2048") == ({"tile": 16}, "record")
    assert choose_knobs(entry, "tiled 4B 1024x4096") == ({"tile": 16}, "record, nearest tiled 4B 2048x2048")
    assert choose_knobs(entry, "tiled 4B 128x64") == ({"tile": 0, "block": 128}, "record, nearest tiled 4B 64x64")
    # another class, item size or rank: the rules
    assert choose_knobs(entry, "tiled 8B 2048x2048") == (None, "rules")
    assert choose_knobs(entry, "tiled 4B 2048x2048x2") == (None, "rules")
    assert choose_knobs(entry, "strided 4B 2048x2048") == (None, "rules")
    assert choose_knobs(None, "tiled 4B 64x64") == (None, "rules")


# -- knobs in plans (the CPU device plans as a GPU does) -----------------------------------------------------


def launches(kernel, *args, **kwargs):
    return [(s.function, s.grid, s.block) for s in kernel.plan_launch(*args, **kwargs).steps]


def test_knobs_change_the_launch_and_nothing_else(on_cpu_device):
    k = kspec.ElementwiseKernel("T x, T y", "T z", "z = (x - y) * (x - y)", "sqd_knobs")
    x = ArraySpec((64, 48), "float32", device="cpu")
    xt = ArraySpec((64, 48), "float32", device="cpu", strides=(4, 256))
    assert k.plan_label(x, xt) == "tiled 4B 64x64" and k.plan_label(x, x) == "contig 4B 4096"
    rules = launches(k, x, xt)
    assert rules == launches(k.with_knobs({}), x, xt)
    untiled = launches(k.with_knobs({"tile": 0}), x, xt)
    assert untiled[0][0] != rules[0][0]  # another entry point
    assert launches(k.with_knobs({"tile": 0, "block": 128}), x, xt)[0][2] == 128
    assert launches(k.with_knobs({"tile": 32, "block": 128}), x, xt)[0][2] == 256  # tiles keep their block
    big = ArraySpec((1 << 24,), "float32", device="cpu")
    grids = {p: launches(k.with_knobs({"per_sm": p}), big, big)[0][1] for p in (4, 16)}
    assert grids[4] < grids[16]
    # block_size= given by the call wins over a knob
    a = np.random.rand(64, 48).astype(np.float32)
    b = np.random.rand(48, 64).astype(np.float32).T
    for knobs in ({}, {"tile": 0, "block": 512}, {"tile": 16}, {"tile": 64}):
        np.testing.assert_array_equal(np.asarray(k.with_knobs(knobs)(a, b)), (a - b) ** 2)
    r = kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "ssq_knobs")
    m = ArraySpec((64, 1000), "float32", device="cpu")
    assert r.plan_label(m, axis=0) == "cols 4B 1024/64" and r.plan_label(m, axis=1) == "rows 4B 64/1024"
    assert launches(r.with_knobs({"cols": 0}), m, axis=0) != launches(r, m, axis=0)
    h = np.random.rand(64, 1000).astype(np.float32)
    for knobs in ({}, {"cols": 0}, {"cols": 0, "block": 512, "per_sm": 8}):
        np.testing.assert_allclose(np.asarray(r.with_knobs(knobs)(h, axis=0)), (h * h).sum(0), rtol=1e-5)


def test_bad_knobs_are_errors_naming_them():
    k = kspec.ElementwiseKernel("T x", "T z", "z = x", "copy_knobs")
    with pytest.raises(ValueError, match="tile must be one of"):
        k.with_knobs({"tile": 12})
    with pytest.raises(ValueError, match="'slab' is not a elementwise knob"):
        k.with_knobs({"slab": 1})
    with pytest.raises(TypeError, match="knobs: expected a mapping"):
        k.with_knobs([("tile", 0)])


# -- the record in a call ------------------------------------------------------------------------------------


def test_a_loaded_kernel_takes_its_records_knobs(spec_file, on_cpu_device, capfd, monkeypatch):
    monkeypatch.setenv("KSPEC_LOG", "tune")
    write_record(spec_file, "host", {
        "sqd": entry_of(spec_file, "sqd", {"tiled 4B 64x64": {"tile": 0, "block": 128}}),
        "ssq": entry_of(spec_file, "ssq", {"cols 4B 1024/64": {"cols": 0}}),
    })  # fmt: skip
    lib = kspec.load(spec_file)
    a = np.random.rand(60, 40).astype(np.float32)
    b = np.random.rand(40, 60).astype(np.float32).T
    np.testing.assert_array_equal(np.asarray(lib.sqd(a, b)), (a - b) ** 2)
    assert lib.sqd.choices() == [("host", "tiled 4B 64x64", {"tile": 0, "block": 128}, "record")]
    lib.sqd(a, a)  # a layout the record lacks: the rules
    assert lib.sqd.choices()[-1] == ("host", "contig 4B 4096", None, "rules")
    h = np.random.rand(64, 1000).astype(np.float32)
    np.testing.assert_allclose(np.asarray(lib.ssq(h, axis=0)), (h * h).sum(0), rtol=1e-5)
    assert lib.ssq.choices() == [("host", "cols 4B 1024/64", {"cols": 0}, "record")]
    assert "kspec tune: sqd [tiled 4B 64x64] host: block128_tile0 (record)" in capfd.readouterr().err


def test_a_record_for_other_code_is_ignored(spec_file, on_cpu_device):
    entry = entry_of(spec_file, "sqd", {"tiled 4B 64x64": {"tile": 0}})
    write_record(spec_file, "host", {"sqd": {**entry, "digest": "0" * 16}})
    lib = kspec.load(spec_file)
    a = np.random.rand(60, 40).astype(np.float32)
    lib.sqd(a, np.random.rand(40, 60).astype(np.float32).T)
    assert lib.sqd.choices() == []  # nothing looked up: the entry is not this code's


def test_a_constructor_kernel_reads_the_records_kspec_tuning_names(spec_file, on_cpu_device, monkeypatch):
    """Code written for CuPy, unchanged: a constructor's kernel has no spec file, and takes an entry of its name
    and code from the records ``KSPEC_TUNING`` names (the spec file's instantiations and cases are not code)."""
    write_record(spec_file, "host", {"sqd": entry_of(spec_file, "sqd", {"contig 4B 4096": {"block": 128}})})
    a = np.random.rand(4096).astype(np.float32)
    monkeypatch.setenv("KSPEC_TUNING", str(record_path(spec_file)))
    k = kspec.ElementwiseKernel("T x, T y", "T z", "z = (x - y) * (x - y)", "sqd")
    np.testing.assert_array_equal(np.asarray(k(a, a)), np.zeros_like(a))
    assert k.choices() == [("host", "contig 4B 4096", {"block": 128}, "record")]
    other = kspec.ElementwiseKernel("T x, T y", "T z", "z = (x - y) * (x + y)", "sqd")  # same name, other code
    other(a, a)
    assert other.choices() == []
    monkeypatch.setenv("KSPEC_TUNING", str(spec_file.with_name("missing.tune.json")))
    with pytest.raises(ValueError, match="KSPEC_TUNING: .*missing.tune.json.* is not a file"):
        kspec.ElementwiseKernel("T x, T y", "T z", "z = (x - y) * (x - y)", "sqd_elsewhere")(a, a)


def test_without_kspec_tuning_a_constructor_kernel_runs_the_rules(spec_file, on_cpu_device, monkeypatch):
    monkeypatch.delenv("KSPEC_TUNING", raising=False)
    write_record(spec_file, "host", {"sqd": entry_of(spec_file, "sqd", {"contig 4B 4096": {"block": 128}})})
    a = np.random.rand(4096).astype(np.float32)
    k = kspec.ElementwiseKernel("T x, T y", "T z", "z = (x - y) * (x - y)", "sqd")
    k(a, a)
    assert k.choices() == []


# -- build output, generated module, show --------------------------------------------------------------------


def test_the_build_carries_planner_entries_and_its_kernels_read_them(spec_file, tmp_path):
    from kspec.build import plan_build, precompile, write_output
    from kspec.compiler import BinaryCache
    from kspec.spec import load_library

    entry = entry_of(spec_file, "sqd", {"tiled 4B 2048x2048": {"tile": 16}})
    write_record(spec_file, "sm_90", {"sqd": entry, "ssq": {**entry_of(spec_file, "ssq", {}), "digest": "stale"}})
    plan = plan_build(load_library([spec_file]).values(), ["sm_90", "sm_80"])
    assert len(plan.units) == 4  # one module per kernel and arch: knobs add no binary
    results = precompile(plan.units, cache=BinaryCache(tmp_path / "cache"))
    assert all(r.error is None for r in results), [str(r.error) for r in results if r.error]
    out = tmp_path / "out"
    write_output(results, out)
    carried = json.loads((out / BUILD_RECORD).read_text())
    assert list(carried["archs"]) == ["sm_90"] and list(carried["archs"]["sm_90"]["kernels"]) == ["sqd"]
    assert carried["archs"]["sm_90"]["kernels"]["sqd"] == entry
    # served from the build: its record; the record beside the spec file no longer counts
    record_path(spec_file).unlink()
    served = kspec.load(spec_file, binaries=out).sqd
    assert served._plan_records()._read() == {"sm_90": entry}


def test_a_generated_module_keeps_the_cases_and_serves_without_the_models(spec_file, tmp_path):
    from kspec.cli import main

    assert main(["generate", str(spec_file), "-o", str(tmp_path / "gen")]) == 0
    code = ("import sys, numpy as np, kspec\n"
            f"sys.path.insert(0, {str(tmp_path / 'gen')!r})\n"
            "import planned\n"
            "with kspec.use_device('cpu'):\n"
            "    a = np.ones(8, np.float32)\n"
            "    assert (np.asarray(planned.sqd(a, a)) == 0).all()\n"
            "assert 'pydantic' not in sys.modules\n"
            "print(planned._KERNELS.spec('sqd').tune['cases'][0]['args']['y'])\n")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if "no host C++ compiler" in done.stderr:
        pytest.skip("no host C++ compiler")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "float32[48, 64].T"


def test_show_prints_a_planner_record(spec_file, capsys):
    pytest.importorskip("tomli_w")
    from kspec.cli import main

    entry = entry_of(spec_file, "sqd", {"tiled 4B 2048x2048": {"tile": 16}})
    entry["buckets"]["tiled 4B 2048x2048"]["default"] = {"config": {}, "ms": 2.0}
    write_record(spec_file, "sm_90", {"sqd": entry})
    assert main(["show", "sqd", "--specs", str(spec_file)]) == 0
    out = capsys.readouterr().out
    assert "tiled 4B 2048x2048: winner tile16 1.0000 ms; default rules 2.0000 ms" in out
