"""Issue 20, strict spec types and validate-time checks: spec values are never converted, what used to
fail only at build fails at validate, and the CLI and `kspec.load` agree on what is an error."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import kspec
from kspec.cli import main
from kspec.spec import load_file, load_library, parse_spec
from kspec.spec._names import is_macro_name

REPO = Path(__file__).resolve().parents[2]
RAW = REPO / "specs" / "raw.toml"

EW = dict(kind="elementwise", name="k", in_params="float32 x", out_params="float32 y", operation="y = x")
RED = dict(kind="reduction", name="r", in_params="float32 x", out_params="float32 y", map_expr="x",
           reduce_expr="a + b", post_map_expr="y = a", identity="0")  # fmt: skip
RAWK = dict(kind="raw", name="m", source='extern "C" __global__ void f() {}', kernels=["f"])


def toml_file(tmp_path: Path, body: str, schema: str = "1") -> Path:
    path = tmp_path / "k.toml"
    path.write_text(f"schema = {schema}\n[[kernel]]\n{body}\n")
    return path


# --- strict types in spec files -------------------------------------------------------------------------------

EW_TOML = 'kind = "elementwise"\nname = "k"\nin_params = "float32 x"\nout_params = "float32 y"\noperation = "y = x"\n'
RAW_TOML = 'kind = "raw"\nname = "m"\nsource = "extern \\"C\\" __global__ void f() {}"\nkernels = ["f"]\n'


@pytest.mark.parametrize(
    "body, field",
    [
        (EW_TOML + 'reduce_dims = "yes"', "reduce_dims"),
        (EW_TOML + 'no_return = "true"', "no_return"),
        (EW_TOML + "no_return = 1", "no_return"),
        (EW_TOML + "return_tuple = 1.0", "return_tuple"),
        (EW_TOML + 'options = "-O3"', "options"),
        (EW_TOML + "doc = 3", "doc"),
        (RAW_TOML + 'cooperative = "yes"', "cooperative"),
        (RAW_TOML + 'launch = {block = "128"}', "launch.block"),
        (RAW_TOML + "launch = {block = 128.0}", "launch.block"),
        (RAW_TOML + "launch = {block = true}", "launch.block"),
        (RAW_TOML + "launch = {block = [32, 1.0]}", "launch.block"),
        (RAW_TOML + 'launch = {shared_mem = "1024"}', "launch.shared_mem"),
        (RAW_TOML + "launch = {shared_mem = 4611686018427387904}", "launch.shared_mem"),
        (RAW_TOML + "attributes = {max_dynamic_shared_size_bytes = 1099511627776}", "attributes.max_dynamic_shared_size_bytes"),
        (RAW_TOML + "attributes = {preferred_shared_memory_carveout = 50.0}", "attributes.preferred_shared_memory_carveout"),
    ],
)
def test_spec_file_values_are_not_converted(tmp_path, body, field):
    with pytest.raises(kspec.SpecError) as info:
        load_file(toml_file(tmp_path, body))
    assert info.value.field == field and f"field '{field}'" in str(info.value)


@pytest.mark.parametrize("schema", ["1.0", "true", '"1"', "2"])
def test_schema_must_be_the_int_1(tmp_path, schema):
    with pytest.raises(kspec.SpecFileError, match="schema"):
        load_file(toml_file(tmp_path, EW_TOML, schema=schema))


def test_ints_and_bools_that_are_what_they_say_still_load(tmp_path):
    (spec,) = load_file(toml_file(tmp_path, RAW_TOML + "cooperative = true\nlaunch = {block = [32, 4], shared_mem = 1024}"))
    assert spec.cooperative is True and spec.launch.block == (32, 4) and spec.launch.shared_mem == 1024


# --- constructors: what CuPy code passes still works, strings do not ---------------------------------------


@pytest.mark.parametrize("value", [True, False, 0, 1, np.bool_(True)])
def test_flags_take_bools_and_0_1(value):
    k = kspec.ReductionKernel("float32 x", "float32 y", "x", "a + b", "y = a", "0", reduce_dims=value)
    assert k.reduce_dims is bool(value)
    assert kspec.RawKernel(RAWK["source"], "f", enable_cooperative_groups=value)._module._cooperative is bool(value)


@pytest.mark.parametrize("value", ["no", "false", "yes", None, 2, 1.0])
def test_flags_refuse_anything_else_naming_the_parameter(value):
    with pytest.raises(TypeError, match="reduce_dims"):
        kspec.ReductionKernel("float32 x", "float32 y", "x", "a + b", "y = a", "0", reduce_dims=value)
    with pytest.raises(TypeError, match="enable_cooperative_groups"):
        kspec.RawKernel(RAWK["source"], "f", enable_cooperative_groups=value)
    with pytest.raises(TypeError, match="translate_cucomplex"):
        kspec.RawModule(code=RAWK["source"], translate_cucomplex=value)


def test_options_none_is_a_clear_type_error():
    with pytest.raises(kspec.KspecTypeError, match="options: expected a tuple of str, got NoneType"):
        kspec.ReductionKernel("float32 x", "float32 y", "x", "a + b", "y = a", "0", options=None)
    with pytest.raises(kspec.KspecTypeError, match="options"):
        kspec.RawKernel(RAWK["source"], "f", options=None)


@pytest.mark.parametrize("param", ["reduce_dims", "no_return", "return_tuple"])
def test_elementwise_kernel_flags_refuse_strings(param):
    with pytest.raises(TypeError, match=param):
        kspec.ElementwiseKernel("float32 x", "float32 y", "y = x", **{param: "false"})


def test_elementwise_kernel_options_none():
    with pytest.raises(kspec.KspecTypeError, match="options"):
        kspec.ElementwiseKernel("float32 x", "float32 y", "y = x", options=None)


def test_spec_constructors_are_strict():
    with pytest.raises(kspec.SpecError, match="no_return"):
        kspec.spec.ElementwiseSpec(**{**EW, "no_return": 1})
    with pytest.raises(kspec.SpecError, match="options"):
        kspec.spec.ElementwiseSpec(**{**EW, "options": None})


# --- found at validate, not at build ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data, error, phrase",
    [
        ({**EW, "in_params": "float32 NULL"}, kspec.ReservedNameError, "macro"),
        ({**EW, "in_params": "float32 INFINITY"}, kspec.ReservedNameError, "macro"),
        ({**EW, "in_params": "float32 M_PI"}, kspec.ReservedNameError, "macro"),  # CuPy's implicit environment
        ({**EW, "out_params": "float32 INT_MAX"}, kspec.ReservedNameError, "macro"),
        ({**EW, "in_params": "é x"}, kspec.UnknownDtypeError, "ASCII letter"),
        ({**RED, "in_params": "float32 a"}, kspec.ReservedNameError, "reduce_expr's operands"),
        ({**RED, "out_params": "float32 b"}, kspec.ReservedNameError, "reduce_expr's operands"),
        ({**RED, "identity": float("nan")}, kspec.SpecError, "not a finite number"),
        ({**RED, "identity": float("-inf")}, kspec.SpecError, "not a finite number"),
        ({**RED, "identity": ""}, kspec.SpecError, "identity is empty"),
        ({**RED, "identity": "  "}, kspec.SpecError, "identity is empty"),
        ({**RED, "reduce_type": "int x"}, kspec.SpecError, "neither a dtype"),
        ({**RED, "reduce_type": "float, int"}, kspec.SpecError, "neither a dtype"),
    ],
)
def test_build_time_failures_are_validate_time_errors(data, error, phrase):
    with pytest.raises(error, match=phrase):
        parse_spec(data)


@pytest.mark.parametrize("reduce_type", ["unsigned long long", "double", "thrust::pair<float, int>", "float *"])
def test_c_type_spellings_still_pass(reduce_type):
    preamble = "#include <thrust/pair.h>" if "pair" in reduce_type else ""
    assert parse_spec({**RED, "reduce_type": reduce_type, "preamble": preamble}).reduce_type == reduce_type


def test_identity_in_spec_files(tmp_path):
    body = 'kind = "reduction"\nname = "r"\nin_params = "float32 x"\nout_params = "float32 y"\nmap_expr = "x"\n' \
           'reduce_expr = "a + b"\npost_map_expr = "y = a"\nidentity = nan\n'  # fmt: skip
    with pytest.raises(kspec.SpecError, match="identity nan"):
        load_file(toml_file(tmp_path, body))


def test_fuse_still_renames_parameters_a_and_b():
    def f(a, b):
        return (a * b).sum()

    x = np.zeros(4, np.float32)
    spec = kspec.fuse(f).spec(x, x)
    assert isinstance(spec, kspec.spec.ReductionSpec)
    assert not {p.name for p in spec.params} & {"a", "b"}


def test_macro_rule_covers_every_macro_the_headers_define():
    """Compile a probe with every header a kspec kernel may include and check each macro it defines."""
    import os

    from kspec.compiler import CompileOptions, compile_source
    from kspec.compiler._includes import cuda_header_dir, kspec_include_dir

    names = set()
    for d in filter(None, [cuda_header_dir("cudart"), cuda_header_dir("cccl"), kspec_include_dir()]):
        for root, _, files in os.walk(d):
            for f in files:
                with open(os.path.join(root, f), errors="ignore") as handle:
                    names |= set(re.findall(r"(?m)^\s*#\s*define\s+([A-Za-z][A-Za-z0-9_]*)", handle.read()))
    headers = ["cuda_fp16.h", "cuda_bf16.h", "cuda/std/complex", "kspec/complex.cuh", "kspec/indexer.cuh",
               "kspec/array.cuh", "kspec/types.cuh", "cupy/carray.cuh", "cupy/atomics.cuh", "cupy/math_constants.h",
               "cupy/type_dispatcher.cuh"]  # fmt: skip
    source = "".join(f"#include <{h}>\n" for h in headers)
    source += "".join(f"#ifdef {n}\n#warning KSPECDEF {n}\n#endif\n" for n in sorted(names | {"NULL", "NAN"}))
    source += 'extern "C" __global__ void k() {}\n'
    program = compile_source(source, name="probe", options=CompileOptions(arch="sm_80"), needs=("fp16", "bf16", "complex"))
    defined = set(re.findall(r"KSPECDEF (\w+)", program.log))
    assert {"NULL", "INFINITY", "INT_MAX"} <= defined
    assert sorted(n for n in defined if not is_macro_name(n)) == []


# --- raw paths ---------------------------------------------------------------------------------------------------


def raw_path_file(tmp_path: Path, path: str) -> Path:
    spec = tmp_path / "specs" / "raw.toml"
    spec.parent.mkdir(exist_ok=True)
    spec.write_text(f'schema = 1\n[[kernel]]\nkind = "raw"\nname = "m"\npath = {json.dumps(path)}\nkernels = ["f"]\n')
    return spec


@pytest.mark.parametrize(
    "path, setup, phrase",
    [
        ("../outside.cu", "../outside.cu", "leads out of the spec file's directory"),
        ("ABS", "../outside.cu", "leads out of the spec file's directory"),
        ("link/outside.cu", "LINK", "leads out of the spec file's directory"),
        ("missing.cu", None, "does not exist"),
        ("dir.cu", "DIR", "is not a file"),
        ("k.cubin", b"garbage", "is not a CUBIN"),
        ("k.fatbin", b"\x7fELF....", "is not a fatbin"),
        ("k.ptx", b"\x00\x01\x02binary", "is binary data"),
        ("k.ptx", b"// just a comment\n", "is not PTX"),
        ("k.cu", b"\xff\xfe\xfa not utf-8 at all", "is not UTF-8"),
    ],
)
def test_raw_paths_are_confined_and_checked_at_validate(tmp_path, capsys, path, setup, phrase):
    specs = tmp_path / "specs"
    specs.mkdir()
    if setup == "../outside.cu":
        (tmp_path / "outside.cu").write_text('extern "C" __global__ void f() {}')
    elif setup == "LINK":
        (tmp_path / "outside.cu").write_text('extern "C" __global__ void f() {}')
        (specs / "link").symlink_to(tmp_path)
    elif setup == "DIR":
        (specs / "dir.cu").mkdir()
    elif isinstance(setup, bytes):
        (specs / path).write_bytes(setup)
    if path == "ABS":
        path = str(tmp_path / "outside.cu")
    spec = raw_path_file(tmp_path, path)
    with pytest.raises(kspec.SpecError, match=phrase) as info:
        load_file(spec)
    assert info.value.field == "path"
    assert main(["validate", str(spec)]) == 1
    assert main(["generate", str(spec), "-o", str(tmp_path / "gen")]) == 1  # nothing from outside is embedded
    assert not (tmp_path / "gen").exists()


@pytest.mark.parametrize("path, content", [("k.cubin", b"\x7fELF\x02\x01"), ("sub/k.fatbin", b"\x50\xed\x55\xba"),
                                           ("k.ptx", b"//\n.version 8.0\n.target sm_80\n")])  # fmt: skip
def test_raw_files_of_the_right_kind_pass(tmp_path, path, content):
    target = tmp_path / "specs" / path
    target.parent.mkdir(parents=True)
    target.write_bytes(content)
    (spec,) = load_file(raw_path_file(tmp_path, path))
    assert spec.resolved_path() == tmp_path / "specs" / path


def test_raw_module_checks_the_file_kind(tmp_path):
    garbage = tmp_path / "k.cubin"
    garbage.write_bytes(b"garbage")
    with pytest.raises(kspec.KspecValueError, match="is not a CUBIN"):
        kspec.RawModule(path=garbage)


# --- consistency between validate, build and load ------------------------------------------------------------


def test_load_of_an_empty_directory_is_an_error_as_validate_says(tmp_path, capsys):
    with pytest.raises(kspec.SpecFileError, match="no spec files"):
        kspec.load(tmp_path)
    assert main(["validate", str(tmp_path)]) == 1


def test_build_of_an_empty_directory_fails_and_keeps_the_previous_build(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KSPEC_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "out"
    assert main(["build", str(RAW), "--arch", "sm_80", "-o", str(out)]) == 0
    before = sorted(p for p in out.rglob("*"))
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["build", str(empty), "--arch", "sm_80", "-o", str(out)]) == 1
    assert "no spec files" in capsys.readouterr().err
    assert sorted(p for p in out.rglob("*")) == before


@pytest.mark.parametrize("arch", [",", " , ,", ""])
def test_arch_list_without_an_arch_is_an_error(tmp_path, capsys, arch):
    out = tmp_path / "out"
    assert main(["build", str(RAW), "--arch", arch, "-o", str(out)]) == 1
    assert "--arch" in capsys.readouterr().err
    assert not out.exists()


def test_duplicate_archs_are_built_once(tmp_path, monkeypatch):
    from kspec.build import read_manifest

    monkeypatch.setenv("KSPEC_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "out"
    assert main(["build", str(RAW), "--arch", "sm_80,sm_80, sm_80", "-o", str(out)]) == 0
    entries = read_manifest(out)["entries"]
    assert len(entries) == len({(e["kernel"], e["arch"]) for e in entries}) == len(load_file(RAW))


def test_validate_the_same_file_twice_reads_it_once(tmp_path, capsys):
    specs = tmp_path / "d"
    specs.mkdir()
    (specs / "a.toml").write_text("schema = 1\n[[kernel]]\n" + EW_TOML)
    assert main(["validate", str(specs), str(specs)]) == 0
    assert main(["validate", str(specs), str(specs / "a.toml")]) == 0
    assert "defined twice" not in capsys.readouterr().out
    assert len(load_library([specs, specs / "a.toml"])) == 1


def test_binaries_naming_a_missing_directory_or_a_file(tmp_path):
    with pytest.raises(kspec.KspecValueError, match="does not exist"):
        kspec.load(RAW, binaries=tmp_path / "nope")
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(kspec.KspecValueError, match="is not a directory"):
        kspec.load(RAW, binaries=a_file)
    with pytest.raises(kspec.KspecValueError, match="no kspec manifest.json"):
        kspec.load(RAW, binaries=tmp_path)
    with pytest.raises(kspec.KspecTypeError, match="binaries"):
        kspec.load(RAW, binaries=3)


@pytest.mark.parametrize("path", [123, None, 1.5, b"specs"])
def test_load_of_a_non_path_is_a_type_error(path):
    with pytest.raises(kspec.KspecTypeError, match="path"):
        kspec.load(path)


@pytest.mark.parametrize("path", [123, 1.5, ["k.cubin"]])
def test_raw_module_path_of_a_non_path_is_a_type_error(path):
    with pytest.raises(kspec.KspecTypeError, match="path"):
        kspec.RawModule(path=path)
