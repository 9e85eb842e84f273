"""`kspec build`'s output: a summary line by default, the table with --verbose, JSON, --quiet; NVRTC missing."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from kspec.build import MANIFEST_NAME
from kspec.cli import main
from kspec.compiler import _nvrtc

REPO = Path(__file__).resolve().parents[2]
RAW = REPO / "specs" / "raw.toml"  # five raw kernels: quick to compile


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KSPEC_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_default_is_one_summary_line(cache, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["build", str(RAW), "--arch", "sm_80", "-o", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("5/5 modules built for sm_80 in ") and lines[0].endswith(f"wrote {out / MANIFEST_NAME}")
    assert "┃" not in lines[0]
    assert re.search(r", 0 failed, [\d.]+ (KB|MB) \([\d.]+ (KB|bytes) a module\); wrote ", lines[0]), lines[0]


def test_a_log_gets_progress_lines(cache, tmp_path, monkeypatch, capsys):
    """stderr a file or a pipe (CI, nohup): no bar, but a line every few seconds (here: after every module)."""
    from kspec.build import _progress

    monkeypatch.setattr(_progress, "LINE_EVERY_S", 0.0)
    assert main(["build", str(RAW), "--arch", "sm_80", "-o", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.startswith("kspec: compiling ")]
    assert [line.split(" modules")[0] for line in lines] == [f"kspec: compiling {k}/5" for k in range(1, 5)], captured.err
    assert len(captured.out.splitlines()) == 1  # the summary line alone on stdout


def test_verbose_prints_the_table_then_the_summary(cache, capsys):
    assert main(["build", str(RAW), "--arch", "sm_80", "--verbose"]) == 0
    text = capsys.readouterr().out
    assert "compile ms" in text and "vector_add" in text and "sum_and_multiply" in text
    assert text.splitlines()[-1].startswith("5/5 modules built")


def test_verbose_table_fits_the_terminal_width(cache, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "60")
    assert main(["build", str(RAW), "--arch", "sm_80", "-v"]) == 0
    table = [line for line in capsys.readouterr().out.splitlines() if line[:1] in "┏┃┡│└"]
    assert table and max(len(line) for line in table) <= 60
    assert not any("…" in line for line in table[3:])  # long names are folded onto two lines, never cut


def test_verbose_table_of_a_log_is_not_folded_to_80_columns(cache, monkeypatch, capsys, tmp_path):
    # a kernel name wider than 80 columns stays on one line when stdout is a file (no terminal, no COLUMNS)
    monkeypatch.delenv("COLUMNS", raising=False)
    name = "k" + "x" * 90
    spec = tmp_path / "k.toml"
    spec.write_text(f'schema = 1\n[[kernel]]\nkind = "elementwise"\nname = "{name}"\nin_params = "float32 x"\n'
                    'out_params = "float32 y"\noperation = "y = x"\n')  # fmt: skip
    assert main(["build", str(spec), "--arch", "sm_80", "-v"]) == 0
    assert any(name in line for line in capsys.readouterr().out.splitlines())


def test_json_is_one_object_describing_every_module(cache, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["build", str(RAW), "--arch", "sm_80,sm_90", "-o", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["kspec_build_report"] == 1 and report["ok"] is True
    assert report["archs"] == ["sm_80", "sm_90"]
    assert report["modules_total"] == report["modules_built"] == 10 and report["modules_failed"] == 0
    assert report["manifest"] == str(out / MANIFEST_NAME)
    module = next(m for m in report["modules"] if m["kernel"] == "vector_add" and m["arch"] == "sm_90")
    assert module["ok"] and module["registers"] > 0 and module["error"] is None
    assert set(module) >= {"instantiation", "scalars", "cache_hit", "compile_ms", "key"}


def test_json_reports_failures_and_skipped_kernels(cache, tmp_path, capsys):
    spec = tmp_path / "k.toml"
    spec.write_text(
        'schema = 1\n'
        '[[kernel]]\nkind = "elementwise"\nname = "broken"\nin_params = "float32 x"\nout_params = "float32 y"\n'
        'operation = "y = undefined_function(x)"\n'
        '[[kernel]]\nkind = "elementwise"\nname = "generic"\nin_params = "T x"\nout_params = "T y"\noperation = "y = x"\n'
    )
    assert main(["build", str(spec), "--arch", "sm_80", "--json"]) == 1
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["ok"] is False and report["modules_failed"] == 1
    assert "undefined_function" in report["modules"][0]["error"]
    assert report["skipped"] == [{"kernel": "generic", "reason": "no instantiations declared: compiled on first call"}]
    assert "FAILED broken" in captured.err  # people reading the log see it too


def test_quiet_prints_nothing_on_success_and_errors_on_failure(cache, tmp_path, capsys):
    assert main(["build", str(RAW), "--arch", "sm_80", "-q", "-o", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
    assert (tmp_path / "out" / MANIFEST_NAME).is_file()
    spec = tmp_path / "k.toml"
    spec.write_text('schema = 1\n[[kernel]]\nkind = "elementwise"\nname = "broken"\nin_params = "float32 x"\n'
                    'out_params = "float32 y"\noperation = "y = nope(x)"\n')  # fmt: skip
    assert main(["build", str(spec), "--arch", "sm_80", "--quiet"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and "FAILED broken" in captured.err


def test_output_modes_are_exclusive(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["build", str(RAW), "--json", "--verbose"])
    assert exc.value.code == 2 and "not allowed with" in capsys.readouterr().err


@pytest.fixture()
def no_nvrtc(monkeypatch):
    """cuda.bindings.nvrtc cannot be imported, as without the nvrtc extra."""
    import cuda.bindings

    monkeypatch.setattr(_nvrtc, "_module", None)
    monkeypatch.setattr(_nvrtc, "_version", None, raising=False)
    monkeypatch.delattr(cuda.bindings, "nvrtc", raising=False)
    monkeypatch.setitem(sys.modules, "cuda.bindings.nvrtc", None)


@pytest.mark.parametrize("arch", [["--arch", "sm_80"], []], ids=["explicit-arch", "default-archs"])
def test_nvrtc_missing_is_said_once_and_nothing_is_written(cache, no_nvrtc, tmp_path, capsys, arch):
    out = tmp_path / "out"
    assert main(["build", str(REPO / "specs"), *arch, "-o", str(out)]) == 1
    captured = capsys.readouterr()
    assert captured.err.count("pip install kspec[nvrtc]") == 1, captured.err
    assert "FAILED" not in captured.err and captured.out == ""
    assert not out.exists()  # no empty manifest, not even the directory
