"""kspec.jit on the CPU: translation of every construct and builtin, each kernel compiled by NVRTC for sm_90
(no GPU needed), error messages with file and line, and the ahead-of-time path through `kspec build`."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from helpers import jit_kernels as K
import kspec
from kspec import jit
from kspec.compiler import CompileOptions, compile_source

REPO = Path(__file__).resolve().parents[2]
KERNELS_FILE = inspect.getsourcefile(K)


def _v(dtype, n=4):
    return np.zeros(n, dtype)


def _m(dtype, cols=10):
    return np.zeros((4, cols), dtype)


# (kernel, stand-in arguments): every kernel of jit_kernels for the signatures the GPU tests use.
CASES = [
    (K.elementwise_copy, (_v(np.float32), _v(np.float32), np.uint32(4))),
    (K.elementwise_copy, (_v(np.float64), _v(np.float64), 4)),
    (K.saxpy, (np.float32(2), _v(np.float32), _v(np.float32), _v(np.float32), 4)),
    *[(K.arithmetic, (_v(t), _v(t), _m(t))) for t in (np.float32, np.float64, np.int32, np.int64)],
    (K.arithmetic, (_v(np.int64), _v(np.uint32), _m(np.int64))),
    *[(K.integer_ops, (_v(t), _v(t), _m(t))) for t in (np.int32, np.uint32, np.int64, np.int8)],
    (K.control_flow, (_v(np.float32), _v(np.int64), 4)),
    (K.runtime_step, (_v(np.int64), 0, 10, 3)),
    *[(K.elementwise_copy, (_v(np.float32), _v(np.float32), t(8))) for t in (np.int32, np.uint64)],
    (K.shapes, (_m(np.float32), _m(np.float32))),
    (K.zero_d, (np.zeros((), np.float64), np.zeros((), np.float64))),
    (K.math_functions, (_v(np.float32), _m(np.float32))),
    (K.math_functions, (_v(np.float64), _m(np.float64))),
    (K.casts, (_v(np.float32), _m(np.float64))),
    (K.thread_ids, (_m(np.int64),)),
    (K.block_reduce, (_v(np.float32), _v(np.float32))),
    (K.dynamic_shared, (_v(np.float64), _v(np.float64))),
    *[(K.warp_shuffles, (_v(t), _m(t))) for t in (np.int32, np.uint32, np.int64, np.uint64, np.float16, np.float32, np.float64)],
    (K.grid_sync, (_v(np.float32), _v(np.float32), 4)),
    (K.async_copy, (_v(np.float32), _v(np.float32))),
    (K.uses_device_functions, (_v(np.float32), _v(np.float32))),
    *[(K.atomics, (_v(t, 9), _v(t))) for t in (np.int32, np.uint32, np.int64, np.uint64)],
    *[(K.atomic_float_add, (_v(t), _v(t))) for t in (np.float32, np.float64)],
    (K.atomic_counters, (_v(np.uint32), np.uint32(5))),
    (K.complex_ops, (_v(np.complex128), _m(np.float64))),
]


def _compile(case):
    kernel, args = case
    source = kernel.cuda_source(*args)
    program = compile_source(source, name=kernel.__name__, options=CompileOptions(arch="sm_90"))
    return source, program


@pytest.fixture(scope="module")
def compiled():
    with ThreadPoolExecutor(max_workers=2) as pool:  # NVRTC releases the GIL: two compiles at once
        return list(pool.map(_compile, CASES))


def test_every_kernel_compiles_for_sm90(compiled):
    assert len(compiled) == len(CASES)
    for (kernel, _), (source, program) in zip(CASES, compiled):
        assert program.format == "cubin" and len(program.binary) > 0, kernel.__name__
        assert f'extern "C" __global__ void {kernel.__name__}(' in source


def test_seed_source_keeps_python_names_and_line_directives():
    source = K.elementwise_copy.cuda_source(_v(np.float32), _v(np.float32), np.uint32(4))
    for name in ("tid", "ntid", "size", "x", "y"):
        assert re.search(rf"\b{name}\b", source), name
    assert "unsigned int tid;" in source  # blockIdx.x * blockDim.x + threadIdx.x is uint32, as in C++
    assert "unsigned int i;" in source  # the loop variable takes range()'s common type
    first = K.elementwise_copy.func.__code__.co_firstlineno
    assert f'#line {first + 2} "{KERNELS_FILE}"' in source
    assert f'#line {first + 5} "{KERNELS_FILE}"' in source
    assert "y[i] = x[i];" in source


def test_signature_typing_rules():
    src = K.elementwise_copy.cuda_source(_v(np.float64), _v(np.float64), 4)  # Python int -> int64
    assert "long long size" in src and "double* _y_data" in src
    assert "const double* __restrict__ _x_data" in src  # an array the kernel only reads
    assert "long long i;" in src  # uint32 tid with an int64 stop: C++ makes it long long
    src = K.saxpy.cuda_source(np.float32(2), _v(np.float32), _v(np.float32), _v(np.float32), 4)
    assert "float a," in src  # NumPy scalars keep their dtype
    src = K.saxpy.cuda_source(2.0, _v(np.float32), _v(np.float32), _v(np.float32), 4)
    assert "double a," in src and "long long n" in src
    src = K.control_flow.cuda_source(_v(np.float32), _v(np.int64), True)
    assert "bool n)" in src


def test_constructs_translate_as_documented():
    src = K.arithmetic.cuda_source(_v(np.int32), _v(np.int32), _m(np.int32))
    assert "(x / y)" in src and "(x % y)" in src  # C++ integer division and modulo
    assert "static_cast<double>(x) / static_cast<double>(y)" in src  # true division
    assert "out(i, 0) = (x + y);" in src  # 2-d strided element
    assert "((x * 3) + 1)" in src  # module-level constant captured
    src = K.arithmetic.cuda_source(_v(np.float32), _v(np.float32), _m(np.float32))
    assert "floorf(x / y)" in src and "fmodf(x, y)" in src
    src = K.integer_ops.cuda_source(_v(np.int32), _v(np.int32), _m(np.int32))
    assert "kspec_jit::ipow<int>(x, 3)" in src and "min(min(x, y), 5)" in src
    src = K.control_flow.cuda_source(_v(np.float32), _v(np.int64), 4)
    assert "#pragma unroll\n" in src and "#pragma unroll(2)\n" in src and "#pragma unroll(1)\n" in src
    assert "return;" in src and "break;" in src and "continue;" in src and "while (true)" in src
    # constant bounds: the trip count is a literal; j is derived from the counter
    assert "_k1 < 5; ++_k1" in src and "j = static_cast<long long>((10) + _k1 * (-2));" in src
    assert "} else if (" in src
    assert "(v < 0.0f)" in src  # a literal meeting a float32 stays float32
    src = K.runtime_step.cuda_source(_v(np.int64), 0, 10, 3)
    assert "kspec_jit::range_length<long long>(_start" in src  # a run-time step may be negative or zero
    src = K.shapes.cuda_source(_m(np.float32), _m(np.float32))
    assert "rows_0 = x.shape[0]" not in src and "x.shape[0]" in src and "x.size()" in src
    assert "((x(i, j) * 2.0f) + 2.0f)" in src  # x.ndim is a compile-time constant
    src = K.zero_d.cuda_source(np.zeros((), np.float64), np.zeros((), np.float64))
    assert "out() = (x() + 1.0);" in src


def test_builtins_translate():
    src = K.thread_ids.cuda_source(_m(np.int64))
    for text in ("threadIdx.z", "blockIdx.y", "blockDim.x", "gridDim.z", "kspec_jit::laneid()", "warpSize"):
        assert text in src
    src = K.block_reduce.cuda_source(_v(np.float32), _v(np.float32))
    assert "__shared__ float smem[256];" in src and "__syncthreads();" in src
    assert "smem[tid] += smem[(tid + s)];" in src  # uint32 + int64 index: accepted, C++ conversions
    src = K.dynamic_shared.cuda_source(_v(np.float64), _v(np.float64))
    assert "extern __shared__ __align__(16) unsigned char _kspec_dynamic_shared[];" in src
    assert "double* const buf = reinterpret_cast<double*>(_kspec_dynamic_shared);" in src
    src = K.warp_shuffles.cuda_source(_v(np.float16), _m(np.float16))
    assert "#define KSPEC_NEED_FP16" in src
    for text in ("__shfl_sync(", "__shfl_up_sync(", "__shfl_down_sync(", "__shfl_xor_sync(", ", 8)", "__syncwarp(static_cast<unsigned int>(4294967295LL))"):
        assert text in src
    src = K.grid_sync.cuda_source(_v(np.float32), _v(np.float32), 4)
    assert "#include <cooperative_groups.h>" in src and "cooperative_groups::this_grid().sync();" in src
    assert K.grid_sync.is_cooperative(_v(np.float32), _v(np.float32), 4)
    assert not K.block_reduce.is_cooperative(_v(np.float32), _v(np.float32))
    src = K.async_copy.cuda_source(_v(np.float32), _v(np.float32))
    assert "cooperative_groups::memcpy_async(" in src and "cooperative_groups::wait_prior<0>(" in src
    src = K.atomics.cuda_source(_v(np.int32, 9), _v(np.int32))
    for fn in ("atomicAdd", "atomicSub", "atomicMin", "atomicMax", "atomicAnd", "atomicOr", "atomicXor", "atomicExch", "atomicCAS"):
        assert f"{fn}(&counters[" in src
    src = K.atomic_counters.cuda_source(_v(np.uint32), np.uint32(5))
    assert "atomicInc(&out[0], wrap)" in src and "atomicDec(&out[1], wrap)" in src


def test_device_functions_are_emitted_once_per_signature():
    src = K.uses_device_functions.cuda_source(_v(np.float32), _v(np.float32))
    # one C++ function per (function, signature), named after the Python name and the signature
    assert "__device__ float square_plus_float32_float32(float a, float b) {" in src
    assert "__device__ long long square_plus_int64_int64(long long a, long long b) {" in src
    assert src.count("__device__ long long clamp_index_uint32_int64(unsigned int i, long long n) {") == 1
    assert "__device__ void store_float32_1d_uint32_float32(kspec_jit::array<float, 1> out" in src
    # every device function is declared before any is defined, so definitions may come in any order
    functions = src[src.index("}  // namespace kspec_jit"):]
    prototypes = re.findall(r"^__device__ [^\n{]*\);$", functions, re.M)
    definitions = re.findall(r"^(__device__ [^\n{]*\)) \{$", functions, re.M)
    assert sorted(p[:-1] for p in prototypes) == sorted(definitions) and len(definitions) == 5
    assert max(functions.index(p) for p in prototypes) < min(functions.index(d + " {") for d in definitions)


def test_stand_ins_and_signature_strings():
    from kspec.jit._types import parse_signature

    types = parse_signature("float32[:], float64[:, :], uint32, int16[()]", "k")
    assert [str(t) for t in types] == ["float32[:]", "float64[:, :]", "uint32", "int16[()]"]
    assert parse_signature((np.float32, "int8[:]", int, np.zeros((2, 2), np.int32)), "k")[2].name == "int64"


def test_public_access_paths():
    assert kspec.jit.rawkernel is jit.rawkernel
    code = "import kspec, sys; assert 'kspec.jit' not in sys.modules; import kspec.jit; print('ok')"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "ok"
    with pytest.raises(NotImplementedError, match="only be used inside"):
        jit.syncthreads()
    with pytest.raises(TypeError, match="device function"):
        K.square_plus((1,), (1,), (1, 2))


# -- errors ------------------------------------------------------------------------------------------------


def _line_of(func, text):
    lines, first = inspect.getsourcelines(func)
    for k, line in enumerate(lines):
        if text in line:
            return first + k
    raise AssertionError(text)


@jit.rawkernel()
def _with_statement(x):
    with open("f"):
        x[0] = 1


@jit.rawkernel()
def _undefined_name(x):
    x[0] = not_defined_anywhere + 1  # noqa: F821


@jit.rawkernel()
def _type_change(x):
    acc = 0
    acc = x[0] * 1.5  # noqa: F841 (the kernel under test)


@jit.rawkernel()
def _kernel_returns(x):
    return x[0]


@jit.rawkernel()
def _float_index(x):
    x[x[0]] = 1


@jit.rawkernel()
def _comprehension(x):
    y = [v for v in range(3)]  # noqa: F841 (the kernel under test)


@jit.rawkernel()
def _complex_compare(z, out):
    out[0] = z[0] < z[1]


def test_unsupported_syntax_names_file_line_and_construct():
    with pytest.raises(NotImplementedError) as info:
        _with_statement.cuda_source(_v(np.float32))
    message = str(info.value)
    assert f"{__file__}:{_line_of(_with_statement.func, 'with open')}" in message
    assert "With statement is not supported" in message and isinstance(info.value, kspec.KspecError)
    with pytest.raises(jit.JitUnsupportedError, match=r"ListComp expressions are not supported"):
        _comprehension.cuda_source(_v(np.float32))


def test_undefined_name():
    with pytest.raises(NameError) as info:
        _undefined_name.cuda_source(_v(np.float32))
    assert "Unbound name: not_defined_anywhere" in str(info.value)
    assert f":{_line_of(_undefined_name.func, 'not_defined_anywhere')}:" in str(info.value)


def test_local_type_is_fixed_by_first_assignment():
    with pytest.raises(TypeError) as info:
        _type_change.cuda_source(_v(np.float32))
    line = _line_of(_type_change.func, "acc = x[0]")
    message = str(info.value)
    assert "local 'acc' is int64" in message and "assigns a float32" in message and f"line {line}" in message
    assert f"{__file__}:{line}" in message


def test_kernel_return_value_and_float_index_and_atomic_dtype():
    with pytest.raises(jit.JitTypeError, match="cannot return a value"):
        _kernel_returns.cuda_source(_v(np.float32))
    with pytest.raises(jit.JitTypeError, match="array indices must be integers"):
        _float_index.cuda_source(_v(np.float32))
    with pytest.raises(jit.JitTypeError, match=r"`atomicMin` does not support float32 input: jit.atomic_min takes int32"):
        K.atomics.cuda_source(_v(np.float32, 9), _v(np.float32))
    with pytest.raises(TypeError, match=r"takes 2 argument\(s\) \(counters, values\), got 1"):
        K.atomics.cuda_source(_v(np.int32))


def test_lambda_and_unreadable_source():
    with pytest.raises(ValueError, match="lambda.*inspect.getsource"):
        jit.rawkernel()(lambda x: None).cuda_source(_v(np.float32))
    namespace: dict = {}
    exec("def made_by_exec(x):\n    x[0] = 1\n", namespace)  # noqa: S102  (like a REPL: no source file)
    with pytest.raises(jit.JitSourceError, match="inspect.getsource.*REPL"):
        jit.rawkernel()(namespace["made_by_exec"]).cuda_source(_v(np.float32))


def test_nvrtc_errors_point_at_the_python_line():
    source = _complex_compare.cuda_source(_v(np.complex64), _v(np.bool_))
    with pytest.raises(kspec.CompileError) as info:
        compile_source(source, name="complex_compare", options=CompileOptions(arch="sm_90"))
    line = _line_of(_complex_compare.func, "z[0] < z[1]")
    assert f"{Path(__file__).name}({line})" in info.value.log


# -- ahead of time: spec -> TOML -> `kspec build` (no GPU) -> kspec.load(binaries=) --------------------------


@jit.rawkernel(signatures=["float32[:], float32[:], uint32", (np.float64, "float64[:]", "float64[:]", int)])
def _aot_kernel(a, x, out, n):
    for i in range(jit.grid(1), n, jit.gridsize(1)):
        out[i] = a * x[i]


def test_signatures_build_ahead_of_time(tmp_path):
    from kspec.build import read_manifest
    from kspec.spec import dumps_toml

    copy_spec = K.elementwise_copy.spec(_v(np.float32), _v(np.float32), np.uint32(1))
    specs = [copy_spec]
    with pytest.raises(TypeError, match=r"takes 4 argument\(s\) \(a, x, out, n\), got 3"):
        _aot_kernel.specs()  # the first signature lacks the scalar `a`
    _aot_kernel._signatures = _aot_kernel._signatures[1:]
    specs += _aot_kernel.specs()
    assert [s.name for s in specs] == ["elementwise_copy_float32_1d_float32_1d_uint32",
                                       "_aot_kernel_float64_float64_1d_float64_1d_int64"]
    spec_file = tmp_path / "jit_kernels.toml"
    spec_file.write_text(dumps_toml(specs))
    out = tmp_path / "build"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", KSPEC_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-m", "kspec", "build", str(spec_file), "--arch", "sm_90", "-o", str(out)],
                          env=env, capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    manifest = read_manifest(out)
    built = {(e["kernel"], e["arch"]) for e in manifest["entries"]}
    assert ("elementwise_copy_float32_1d_float32_1d_uint32", "sm_90") in built
    library = kspec.load(spec_file, binaries=out)
    assert isinstance(library["elementwise_copy_float32_1d_float32_1d_uint32"], kspec.RawKernel)


@pytest.mark.parametrize("bound", [np.uint32, np.int32, np.int64, np.uint64])
def test_grid_stride_loop_counts_trips_in_a_signed_64_bit_counter(bound):
    # NVCC pipelines `for (long long k = 0; k < n; ++k)`; an unsigned or narrow `i += step` it did not
    # (benchmarks/NOTES.md). The bounds compare in int64, or in uint64 when one of them is uint64.
    src = K.elementwise_copy.cuda_source(_v(np.float32), _v(np.float32), bound(8))
    wide = "unsigned long long" if bound is np.uint64 else "long long"
    assert f"kspec_jit::range_length<{wide}>(" in src
    assert re.search(r"for \(long long (_k\d+) = 0; \1 < _n\d+; \+\+\1\)", src)
    assert "i += " not in src
