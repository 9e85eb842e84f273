"""compile_source with the real NVRTC, no GPU: targets, name expressions, headers, options, errors."""

from __future__ import annotations

import logging
import pickle
import re
from pathlib import Path

import pytest

import kspec
from kspec.compiler import CompiledProgram, CompileOptions, compile_source, nvrtc_version

ELF_MAGIC = b"\x7fELF"

ADD = """
extern "C" __global__ void add_f32(const float* x, const float* y, float* z, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) z[i] = x[i] + y[i];
}
"""

TEMPLATE = """
template<typename T>
__global__ void fx3(T* arr, int N) {
    unsigned int tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid < N) arr[tid] *= 3;
}
"""

NAMESPACED = """
namespace kspec_test {
__global__ void scale(float* a, float s) { a[threadIdx.x] *= s; }
template<int N> __global__ void fill(float* a) { a[threadIdx.x] = N; }
}
"""


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KSPEC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KSPEC_DUMP_SOURCE", raising=False)
    monkeypatch.delenv("KSPEC_DUMP_DIR", raising=False)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_plain_kernel_to_cubin(arch):
    program = compile_source(ADD, name="add_f32", options=CompileOptions(arch=arch))
    assert program.binary[:4] == ELF_MAGIC
    assert program.format == "cubin" and program.arch == arch
    assert program.nvrtc_version == nvrtc_version()
    assert program.compile_ms > 0
    assert program.log == ""
    assert dict(program.lowered_names) == {}


def test_plain_kernel_to_ptx():
    program = compile_source(ADD, name="add_f32", options=CompileOptions(arch="compute_80"))
    assert program.format == "ptx" and program.arch == "compute_80"
    text = program.binary.rstrip(b"\0").decode()
    assert ".version" in text and ".entry add_f32" in text and ".target sm_80" in text


def test_arch_in_extra_decides_format():
    program = compile_source(ADD, name="add_f32", options=CompileOptions(extra=("-arch=compute_90",)))
    assert program.format == "ptx" and program.arch == "compute_90"


def test_extern_c_name_expression_maps_to_itself():
    program = compile_source(ADD, name="add_f32", name_expressions=["add_f32"])
    assert dict(program.lowered_names) == {"add_f32": "add_f32"}


def test_template_name_expressions():
    program = compile_source(TEMPLATE, name="fx3", name_expressions=["fx3<float>", "fx3<double>"])
    lowered = program.lowered_names
    assert list(lowered) == ["fx3<float>", "fx3<double>"]
    assert all(v.startswith("_Z") for v in lowered.values())
    assert lowered["fx3<float>"] != lowered["fx3<double>"]
    assert lowered["fx3<float>"].encode() in program.binary  # the symbol is in the CUBIN


def test_namespaced_kernels():
    program = compile_source(
        NAMESPACED, name="ns", name_expressions=["kspec_test::scale", "kspec_test::fill<3>"]
    )
    scale, fill = program.lowered_names["kspec_test::scale"], program.lowered_names["kspec_test::fill<3>"]
    assert scale.startswith("_ZN10kspec_test5scale") and fill.startswith("_ZN10kspec_test4fill")
    assert scale.encode() in program.binary and fill.encode() in program.binary


def test_lowered_names_are_read_only_and_program_pickles():
    program = compile_source(TEMPLATE, name="fx3", name_expressions=["fx3<int>"])
    with pytest.raises(TypeError):
        program.lowered_names["x"] = "y"  # type: ignore[index]
    copy = pickle.loads(pickle.dumps(program))
    assert copy == program and isinstance(copy, CompiledProgram)


def test_warnings_are_kept_in_log():
    program = compile_source(
        'extern "C" __global__ void w(float* a) { int unused_var; a[0] = 1; }', name="w"
    )
    assert "unused_var" in program.log


# --- headers --------------------------------------------------------------------------------------------


