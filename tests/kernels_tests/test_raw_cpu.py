"""RawKernel / RawModule without a GPU: constructor rules, compiling for an architecture, pickling."""

from __future__ import annotations

from pathlib import Path

import io
import pickle

import pytest

import kspec
from kspec.spec import load_library

# The seed example, verbatim, from the repository's kernel library (its one copy).
ADD = load_library(Path(__file__).resolve().parents[2] / "specs")["my_add"].source


def test_code_xor_path(tmp_path):
    with pytest.raises(TypeError, match="exactly one of code= .* and path= .*neither"):
        kspec.RawModule()
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(b"\x7fELF\0")  # the ELF magic: RawModule checks the file kind (issue 20)
    with pytest.raises(TypeError, match="exactly one of code= .* and path= .*both"):
        kspec.RawModule(code=ADD, path=str(cubin))


def test_path_checks(tmp_path):
    with pytest.raises(ValueError, match=r"\.cubin, \.ptx or \.fatbin"):
        kspec.RawModule(path=str(tmp_path / "k.so"))
    with pytest.raises(FileNotFoundError, match="k.cubin"):
        kspec.RawModule(path=str(tmp_path / "k.cubin"))
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(b"\x7fELF\0")  # the ELF magic: RawModule checks the file kind (issue 20)
    with pytest.raises(ValueError, match="name_expressions"):
        kspec.RawModule(path=cubin, name_expressions=["f<int>"])
    assert kspec.RawModule(path=cubin).file_path == str(cubin.resolve())


def test_nvcc_backend_without_nvcc_is_not_implemented(monkeypatch):
    from kspec.compiler import _nvcc

    monkeypatch.setattr(_nvcc, "_candidates", lambda: [("$CUDA_PATH/bin/nvcc", None), ("PATH", None)])
    with pytest.raises(NotImplementedError, match="backend='nvcc' is not supported.*CUDA_PATH.*RawModule\\(path="):
        kspec.RawKernel(ADD, "my_add", backend="nvcc")
    with pytest.raises(kspec.NvccNotFoundError):
        kspec.RawModule(code=ADD, backend="nvcc")


def test_unknown_backend_is_a_value_error():
    with pytest.raises(ValueError, match="backend.*'hiprtc'"):
        kspec.RawKernel(ADD, "my_add", backend="hiprtc")


def test_jitify_is_refused_with_the_alternative():
    with pytest.raises(NotImplementedError, match="jitify=True is not supported.*cuda/std/type_traits"):
        kspec.RawKernel(ADD, "my_add", jitify=True)
    with pytest.raises(NotImplementedError, match="jitify"):
        kspec.RawModule(code=ADD, jitify=True)


def test_constructor_type_errors():
    with pytest.raises(TypeError, match="code"):
        kspec.RawKernel(b"bytes", "my_add")
    with pytest.raises(TypeError, match="name"):
        kspec.RawKernel(ADD, "")
    with pytest.raises(TypeError, match="options"):
        kspec.RawKernel(ADD, "my_add", options=(3,))
    with pytest.raises(TypeError, match="name_expressions"):
        kspec.RawModule(code=ADD, name_expressions=[""])


def test_cupy_attributes_are_kept():
    k = kspec.RawKernel(ADD, "my_add", options="-DX=1", translate_cucomplex=True, enable_cooperative_groups=True)
    assert (k.code, k.name, k.options, k.backend) == (ADD, "my_add", ("-DX=1",), "nvrtc")
    assert k.translate_cucomplex and k.enable_cooperative_groups and k.file_path is None
    m = kspec.RawModule(code=ADD, name_expressions=("a", "b"))
    assert m.name_expressions == ("a", "b") and m.code == ADD and m.path is None
    assert m.get_function("my_add") is m.get_function("my_add")


def test_compile_for_an_arch_needs_no_gpu_and_writes_the_log():
    k = kspec.RawKernel(
        'extern "C" __global__ void warn(float* x) { int unused_variable = 1; x[0] = 1.0f; }', "warn"
    )
    log = io.StringIO()
    k.compile(log_stream=log, arch="sm_90")
    assert "unused_variable" in log.getvalue()


def test_compile_errors_carry_the_log():
    k = kspec.RawKernel('extern "C" __global__ void broken(float* x) { x[0] = undefined_name; }', "broken")
    with pytest.raises(kspec.CompileError, match="undefined_name"):
        k.compile(arch="sm_90")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_cupy_complex_sources_compile_unchanged(arch):
    source = r"""
#include <cupy/complex.cuh>
extern "C" __global__
void my_func(const complex<float>* x1, const complex<float>* x2,
             complex<float>* y, float a) {
    int tid = blockDim.x * blockIdx.x + threadIdx.x;
    y[tid] = x1[tid] + a * x2[tid];
    y[tid] += x1[tid] * 2 + 0.5 * x2[tid] + abs(x1[tid]) + exp(conj(x2[tid])) + thrust::complex<float>(1, 2);
    complex<double> w = complex<double>(1.0, 2.0) * x1[tid];
    y[tid] += complex<float>(w.real(), w.imag()) + polar(1.0f, 0.5f);
}
"""
    kspec.RawKernel(source, "my_func").compile(arch=arch)


def test_translate_cucomplex_compiles_cucomplex_sources():
    source = r"""
#include <cuComplex.h>
extern "C" __global__ void cmul(const cuDoubleComplex* a, cuDoubleComplex* c) {
    c[0] = cuCmul(a[0], cuConj(a[1]));
    c[1] = make_cuDoubleComplex(cuCabs(a[0]), cuCreal(a[1]) + cuCimag(a[1]));
}
"""
    kspec.RawKernel(source, "cmul", translate_cucomplex=True).compile(arch="sm_90")


def test_template_name_expressions_lower_without_a_gpu():
    code = r"""
template<typename T>
__global__ void fx3(T* arr, int N) {
    unsigned int tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid < N) { arr[tid] = arr[tid] * 3; }
}
"""
    mod = kspec.RawModule(code=code, options=("-std=c++11",), name_expressions=["fx3<float>", "fx3<double>"])
    mod.compile(arch="sm_90")
    assert mod._symbol("fx3<float>", "sm_90").startswith("_Z3fx3If")
    assert mod._symbol("fx3<double>", "sm_90").startswith("_Z3fx3Id")


def test_pickling_without_a_gpu(tmp_path):
    k = kspec.RawKernel(ADD, "my_add", options=("-DFOO",))
    clone = pickle.loads(pickle.dumps(k))
    assert (clone.code, clone.name, clone.options) == (k.code, k.name, k.options)
    mod = kspec.RawModule(code=ADD, name_expressions=["my_add"], enable_cooperative_groups=True)
    m_clone = pickle.loads(pickle.dumps(mod))
    assert m_clone.name_expressions == ("my_add",) and m_clone.enable_cooperative_groups
    kernel = pickle.loads(pickle.dumps(mod.get_function("my_add")))
    assert kernel.name == "my_add" and kernel.module.code == ADD
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(b"\x7fELF\0")  # the ELF magic: RawModule checks the file kind (issue 20)
    assert pickle.loads(pickle.dumps(kspec.RawModule(path=cubin))).path == str(cubin.resolve())
