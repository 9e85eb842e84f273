"""Spec files on disk: TOML and JSON, schema, unknown keys, directories, one namespace."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

import kspec
from kspec.spec import RawSpec, load_file, load_library, read_file

KERNEL = textwrap.dedent(
    """
    [[kernel]]
    kind = "elementwise"
    name = "{name}"
    in_params = "T x"
    out_params = "T y"
    operation = '''
    T t = x;
    y = t * t;
    '''
    """
)


def write(path: Path, *names: str, schema: str = "schema = 1\n") -> Path:
    path.write_text(schema + "".join(KERNEL.format(name=n) for n in names))
    return path


def test_toml_with_several_kernels(tmp_path):
    specs = load_file(write(tmp_path / "k.toml", "a", "b", "c"))
    assert [s.name for s in specs] == ["a", "b", "c"]
    assert specs[0].operation == "T t = x;\ny = t * t;\n"
    assert specs[0].origin == tmp_path / "k.toml"


def test_json_spec_file(tmp_path):
    path = tmp_path / "k.json"
    path.write_text(json.dumps({"schema": 1, "kernel": [
        {"kind": "elementwise", "name": "j", "in_params": "float32 x", "out_params": "float32 y", "operation": "y = x"}]}))
    (spec,) = load_file(path)
    assert spec.name == "j"


def test_missing_schema(tmp_path):
    with pytest.raises(kspec.SpecFileError, match=r"k.toml: field 'schema': missing 'schema = 1'"):
        load_file(write(tmp_path / "k.toml", "a", schema=""))


def test_unsupported_schema(tmp_path):
    with pytest.raises(kspec.SpecFileError, match="schema 2 is not supported"):
        load_file(write(tmp_path / "k.toml", "a", schema="schema = 2\n"))


def test_unknown_top_level_key(tmp_path):
    with pytest.raises(kspec.SpecFileError, match="unknown key 'kernels'"):
        load_file(write(tmp_path / "k.toml", schema="schema = 1\nkernels = []\n"))


def test_unknown_kernel_key_names_file_kernel_and_key(tmp_path):
    path = tmp_path / "k.toml"
    path.write_text('schema = 1\n[[kernel]]\nkind = "elementwise"\nname = "q"\nin_params = "T x"\n'
                    'out_params = "T y"\noperation = "y = x"\nblock_size = 128\n')
    with pytest.raises(kspec.SpecError) as info:
        load_file(path)
    assert str(info.value) == f"{path}: kernel 'q': field 'block_size': unknown key 'block_size'"


def test_invalid_toml(tmp_path):
    path = tmp_path / "k.toml"
    path.write_text("schema = 1\n[[kernel]\n")
    with pytest.raises(kspec.SpecFileError, match="invalid TOML"):
        load_file(path)


def test_invalid_json(tmp_path):
    path = tmp_path / "k.json"
    path.write_text("{")
    with pytest.raises(kspec.SpecFileError, match="invalid JSON"):
        load_file(path)


def test_kernel_not_a_table(tmp_path):
    path = tmp_path / "k.json"
    path.write_text('{"schema": 1, "kernel": [3]}')
    with pytest.raises(kspec.SpecFileError, match=r"kernel\[0\] must be a table"):
        load_file(path)


def test_every_error_of_a_file_is_reported(tmp_path):
    path = tmp_path / "k.toml"
    path.write_text(write(tmp_path / "k.toml", "good", "class", "_bad").read_text())
    report = read_file(path)
    assert [s.name for s in report.specs] == ["good", "_bad"]  # '_bad' is a legal kernel name, 'class' is not
    assert len(report.errors) == 1 and report.errors[0].kernel == "class"


def test_duplicate_in_one_file(tmp_path):
    with pytest.raises(kspec.DuplicateNameError, match=r"'a' is defined twice in this file \(kernel\[0\] and kernel\[1\]\)"):
        load_file(write(tmp_path / "k.toml", "a", "a"))


def test_directory_is_one_namespace_and_duplicates_name_both_files(tmp_path):
    write(tmp_path / "one.toml", "a", "b")
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub" / "two.toml", "b")
    with pytest.raises(kspec.DuplicateNameError) as info:
        load_library(tmp_path)
    msg = str(info.value)
    assert str(tmp_path / "one.toml") in msg and str(tmp_path / "sub" / "two.toml") in msg and "'b'" in msg


def test_directory_loads_every_spec_file(tmp_path):
    write(tmp_path / "one.toml", "a")
    (tmp_path / "two.json").write_text(json.dumps({"schema": 1, "kernel": []}))
    (tmp_path / "notes.md").write_text("not a spec")
    write(tmp_path / "three.toml", "c")
    assert sorted(load_library(tmp_path)) == ["a", "c"]


def test_missing_path(tmp_path):
    with pytest.raises(kspec.SpecFileError, match="no such spec file"):
        load_library(tmp_path / "nope")


def test_library_lookup_error_lists_names(tmp_path):
    lib = load_library(write(tmp_path / "k.toml", "a", "b"))
    with pytest.raises(KeyError, match="the library has: a, b"):
        lib["c"]


def test_raw_path_is_relative_to_the_spec_file(tmp_path):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "k.cu").write_text('extern "C" __global__ void f() {}\n')
    path = tmp_path / "raw.toml"
    path.write_text('schema = 1\n[[kernel]]\nkind = "raw"\nname = "m"\npath = "kernels/k.cu"\nkernels = ["f"]\n')
    (spec,) = load_file(path)
    assert isinstance(spec, RawSpec)
    assert spec.resolved_path() == tmp_path / "kernels" / "k.cu"
    assert "void f()" in spec.read_source()


def test_raw_path_missing_file_names_it(tmp_path):
    # found at validate (issue 20), no longer only when the source is read
    path = tmp_path / "raw.toml"
    path.write_text('schema = 1\n[[kernel]]\nkind = "raw"\nname = "m"\npath = "gone.cu"\nkernels = ["f"]\n')
    with pytest.raises(kspec.SpecError, match=r"kernel 'm': field 'path': path 'gone.cu' does not exist .*gone.cu"):
        load_file(path)