def test_fp16_kernel():
    source = """
#include <cuda_fp16.h>
extern "C" __global__ void half_add(const __half* x, __half* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __hadd(x[i], y[i]);
}
"""
    program = compile_source(source, name="half_add", needs=["fp16"])
    assert program.binary[:4] == ELF_MAGIC


def test_bf16_kernel_without_declaring_needs():
    # The CUDA header directories are always on the path: a raw source that includes them just works.
    source = """
#include <cuda_bf16.h>
extern "C" __global__ void bf(__nv_bfloat16* x) { x[threadIdx.x] = __float2bfloat16(1.0f); }
"""
    assert compile_source(source, name="bf").binary[:4] == ELF_MAGIC


def test_complex_kernel():
    source = """
#include <cuda/std/complex>
extern "C" __global__ void cmul(cuda::std::complex<float>* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * x[i];
}
"""
    program = compile_source(source, name="cmul", needs=["complex"])
    assert program.binary[:4] == ELF_MAGIC


# --- options --------------------------------------------------------------------------------------------


def test_defines():
    source = """
#ifndef KSPEC_FLAG
#error KSPEC_FLAG must be defined
#endif
extern "C" __global__ void d(float* a) { a[0] = SCALE; }
"""
    program = compile_source(source, name="d", options=CompileOptions(defines=("KSPEC_FLAG", "SCALE=2.5f")))
    assert program.binary[:4] == ELF_MAGIC
    with pytest.raises(kspec.CompileError, match="KSPEC_FLAG must be defined"):
        compile_source(source, name="d", options=CompileOptions(defines=("SCALE=1.0f",)))


CXX17 = 'extern "C" __global__ void s(float* a) { if constexpr (sizeof(float) == 4) { a[0] = 1; } }'


def test_std_field():
    assert compile_source(CXX17, name="s", options=CompileOptions(std="c++17")).binary[:4] == ELF_MAGIC
    with pytest.raises(kspec.CompileError):
        compile_source(CXX17, name="s", options=CompileOptions(std="c++11"))


def test_user_std_in_extra_wins():
    with pytest.raises(kspec.CompileError) as info:
        compile_source(CXX17, name="s", options=CompileOptions(std="c++17", extra=("-std=c++11",)))
    assert "-std=c++11" in str(info.value) and "-std=c++17" not in str(info.value)


def test_fast_math_changes_code():
    source = 'extern "C" __global__ void f(float* a) { a[0] = sinf(a[0]) / a[1]; }'
    precise = compile_source(source, name="f")
    fast = compile_source(source, name="f", options=CompileOptions(fast_math=True))
    assert precise.binary != fast.binary


def test_arch_unknown_to_nvrtc_names_arch():
    with pytest.raises(kspec.KspecValueError, match=r"arch: 'sm_50' is not a target of NVRTC .*sm_90"):
        compile_source(ADD, name="add_f32", options=CompileOptions(arch="sm_50"))


def test_bad_inputs_name_the_parameter():
    with pytest.raises(kspec.KspecTypeError, match="source"):
        compile_source(b"code", name="k")  # type: ignore[arg-type]
    with pytest.raises(kspec.KspecValueError, match="name"):
        compile_source(ADD, name="")
    with pytest.raises(kspec.KspecTypeError, match="options"):
        compile_source(ADD, name="k", options=("-O3",))  # type: ignore[arg-type]
    with pytest.raises(kspec.KspecTypeError, match="name_expressions"):
        compile_source(ADD, name="k", name_expressions=[1])  # type: ignore[list-item]


def test_unrecognised_user_option_is_a_compile_error():
    with pytest.raises(kspec.CompileError, match="--no-such-option") as info:
        compile_source(ADD, name="add_f32", options=CompileOptions(extra=("--no-such-option",)))
    assert "NVRTC_ERROR_INVALID_OPTION" in str(info.value)


# --- compile errors -------------------------------------------------------------------------------------

