"""`kspec validate` and `kspec show`, called as the CLI (in process and as `python -m kspec`)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from kspec.cli import main
from kspec.spec import load_library, parse_spec

REPO = Path(__file__).resolve().parents[2]


def test_validate_repository_specs(capsys):
    assert main(["validate", str(REPO / "specs")]) == 0
    out = capsys.readouterr().out
    assert "elementwise.toml: 10 kernels, ok" in out
    assert out.strip().endswith("0 errors")


def test_validate_broken_copy_names_file_kernel_and_field(tmp_path, capsys):
    broken = tmp_path / "specs"
    shutil.copytree(REPO / "specs", broken)
    path = broken / "elementwise.toml"
    path.write_text(path.read_text().replace('in_params = "T a, T x, T y"', 'in_params = "T a, T x, T i"'))
    assert main(["validate", str(broken)]) == 1
    out = capsys.readouterr().out
    assert f"{path}: kernel 'saxpy': field 'in_params': parameter name 'i' is reserved" in out
    assert "1 errors" in out or "1 error" in out


def test_validate_reports_duplicates_across_files(tmp_path, capsys):
    shutil.copy(REPO / "specs" / "raw.toml", tmp_path / "a.toml")
    shutil.copy(REPO / "specs" / "raw.toml", tmp_path / "b.toml")
    assert main(["validate", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "'my_add' is defined twice" in out and "a.toml" in out and "b.toml" in out


def test_validate_nothing_to_check(tmp_path, capsys):
    assert main(["validate", str(tmp_path)]) == 1
    assert "no spec files" in capsys.readouterr().err


def test_show_prints_toml_that_loads_back(capsys):
    assert main(["show", "argmax", "--specs", str(REPO / "specs")]) == 0
    text = capsys.readouterr().out
    assert parse_spec(tomllib.loads(text)["kernel"][0]) == load_library(REPO / "specs")["argmax"]


def test_show_unknown_name_lists_kernels(capsys):
    assert main(["show", "nope", "--specs", str(REPO / "specs")]) == 1
    err = capsys.readouterr().err
    assert "no kernel named 'nope'" in err and "squared_diff" in err


def test_python_dash_m(tmp_path):
    result = subprocess.run([sys.executable, "-m", "kspec", "validate"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "4 files, 21 kernels, 0 errors" in result.stdout
