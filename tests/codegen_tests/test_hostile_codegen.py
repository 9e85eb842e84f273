"""Issue 20, code injection: no string of a spec, a path or a command line becomes code in what
`kspec generate` writes. Strings go in as literals (py_str, like repr), comments and docstrings escaped,
names only after a check, and every module is parsed before it is returned."""

from __future__ import annotations

import ast
import importlib
import json
import sys
from pathlib import Path

import pytest

import kspec
from kspec.cli import main
from kspec.codegen import ApiFunction, ApiParam, ApiRaw, emit_module, generate
from kspec.codegen._emit import checked_source
from kspec.codegen._literal import comment_text, docstring_text, py_str

HOSTILE = [
    "plain",
    'quote " and \\ backslash',
    "'''",
    '"""',
    'ends with a quote"',
    "line\nINJECTED = __import__('os').getpid()",
    "carriage\rINJECTED = 1",
    "nul \0 byte",
    "lone surrogate \ud800",
    "form feed \x0c vertical tab \x0b",
    "line separator \u2028 paragraph \u2029",
    "del \x7f and escape \x1b[31m",
    "unicode é 中文 🚀",
]

RAW_SOURCE = 'extern "C" __global__ void f(float* y) { y[0] = 1; }'


def assigned_names(text: str) -> set[str]:
    """Every name a module binds anywhere (assignments, imports, defs)."""
    names = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
    return names


def calls_of(text: str) -> set[str]:
    return {n.func.id for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


@pytest.mark.parametrize("text", HOSTILE)
def test_every_escape_evaluates_back_to_the_same_string(text):
    assert ast.literal_eval(py_str(text)) == text
    assert ast.literal_eval('"""' + docstring_text(text) + '"""') == text
    comment = "# " + comment_text(text)
    assert len(comment.splitlines()) == 1 and "\0" not in comment
    (comment + "\n").encode("utf-8")  # writable: no lone surrogate survives
    assert ast.parse(comment + "\nx = 1\n").body[0].targets[0].id == "x"


def _module_with(text: str) -> str:
    function = ApiFunction(
        name="k", kind="elementwise", doc=text,
        inputs=(ApiParam("x", "CudaArray", text),), outputs=(ApiParam("y", "CudaArray | None", "float32", "None"),),
        options=(ApiParam("stream", "Any", "", "None", True),), returns="CudaArray", instantiations=(text,),
    )  # fmt: skip
    raw = ApiRaw(name="r", doc=text, functions=("f", text))
    return emit_module(version=text, command=text, spec_path=text, specs_data=[{"doc": text}], apis=[function, raw])


@pytest.mark.parametrize("text", HOSTILE)
def test_emitted_module_is_valid_and_injects_nothing(text):
    module = _module_with(text)
    module.encode("utf-8")
    tree = ast.parse(module)
    # the same names, calls and statements as the module of a harmless string: nothing was injected
    benign = _module_with("plain")
    assert assigned_names(module) == assigned_names(benign) and calls_of(module) == calls_of(benign)
    assert [type(n) for n in tree.body] == [type(n) for n in ast.parse(benign).body]
    assert text in ast.get_docstring(tree, clean=False)
    specs = next(n for n in tree.body if isinstance(n, ast.AnnAssign) and n.target.id == "_SPECS")
    assert ast.literal_eval(specs.value) == [{"doc": text}]  # the spec data comes back exactly
    k = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "k")
    assert text.split("\n")[0] in ast.get_docstring(k, clean=False)


@pytest.mark.parametrize("bad", ["os.system('x')", "a b", "class", "é", "x\ny", ""])
def test_names_are_checked_before_they_are_spliced(bad):
    raw = ApiRaw(name=bad, doc="", functions=("f",))
    with pytest.raises(kspec.SpecError, match="cannot be a name in the generated module"):
        emit_module(version="0", command="c", spec_path="p", specs_data=[], apis=[raw])