BROKEN = """
extern "C" __global__ void broken_kernel(float* a, int n) {
    int i = threadIdx.x;
    if (i < n) a[i] = undefined_symbol * 2.0f;
}
"""


def test_compile_error_message():
    with pytest.raises(kspec.CompileError) as info:
        compile_source(BROKEN, name="broken_kernel")
    err = info.value
    message = str(err)
    assert "broken_kernel" in message
    assert "undefined_symbol" in message and "error" in message
    assert re.search(r"^\s+4 \| +if \(i < n\) a\[i\] = undefined_symbol", message, re.MULTILINE)
    assert "broken_kernel.cu(4)" in err.log  # NVRTC's line numbers match the numbered source
    assert err.kernel == "broken_kernel"
    assert err.source == BROKEN
    assert "undefined" in err.log
    assert "source written to" not in message


def test_compile_error_line_numbers_are_aligned():
    source = "\n".join(["// filler"] * 11 + ["bad line here"])
    with pytest.raises(kspec.CompileError) as info:
        compile_source(source, name="aligned")
    assert "   1 | // filler" in str(info.value)
    assert "  12 | bad line here" in str(info.value)


def test_invalid_name_expression_is_a_compile_error():
    with pytest.raises(kspec.CompileError, match="no_such_type"):
        compile_source(TEMPLATE, name="fx3", name_expressions=["fx3<no_such_type>"])


def test_compile_error_pickles():
    with pytest.raises(kspec.CompileError) as info:
        compile_source(BROKEN, name="broken_kernel")
    copy = pickle.loads(pickle.dumps(info.value))
    assert copy.log == info.value.log and copy.source == BROKEN and str(copy) == str(info.value)


def test_dump_source_on_error(tmp_path, monkeypatch):
    monkeypatch.setenv("KSPEC_DUMP_SOURCE", "1")
    monkeypatch.setenv("KSPEC_DUMP_DIR", str(tmp_path / "dump"))
    with pytest.raises(kspec.CompileError) as info:
        compile_source(BROKEN, name="broken_kernel")
    match = re.search(r"source written to (\S+)", str(info.value))
    assert match is not None
    path = Path(match.group(1))
    assert path.parent == tmp_path / "dump" and path.name.startswith("broken_kernel")
    assert path.read_text() == BROKEN


