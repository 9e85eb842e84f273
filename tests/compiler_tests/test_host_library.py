"""kspec.compiler.compile_host_library: a C++ support library built by the host compiler, kept in the binary cache.

kspec.jax builds its XLA FFI handler this way. Checked here without JAX: the library loads and runs, a second
build is a cache hit (same bytes, no compile), the key follows the source and the include directories' files,
and a failing build is a CompileError with the compiler's log and the numbered source. Skipped without a host
compiler.
"""

from __future__ import annotations

import ctypes

import pytest


_SOURCE = """
#include "answer.h"
extern "C" __attribute__((visibility("default"))) int kspec_test_answer(int x) { return x * ANSWER; }
"""


pytestmark = pytest.mark.usefixtures("needs_host_compiler")


@pytest.fixture
def include(tmp_path):
    directory = tmp_path / "include"
    directory.mkdir()
    (directory / "answer.h").write_text("#define ANSWER 42\n")
    return directory


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KSPEC_CACHE_DIR", str(tmp_path / "cache"))
    from kspec.compiler import default_cache

    return default_cache()


def _load(binary: bytes, path) -> ctypes.CDLL:
    path.write_bytes(binary)
    return ctypes.CDLL(str(path))


def test_builds_loads_and_runs(include, cache, tmp_path):
    from kspec.compiler import compile_host_library

    program = compile_host_library(_SOURCE, "answer", [str(include)])
    assert program.format == "so" and program.arch == "host" and program.compile_ms > 0
    lib = _load(program.binary, tmp_path / "answer.so")
    assert lib.kspec_test_answer(2) == 84


def test_second_build_is_a_cache_hit(include, cache, tmp_path):
    from kspec.compiler import compile_host_library, host_library_key

    first = compile_host_library(_SOURCE, "answer", [str(include)])
    before = cache.info()
    again = compile_host_library(_SOURCE, "answer", [str(include)])
    assert again.binary == first.binary and again.compile_ms == 0.0
    assert cache.info().entries == before.entries
    assert cache.get(host_library_key(_SOURCE, [str(include)])) is not None


def test_key_follows_source_and_include_files(include):
    from kspec.compiler import host_library_key

    key = host_library_key(_SOURCE, [str(include)])
    assert host_library_key(_SOURCE + "\n// changed\n", [str(include)]) != key
    (include / "answer.h").write_text("#define ANSWER 43\n")
    assert host_library_key(_SOURCE, [str(include)]) != key


def test_changed_header_builds_again(include, cache, tmp_path):
    from kspec.compiler import compile_host_library

    compile_host_library(_SOURCE, "answer", [str(include)])
    (include / "answer.h").write_text("#define ANSWER 7\n")
    program = compile_host_library(_SOURCE, "answer", [str(include)])
    assert program.compile_ms > 0
    assert _load(program.binary, tmp_path / "seven.so").kspec_test_answer(3) == 21


def test_failed_build_is_a_compile_error_with_log_and_source(cache):
    import kspec
    from kspec.compiler import compile_host_library

    with pytest.raises(kspec.CompileError) as info:
        compile_host_library('extern "C" int broken( { return 0; }\n', "broken_library")
    message = str(info.value)
    assert "broken_library" in message and "host compiler" in message
    assert "1 | extern \"C\" int broken(" in message
    assert info.value.log


def test_source_must_be_text(cache):
    import kspec
    from kspec.compiler import compile_host_library

    with pytest.raises(kspec.KspecTypeError, match="source: expected a str"):
        compile_host_library(b"int x;", "bytes")  # type: ignore[arg-type]
