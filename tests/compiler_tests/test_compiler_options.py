"""CompileOptions, include directories, NVRTC loading and the cache key: no GPU needed."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest

import kspec
from kspec.compiler import (
    DEFAULT_ARCHS,
    TEMPLATE_VERSION,
    CompileOptions,
    cache_key,
    include_dirs,
    nvrtc_version,
    supported_archs,
)
from kspec.compiler import _includes, _key, _nvrtc

from helpers.child_env import child_env

REPO = Path(__file__).resolve().parents[2]
SRC = 'extern "C" __global__ void k(float* a) { a[0] = 1.0f; }'


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KSPEC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KSPEC_DUMP_SOURCE", raising=False)


# --- CompileOptions -------------------------------------------------------------------------------------


def test_default_args_order_and_content():
    args = CompileOptions().to_args(["/inc/a", "/inc/b"])
    assert args == ["-arch=sm_90", "-std=c++17", "-I/inc/a", "-I/inc/b"]
    assert CompileOptions().is_ptx is False


def test_all_fields_become_args():
    opts = CompileOptions(
        arch="compute_80", std="c++20", defines=("A", "B=2"), fast_math=True, extra=("-lineinfo",), relocatable=True
    )
    args = opts.to_args(["/i"])
    assert args == [
        "-arch=compute_80", "-std=c++20", "-DA", "-DB=2", "--use_fast_math", "-rdc=true", "-I/i", "-lineinfo",
    ]
    assert opts.is_ptx


def test_fast_math_only_when_asked():
    assert "--use_fast_math" not in CompileOptions().to_args([])


@pytest.mark.parametrize(
    "extra, std, arch",
    [
        (("-std=c++11",), "c++11", "sm_90"),
        (("--std=c++14",), "c++14", "sm_90"),
        (("-arch=sm_80",), "c++17", "sm_80"),
        (("--gpu-architecture=compute_86",), "c++17", "compute_86"),
        (("-arch", "sm_89"), "c++17", "sm_89"),
    ],
)
def test_user_std_and_arch_win(extra, std, arch):
    opts = CompileOptions(extra=extra)
    args = opts.to_args([])
    assert opts.effective_std == std and opts.effective_arch == arch
    assert sum(a.startswith(("-std", "--std")) for a in args) == 1
    assert sum(a.startswith(("-arch", "--gpu-architecture")) for a in args) == 1
    assert args[-len(extra) :] == list(extra)


def test_user_std_replaces_field():
    args = CompileOptions(extra=("-std=c++11",)).to_args([])
    assert "-std=c++17" not in args and "-std=c++11" in args


def test_lists_are_stored_as_tuples():
    opts = CompileOptions(defines=["X"], extra=["-lineinfo"])  # type: ignore[arg-type]
    assert opts.defines == ("X",) and opts.extra == ("-lineinfo",)
    hash(opts)


@pytest.mark.parametrize("arch", ["sm90", "sm_9", "90", "gfx90a", "", "compute_", "sm_90x", None])
def test_bad_arch_names_arch(arch):
    with pytest.raises(kspec.KspecValueError, match="arch"):
        CompileOptions(arch=arch)  # type: ignore[arg-type]


def test_arch_suffixes_accepted():
    assert CompileOptions(arch="sm_90a").arch == "sm_90a"
    assert CompileOptions(arch="sm_100f").arch == "sm_100f"


def test_bad_arch_in_extra_names_extra():
    with pytest.raises(kspec.KspecValueError, match="extra"):
        CompileOptions(extra=("-arch=hopper",))


def test_bad_std_and_defines():
    with pytest.raises(kspec.KspecValueError, match="std"):
        CompileOptions(std="17")
    with pytest.raises(kspec.KspecValueError, match="defines"):
        CompileOptions(defines=("1BAD",))
    with pytest.raises(kspec.KspecTypeError, match="extra"):
        CompileOptions(extra=(1,))  # type: ignore[arg-type]
    assert CompileOptions(defines=("F(a,b)=a+b", "V=x y")).defines == ("F(a,b)=a+b", "V=x y")


def test_lone_string_extra_is_one_option():
    assert CompileOptions(extra="-lineinfo").extra == ("-lineinfo",)  # type: ignore[arg-type]


# --- NVRTC and architectures ----------------------------------------------------------------------------


def test_nvrtc_version_and_supported_archs():
    major, minor = nvrtc_version()
    assert major >= 13 and minor >= 0
    assert all(a.startswith("sm_") for a in supported_archs())
    # Every default arch is one NVRTC 13.0 accepts; check it against the NVRTC installed here too.
    assert set(DEFAULT_ARCHS) <= set(supported_archs())


def test_default_archs_are_one_cubin_per_major_version():
    """A CUBIN runs on its major version's later minors (the stores pick it: tests/kernels_tests/test_binaries.py), so the
    default build makes one per major, the lowest minor of each the supported GPUs (sm_80 and up) start at."""
    majors = [int(a[3:-1]) for a in DEFAULT_ARCHS]
    assert len(set(majors)) == len(majors) and all(a.endswith("0") for a in DEFAULT_ARCHS)
    assert {"sm_80", "sm_90"} <= set(DEFAULT_ARCHS)


def test_import_does_not_load_nvrtc():
    code = "import sys, kspec, kspec.compiler; assert 'cuda.bindings.nvrtc' not in sys.modules, 'loaded'"
    subprocess.run([sys.executable, "-c", code], check=True, env=child_env(), cwd=REPO)


def test_missing_binding_raises_nvrtc_not_found(monkeypatch):
    import cuda.bindings

    monkeypatch.setattr(_nvrtc, "_module", None)
    monkeypatch.delattr(cuda.bindings, "nvrtc", raising=False)
    monkeypatch.setitem(sys.modules, "cuda.bindings.nvrtc", None)
    with pytest.raises(kspec.NvrtcNotFoundError, match=r"pip install kspec\[nvrtc\]"):
        _nvrtc.load_nvrtc()


def test_missing_library_raises_nvrtc_not_found(monkeypatch):
    import cuda.bindings

    def no_library():
        raise RuntimeError("libnvrtc.so.13 not found")

    fake = types.SimpleNamespace(nvrtcVersion=no_library)
    monkeypatch.setattr(_nvrtc, "_module", None)
    monkeypatch.setattr(cuda.bindings, "nvrtc", fake, raising=False)
    monkeypatch.setitem(sys.modules, "cuda.bindings.nvrtc", fake)
    with pytest.raises(kspec.NvrtcNotFoundError, match="libnvrtc.so.13 not found"):
        _nvrtc.load_nvrtc()


# --- include directories --------------------------------------------------------------------------------


def test_include_dirs_kspec_first_then_cuda_headers():
    dirs = include_dirs()
    assert Path(dirs[0]) == REPO / "templates" / "include"
    assert any(Path(d, "cuda_fp16.h").is_file() for d in dirs)
    assert any(Path(d, "cuda", "std", "complex").is_file() for d in dirs)
    assert include_dirs(["fp16", "complex"]) == dirs


def test_include_dirs_unknown_need():
    with pytest.raises(kspec.KspecValueError, match="needs"):
        include_dirs(["fp64"])


def test_include_dirs_missing_headers_error_only_when_needed(monkeypatch):
    monkeypatch.setattr(_includes, "cuda_header_dir", lambda lib: None)
    assert include_dirs() == [_includes.kspec_include_dir()]
    with pytest.raises(kspec.NvrtcNotFoundError, match="cudart"):
        include_dirs(["fp16"])
    with pytest.raises(kspec.NvrtcNotFoundError, match="cccl"):
        include_dirs(["cub"])


# --- cache key ------------------------------------------------------------------------------------------


def test_key_is_stable_and_hex():
    key = cache_key(SRC)
    assert key == cache_key(SRC, options=CompileOptions(), name_expressions=(), needs=())
    assert len(key) == 64 and int(key, 16) >= 0


@pytest.mark.parametrize(
    "change",
    [
        {"source": SRC + " "},
        {"options": CompileOptions(arch="sm_80")},
        {"options": CompileOptions(arch="compute_90")},
        {"options": CompileOptions(defines=("X",))},
        {"options": CompileOptions(fast_math=True)},
        {"options": CompileOptions(extra=("-std=c++14",))},
        {"name_expressions": ("k",)},
    ],
)
def test_key_changes_with_each_input(change):
    base = {"source": SRC, "options": CompileOptions(), "name_expressions": ()}
    changed = {**base, **change}
    assert cache_key(changed.pop("source"), **changed) != cache_key(base.pop("source"), **base)


def test_key_depends_on_name_expression_order():
    assert cache_key(SRC, name_expressions=("a", "b")) != cache_key(SRC, name_expressions=("b", "a"))


def test_key_depends_on_template_version_and_nvrtc(monkeypatch):
    before = cache_key(SRC)
    monkeypatch.setattr(_key, "TEMPLATE_VERSION", TEMPLATE_VERSION + 1)
    assert cache_key(SRC) != before
    monkeypatch.setattr(_key, "TEMPLATE_VERSION", TEMPLATE_VERSION)
    monkeypatch.setattr(_key, "nvrtc_version", lambda: (99, 9))
    assert cache_key(SRC) != before


def test_key_depends_on_kspec_header_contents(tmp_path, monkeypatch):
    headers = tmp_path / "include"
    (headers / "kspec").mkdir(parents=True)
    header = headers / "kspec" / "elementwise.cuh"
    header.write_text("#pragma once\n")
    monkeypatch.setattr(_key, "kspec_include_dir", lambda: str(headers))
    _key.kspec_headers_digest.cache_clear()
    try:
        first = _key.kspec_headers_digest()
        header.write_text("#pragma once\n// changed\n")
        _key.kspec_headers_digest.cache_clear()
        assert _key.kspec_headers_digest() != first
    finally:
        _key.kspec_headers_digest.cache_clear()


def test_toolchain_identity_names_header_packages():
    identity = _key.toolchain_identity()
    assert "nvidia-cuda-cccl=" in identity and "nvidia-cuda-runtime=" in identity