def test_checked_source_refuses_what_does_not_parse():
    with pytest.raises(kspec.SpecError, match="invalid Python module"):
        checked_source("x = (\n", what="m.py")
    with pytest.raises(kspec.SpecError, match="invalid Python module"):
        checked_source("x = '\0'\n", what="m.py")
    with pytest.raises(kspec.SpecError, match="invalid Python module"):
        checked_source("x = '\ud800'\n", what="m.py")


def _raw_spec_file(directory: Path, **fields) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    kernel = {"kind": "raw", "name": "mod", "source": RAW_SOURCE, "kernels": ["f"], **fields}
    path = directory / "kern.json"
    path.write_text(json.dumps({"schema": 1, "kernel": [kernel]}))
    return path


def test_name_expression_with_a_newline_is_refused_not_written(tmp_path, capsys):
    spec = _raw_spec_file(tmp_path / "s", kernels=[], name_expressions=["f\nINJECTED = __import__('os').getpid()"])
    assert main(["generate", str(spec), "-o", str(tmp_path / "out")]) == 1
    out = capsys.readouterr().out
    assert "name_expressions[0]" in out and "control character" in out
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("dirname", ["s\nINJECTED = 1\n#", 's""";INJECTED=1;"""', "s\rINJECTED = 1", "s'''x"])
def test_hostile_spec_directory_names_stay_in_comments_and_docstrings(tmp_path, dirname, monkeypatch):
    spec = _raw_spec_file(tmp_path / dirname)
    result = generate([spec], command=f"kspec generate {spec}", version=kspec.__version__)
    assert result.ok, result.errors
    for name, text in result.files.items():
        assert "INJECTED" not in assigned_names(text), name
    # written and imported for real: nothing runs but the module's own code
    out = tmp_path / "pkg_hostile"
    monkeypatch.chdir(tmp_path)
    assert main(["generate", str(spec.relative_to(tmp_path)), "-o", "pkg_hostile"]) == 0
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        package = importlib.import_module("pkg_hostile")
        module = importlib.import_module("pkg_hostile.kern")
        assert not hasattr(package, "INJECTED") and not hasattr(module, "INJECTED")
        assert dirname in module.__doc__
        assert isinstance(module.mod, kspec.RawKernel)
    finally:
        for key in [k for k in sys.modules if k.startswith("pkg_hostile")]:
            del sys.modules[key]
    assert out.is_dir()


@pytest.mark.parametrize(
    "field, value, phrase",
    [
        ("doc", "a NUL \0 here", "NUL"),
        ("doc", "a lone \ud800 surrogate", "lone surrogate (U+D800)"),
        ("source", RAW_SOURCE + "\0", "NUL"),
    ],
)
def test_nul_and_lone_surrogates_are_spec_errors(tmp_path, capsys, field, value, phrase):
    spec = _raw_spec_file(tmp_path / "s", **{field: value})
    assert main(["generate", str(spec), "-o", str(tmp_path / "out")]) == 1
    out = capsys.readouterr().out
    out.encode("utf-8")  # the report itself is printable
    assert f"field '{field}'" in out and phrase in out
    assert main(["validate", str(spec)]) == 1


def test_hostile_docs_in_python_specs_are_escaped(tmp_path):
    """A doc the spec layer accepts (quotes, backslashes, control characters) round-trips exactly."""
    doc = 'says """hi""" \\ and \x1b[31m red \u2028 and ends with "'
    spec = _raw_spec_file(tmp_path / "s", doc=doc)
    result = generate([spec], command="kspec generate", version=kspec.__version__)
    text = result.files["kern.py"]
    specs = next(n for n in ast.parse(text).body if isinstance(n, ast.AnnAssign) and n.target.id == "_SPECS")
    assert ast.literal_eval(specs.value)[0]["doc"] == doc


def test_command_line_with_a_newline_stays_in_its_comment(tmp_path):
    spec = _raw_spec_file(tmp_path / "s")
    result = generate([spec], command="kspec generate x\nINJECTED = 1", version="0\nINJECTED = 2")
    for text in result.files.values():
        assert "INJECTED" not in assigned_names(text)
        assert text.splitlines()[0].startswith("# Generated by kspec ")
