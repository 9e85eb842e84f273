"""The counting behind the client-suite figures: benchmarks/clients/client_compare.py over several runs of one selection,
benchmarks/helpers/_corpus_recorder.py's compile statistics, and the cupyx table's side-by-side columns
(benchmarks/clients/paired_modes.py)."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_bench_{Path(name).name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _log(path: Path, outcomes: dict[str, str], errors: dict[str, str] | None = None) -> None:
    lines = [f"[gw0] [ 10%] {outcome} {test} " for test, outcome in outcomes.items()]
    lines += [f"FAILED {test} - {message}" for test, message in (errors or {}).items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def test_compare_counts_each_mode_over_the_union_of_its_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    compare = _load("clients/client_compare")
    one, two = tmp_path / "one", tmp_path / "two"
    # CuPy's first run reached a and b, its second c; kspec reached a, b, c in its first run and failed c.
    _log(one / "cupy-signal-s1.log", {"t::a": "PASSED", "t::b": "PASSED"})
    _log(two / "cupy-signal-s1.log", {"t::c": "PASSED", "t::d": "PASSED"})
    _log(one / "kspec-signal-s1.log", {"t::a": "PASSED", "t::b": "PASSED", "t::c": "FAILED"}, {"t::c": "boom 12"})
    _log(two / "kspec-signal-s1.log", {"t::a": "PASSED"})
    assert compare.main([str(one), str(two)]) == 0
    out = capsys.readouterr().out
    assert "| signal | s1 | 2 / 2 | 3 | 3 | 2 | 66.7% |" in out
    assert "boom N" in out and "t::c" in out


def test_compare_reports_an_outcome_that_differs_between_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    compare = _load("clients/client_compare")
    one, two = tmp_path / "one", tmp_path / "two"
    _log(one / "cupy-ndimage-s2.log", {"t::a": "PASSED"})
    _log(two / "cupy-ndimage-s2.log", {"t::a": "PASSED"})
    _log(one / "kspec-ndimage-s2.log", {"t::a": "PASSED"})
    _log(two / "kspec-ndimage-s2.log", {"t::a": "FAILED"})
    compare.main([str(one), str(two)])
    out = capsys.readouterr().out
    assert "kspec t::a" in out  # listed, and counted as failing
    assert "| ndimage | s2 | 2 / 2 | 1 | 1 | 0 | 0.0% |" in out


def test_a_test_id_with_spaces_is_one_test(tmp_path: Path) -> None:
    # parametrized ids hold spaces; cut at the first one, two tests merged into one (a cupyx shard: 3,749 of 3,758)
    compare = _load("clients/client_compare")
    a, b = "t::m[_param_8_{axis=0, dtype=float32}]", "t::m[_param_8_{axis=0, dtype=float64}]"
    _log(tmp_path / "kspec-sparse-s1.log", {a: "PASSED", b: "FAILED"}, {b: "AssertionError: dtypes - differ"})
    result, errors = compare.outcomes(tmp_path / "kspec-sparse-s1.log")
    assert result == {a: "PASSED", b: "FAILED"} and errors == {b: "AssertionError: dtypes - differ"}


def test_compile_stats_are_summed_per_mode(tmp_path: Path) -> None:
    recorder = _load("helpers/_corpus_recorder")
    for pid, (mode, compiles, seconds) in enumerate([("cupy", 3, 1.5), ("cupy", 2, 0.5), ("kspec", 4, 0.4)]):
        (tmp_path / f"compile-{mode}-{pid}.json").write_text(json.dumps({"mode": mode, "compiles": compiles, "seconds": seconds}))
    (tmp_path / "compile-cupy-9.json.tmp").write_text("{not json")  # a write cut short is not read
    assert recorder.summarize(str(tmp_path)) == {"cupy": (2, 5, 2.0), "kspec": (1, 4, 0.4)}


def test_compile_stats_file_is_replaced_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = _load("helpers/_corpus_recorder")
    monkeypatch.setattr(recorder, "_STATS", str(tmp_path))
    monkeypatch.setattr(recorder, "_KSPEC", False)
    monkeypatch.setattr(recorder, "_cupy_compiles", [7, 2.5])
    recorder.pytest_runtest_logfinish("t::a", ("t", 1, "a"))
    monkeypatch.setattr(recorder, "_cupy_compiles", [8, 3.0])
    recorder.pytest_runtest_logfinish("t::b", ("t", 2, "b"))
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == [f"compile-cupy-{os.getpid()}.json"]
    assert recorder.summarize(str(tmp_path)) == {"cupy": (1, 8, 3.0)}


def test_shard_table_counts_what_the_served_run_passed_of_the_captures_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = _load("clients/shard_table")
    for k, served in ((0, {"t::a": "PASSED", "t::b": "FAILED", "t::c": "PASSED"}), (1, {"t::d": "PASSED"})):
        shard = tmp_path / f"client-{k}-of-3"
        _log(shard / "capture-client-s1-shard0of3.log", {"t::a": "PASSED", "t::b": "PASSED", "t::c": "FAILED"} if k == 0
             else {"t::d": "PASSED"})
        _log(shard / "served-client-s1-shard0of3.log", served)
        (shard / "served-log").mkdir()
        (shard / "served-log" / "w.jsonl").write_text(
            '{"source": "binary"}\n{"source": "binary"}\n{"source": "compiled"}\n{"forbidden": "t::b", "message": "no"}\n')
        (shard / "build.json").write_text(json.dumps({"modules_built": 10, "cache_hits": 9}))
        (shard / "times.json").write_text(json.dumps({"capture_s": 5, "build_s": 1, "served_s": 4, "build_bytes": 2_500_000,
                                                      "kernels": 7}))
    table.main(str(tmp_path))
    out = capsys.readouterr().out
    # shard 0: 3 tests, 2 captured passes, the served run passed 2 (one of them a test the capture failed)
    assert "| client | 0/3 | 3 | 2 | 2 | 1 | 2 | 1 | 1 | 7 | 10 | 9 | 1 | 2.5 | 5 | 4 |" in out
    assert "| **client** | 2 of 3 | 4 | 3 | 3 | 2 | 4 | 2 | 2 | 14 | 20 | 18 | 2 | 5 | 10 | 8 |" in out


def test_shard_table_says_what_shards_of_several_sizes_cover() -> None:
    coverage = _load("clients/shard_table").coverage
    assert coverage([(0, 5), (1, 5), (2, 10), (7, 10)]) == "3 of 5"  # 2/5 run as 2/10 and 7/10
    assert coverage([(0, 5), (1, 5), (2, 5), (3, 5), (4, 10), (9, 10)]) == "whole"
    assert coverage([(2, 5), (2, 10)]) == "1 of 5 (overlapping)"
    assert coverage([(1, 3)]) == "1 of 3"


def test_paired_columns_take_each_process_ratio_then_their_median() -> None:
    """A process whose host ran slow for both modes moves the pooled medians, not the ratio: the ratio is the median of
    each process's own kspec / CuPy, printed with their range."""
    paired = _load("clients/paired_modes")
    def proc(cupy: list[float], kspec: list[float]) -> dict[str, dict]:
        return {"cupy": {"f": {"device": cupy, "host": cupy}}, "kspec": {"f": {"device": kspec, "host": kspec}}}
    both = [proc([1.0, 1.0, 1.0], [0.9, 0.9, 0.9]), proc([2.0, 2.0, 2.0], [1.9, 1.9, 1.9]),
            proc([1.0, 1.0, 1.0], [0.8, 0.8, 0.8])]
    cells, ratio = paired.warm_columns(both, "f")
    assert ratio == pytest.approx(0.9)  # processes' ratios 0.9, 0.95, 0.8: their median
    assert cells.split(" | ")[:3] == ["1000.000", "900.000", "0.90 (0.80-0.95)"]  # pooled medians, in ms
    both[1]["kspec"]["f"] = {"error": "ValueError: A must be CSR"}
    cells, ratio = paired.warm_columns(both, "f")
    assert ratio != ratio and cells.startswith("ValueError: A must be CSR")  # NaN: left out of the mean
    assert paired.warm_columns(both, "g")[0].startswith("missing")