def test_dump_source_on_success_is_logged(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("KSPEC_DUMP_SOURCE", "1")
    monkeypatch.setenv("KSPEC_DUMP_DIR", str(tmp_path / "dump"))
    with caplog.at_level(logging.INFO, logger="kspec.compiler"):
        compile_source(ADD, name="add_f32")
    dumped = list((tmp_path / "dump").iterdir())
    assert len(dumped) == 1 and dumped[0].read_text() == ADD
    assert str(dumped[0]) in caplog.text


def test_dump_source_defaults_to_temp_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KSPEC_DUMP_SOURCE", "1")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    with pytest.raises(kspec.CompileError, match=re.escape(str(tmp_path / "kspec-dump"))):
        compile_source(BROKEN, name="broken_kernel")


def test_dump_failure_does_not_hide_compile_error(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("KSPEC_DUMP_SOURCE", "1")
    monkeypatch.setenv("KSPEC_DUMP_DIR", str(blocker / "dump"))
    with pytest.raises(kspec.CompileError, match="could not write the source dump"):
        compile_source(BROKEN, name="broken_kernel")


def test_dump_disabled_by_zero(tmp_path, monkeypatch):
    monkeypatch.setenv("KSPEC_DUMP_SOURCE", "0")
    monkeypatch.setenv("KSPEC_DUMP_DIR", str(tmp_path / "dump"))
    with pytest.raises(kspec.CompileError):
        compile_source(BROKEN, name="broken_kernel")
    assert not (tmp_path / "dump").exists()


class _CountingNvrtc:
    """The real binding, with nvrtcDestroyProgram counted and one call made to fail."""

    def __init__(self, real, fail: str):
        self._real, self._fail, self.destroyed = real, fail, 0

    def __getattr__(self, name):
        if name == self._fail:
            def fail(*args):
                raise RuntimeError(f"{name} exploded")
            fail.__name__ = name
            return fail
        return getattr(self._real, name)

    def nvrtcDestroyProgram(self, prog):
        self.destroyed += 1
        return self._real.nvrtcDestroyProgram(prog)


@pytest.mark.parametrize("fail", ["nvrtcCompileProgram", "nvrtcGetCUBIN"])
def test_program_is_destroyed_when_a_call_raises(monkeypatch, fail):
    from kspec.compiler import _nvrtc

    counting = _CountingNvrtc(_nvrtc.load_nvrtc(), fail)
    monkeypatch.setattr(_nvrtc, "load_nvrtc", lambda: counting)
    with pytest.raises(RuntimeError, match="exploded"):
        _nvrtc.run_nvrtc(ADD, "add_f32.cu", ["-arch=sm_90"], (), ptx=False)
    assert counting.destroyed == 1


def test_program_is_destroyed_on_compile_error(monkeypatch):
    from kspec.compiler import _nvrtc

    counting = _CountingNvrtc(_nvrtc.load_nvrtc(), fail="")
    monkeypatch.setattr(_nvrtc, "load_nvrtc", lambda: counting)
    with pytest.raises(kspec.CompileError):
        compile_source(BROKEN, name="broken_kernel")
    compile_source(ADD, name="add_f32")
    assert counting.destroyed == 2


def test_a_source_made_on_a_miss_only() -> None:
    """compile_cached with a function for the source and the key that determines it: the function runs on a
    miss, never on a hit; the key differs from the one of the same text given as a source."""
    from kspec.compiler import BinaryCache, cache_key, compile_cached

    text = 'extern "C" __global__ void made(float* y) { y[0] = 2; }'
    made: list[int] = []

    def source() -> str:
        made.append(1)
        return text

    cache = BinaryCache(None)
    options = CompileOptions(arch="sm_90")
    args = {"name": "made", "options": options, "name_expressions": ("made",), "cache": cache}
    program, hit = compile_cached(source, source_key="made v1", **args)
    assert not hit and made == [1] and program.lowered_names == {"made": "made"}
    again, hit = compile_cached(source, source_key="made v1", **args)
    assert hit and made == [1] and again.binary == program.binary
    assert cache_key(source_key="made v1", options=options) != cache_key("made v1", options=options)
    with pytest.raises(kspec.KspecTypeError, match="source_key"):
        compile_cached(source, **args)
    with pytest.raises(kspec.KspecTypeError, match="source_key"):
        compile_cached(text, source_key="made v1", **args)
    with pytest.raises(kspec.KspecTypeError, match="made a int"):
        compile_cached(lambda: 3, source_key="made v2", **args)  # type: ignore[arg-type, return-value]
    with pytest.raises(kspec.KspecTypeError, match="not both"):
        cache_key(text, source_key="x")


def test_a_slow_compile_says_so_once(monkeypatch, capsys):
    """A compile running past SLOW_COMPILE_S prints one line naming the kernel and arch; a quick one prints none."""
    from kspec.compiler import _compile as compile_module

    compile_source('extern "C" __global__ void quick(int* a) { a[0] = 1; }', name="quick", options=CompileOptions(arch="sm_90"))
    assert "still compiling" not in capsys.readouterr().err
    monkeypatch.setattr(compile_module, "SLOW_COMPILE_S", 0.0)
    compile_source('extern "C" __global__ void slowish(int* a) { a[0] = 2; }', name="slowish",
                   options=CompileOptions(arch="sm_90"))
    import time

    time.sleep(0.05)  # the timer thread's line
    err = capsys.readouterr().err
    assert err.count("kspec: still compiling kernel 'slowish' for sm_90") == 1, err
