"""kspec.jit where cupyx.jit's own tests pin the behaviour, checked on the CPU: cached_code(s), `return None`,
CuPy's exception types and phrases, typed NaN/inf constants, and the atomic table against CUDA 13 (each
accepted op/dtype compiled by NVRTC for sm_80 and sm_90, each other one rejected by name)."""

from __future__ import annotations

import importlib.util
import math
import types

import numpy
import numpy as np
import pytest

import kspec
from kspec import dtypes as kspec_dtypes
from kspec import jit
from kspec.compiler import CompileOptions, compile_source
from kspec.jit._atomics import ATOMICS

# cupy.dtype is numpy.dtype, and cupy.inf / cupy.nan are Python floats: a stand-in namespace shows that the
# translator recognises them by what they are, without importing CuPy.
fake_cupy = types.SimpleNamespace(dtype=numpy.dtype, inf=numpy.inf, nan=numpy.nan, float32=numpy.float32)


def _v(dtype, n=4):
    return np.zeros(n, dtype)


def _sm(source: str, arch: str = "sm_90") -> None:
    program = compile_source(source, name="case", options=CompileOptions(arch=arch))
    assert program.format == "cubin" and program.binary


# -- cached_code / cached_codes -------------------------------------------------------------------------------


@jit.rawkernel()
def _copy(x, y):
    tid = jit.threadIdx.x + jit.blockDim.x * jit.blockIdx.x
    y[tid] = x[tid]


def test_cached_codes_hold_one_source_per_signature():
    kernel = jit.rawkernel()(_copy.func)  # a fresh kernel: nothing generated yet
    assert kernel.cached_codes == {}
    with pytest.raises(ValueError, match="no code yet; it is generated at the first call"):
        _ = kernel.cached_code
    int_source = kernel.cuda_source(_v(np.int32), _v(np.int32))
    assert list(kernel.cached_codes.values()) == [int_source] and kernel.cached_code == int_source
    float_source = kernel.cuda_source(_v(np.float32), _v(np.float32))
    kernel.cuda_source(_v(np.int32), _v(np.int32))  # a signature seen before adds nothing
    codes = kernel.cached_codes
    assert len(codes) == 2 and kernel.cached_code == float_source
    key = next(iter(codes))
    assert [str(t) for t in key] == ["int32[:]", "int32[:]"]
    assert "const int* __restrict__ _x_data" in codes[key] and "float* _y_data" in float_source
    codes.clear()  # a copy: the kernel's own record is untouched
    assert len(kernel.cached_codes) == 2


@pytest.mark.parametrize(("unroll", "pragma"), [(True, "#pragma unroll\n"), (False, "#pragma unroll(1)\n"),
                                                (5, "#pragma unroll(5)\n"), (None, None)])
def test_range_unroll_pragma_spelling(unroll, pragma):
    @jit.rawkernel()
    def add_ten(x):
        tid = jit.threadIdx.x + jit.blockDim.x * jit.blockIdx.x
        y = x[tid]
        if unroll is None:
            for _ in jit.range(5):
                y += 2
        else:
            for _ in jit.range(5, unroll=unroll):
                y += 2
        x[tid] = y

    source = add_ten.cuda_source(_v(np.float32))
    if pragma is None:
        assert "unroll" not in add_ten.cached_code
    else:
        assert pragma in add_ten.cached_code
    if unroll == 5:
        _sm(source)


# -- return ---------------------------------------------------------------------------------------------------


@jit.rawkernel()
def _returns_none(x, y):
    tid = jit.grid(1)
    if tid >= x.size:
        return
    y[tid] = x[tid]
    return None


@jit.rawkernel(device=True)
def _device_returns_none(y, v):
    if v < 0:
        return None
    y[0] = v


@jit.rawkernel()
def _calls_device_returning_none(y, v):
    _device_returns_none(y, v)


@jit.rawkernel()
def _returns_unknown(x):
    return unknown_var  # noqa: F821  (the point of the test)


@jit.rawkernel()
def _returns_value(x):
    return x[0]


def test_return_and_return_none_in_kernels_and_device_functions():
    source = _returns_none.cuda_source(_v(np.int32), _v(np.int32))
    assert source.count("return;") == 2
    device = _calls_device_returning_none.cuda_source(_v(np.float32), np.float32(1))
    assert "__device__ void device_returns_none_float32_1d_float32(" in device and "return;" in device
    _sm(source)
    _sm(device)


def test_return_of_an_unknown_name_is_cupys_name_error():
    with pytest.raises(NameError, match="Unbound name: unknown_var") as info:
        _returns_unknown.cuda_source(_v(np.float32))
    assert isinstance(info.value, jit.JitNameError) and isinstance(info.value, kspec.KspecError)
    with pytest.raises(jit.JitTypeError, match="a kernel cannot return a value"):
        _returns_value.cuda_source(_v(np.float32))


# -- grid(ndim) and unpacking --------------------------------------------------------------------------------


def _grid_kernel(n, builtin):
    @jit.rawkernel()
    def uses_grid():
        x = builtin(n)  # noqa: F841

    return uses_grid


@pytest.mark.parametrize("builtin", [jit.grid, jit.gridsize])
def test_grid_ndim_errors_are_cupys(builtin):
    for n in (0, 4, -1):
        with pytest.raises(ValueError, match=rf"Only ndim=1,2,3 are supported: {builtin.name}\({n}\)") as info:
            _grid_kernel(n, builtin).cuda_source()
        assert isinstance(info.value, jit.JitValueError) and not isinstance(info.value, TypeError)
    for n in ("abc", [0], (1,), 2.0, None, True):
        with pytest.raises(TypeError, match="ndim must be an integer known at compile time") as info:
            _grid_kernel(n, builtin).cuda_source()
        assert isinstance(info.value, jit.JitTypeError) and not isinstance(info.value, ValueError)
    for n in (1, 2, 3, np.int64(2)):
        assert "blockDim.x" in _grid_kernel(n, builtin).cuda_source()


@jit.rawkernel()
def _unpack_scalar():
    x, = jit.grid(1)  # noqa: F841


@jit.rawkernel()
def _unpack_too_many():
    x, y = jit.grid(3)  # noqa: F841


@jit.rawkernel()
def _unpack_not_enough():
    x, y, z = jit.grid(2)  # noqa: F841


def test_unpacking_errors_are_value_errors_with_cupys_phrases():
    with pytest.raises(ValueError, match=r"`x, = jit.grid\(1\)`: uint32 cannot be unpack"):
        _unpack_scalar.cuda_source()
    with pytest.raises(ValueError, match=r"too many values to unpack \(expected 2"):
        _unpack_too_many.cuda_source()
    with pytest.raises(ValueError, match=r"not enough values to unpack \(expected 3"):
        _unpack_not_enough.cuda_source()


# -- NaN and infinities ------------------------------------------------------------------------------------------


def _constants_kernel(dtype):
    @jit.rawkernel()
    def constants(x):
        x[0] = fake_cupy.dtype(dtype).type(fake_cupy.inf)
        x[1] = numpy.dtype(dtype).type(-math.inf)
        x[2] = fake_cupy.dtype(dtype).type(fake_cupy.nan)
        x[3] = float("-inf")
        x[4] = numpy.nan
        x[5] = numpy.dtype(dtype).type(float("nan"))
        x[6] = numpy.dtype(dtype).type("inf")
        x[7] = numpy.dtype(dtype).type(1.5)

    return constants


_BITS = {  # dtype -> (+inf, NaN) of the type or, for complex, of its parts
    "float16": ("__ushort_as_half((unsigned short)0x7c00U)", "__ushort_as_half((unsigned short)0x7e00U)"),
    "float32": ("__int_as_float(0x7f800000)", "__int_as_float(0x7fc00000)"),
    "float64": ("__longlong_as_double(0x7ff0000000000000LL)", "__longlong_as_double(0x7ff8000000000000LL)"),
}


def test_nan_and_inf_constants_for_every_float_and_complex_dtype():
    sources = []
    for spec in ("e", np.float32, "float64", np.dtype(np.complex64), "D"):  # every way a dtype is named
        name = np.dtype(spec).name
        source = _constants_kernel(spec).cuda_source(_v(name, 8))
        part = {"complex64": "float32", "complex128": "float64"}.get(name, name)
        inf, nan = _BITS[part]
        if name.startswith("complex"):
            zero = "0.0f" if part == "float32" else "0.0"
            spell = {"inf": f"complex<{'float' if part == 'float32' else 'double'}>({{}}, {zero})"}["inf"].format
        else:
            spell = "{}".format
        assert f"x[0] = {spell(inf)};" in source and f"x[1] = {spell(f'(-{inf})')};" in source
        assert f"x[2] = {spell(nan)};" in source and f"x[5] = {spell(nan)};" in source
        assert f"x[6] = {spell(inf)};" in source and "1.5" in source
        sources.append(source)
    # one module with the five kernels (renamed apart) compiles: one NVRTC call for every spelling
    kernels = [s[s.index('extern "C"'):].replace("void constants(", f"void constants_{k}(") for k, s in enumerate(sources)]
    prelude = sources[-1][:sources[-1].index('extern "C"')]  # complex128's: complex, no fp16
    assert "KSPEC_NEED_FP16" not in prelude
    _sm("#define KSPEC_NEED_FP16\n" + prelude + "\n".join(kernels))


def test_non_finite_floats_fold_at_compile_time():
    @jit.rawkernel()
    def scaled(x):
        x[0] = x[0] * float("inf") + numpy.float32("nan") - -math.inf

    source = scaled.cuda_source(_v(np.float32))
    assert "__int_as_float(0x7f800000)" in source and "__int_as_float(0x7fc00000)" in source
    assert "double" not in source.split('extern "C"')[1]  # a Python float meeting float32 stays float32

    @jit.rawkernel()
    def bad_string(x):
        x[0] = float("not a number")

    with pytest.raises(ValueError, match="could not convert string to float64: 'not a number'"):
        bad_string.cuda_source(_v(np.float32))

    @jit.rawkernel()
    def bad_dtype(x):
        x[0] = numpy.dtype("no_such_type").type(1)

    with pytest.raises(TypeError, match=r"numpy.dtype\('no_such_type'\)"):
        bad_dtype.cuda_source(_v(np.float32))


# -- atomics: CUDA 13's table ------------------------------------------------------------------------------------


def _every_atomic_module(tmp_path, dtype_names):
    """A kernel calling every accepted atomic on each of these dtypes, written to a file (jit reads sources)."""
    dtypes = sorted(dtype_names)
    params = ", ".join(f"a_{t}, v_{t}" for t in dtypes)
    lines = ["from kspec import jit", "", "", "@jit.rawkernel()", f"def every_atomic({params}):"]
    for t in dtypes:
        for op, accepted in ATOMICS.items():
            if t in accepted:
                compare = f"v_{t}[1], " if op == "cas" else ""
                lines.append(f"    v_{t}[2] = jit.atomic_{op}(a_{t}, 0, {compare}v_{t}[0])")
    path = tmp_path / f"every_atomic_{len(dtypes)}.py"
    path.write_text("\n".join(lines) + "\n")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    args = [a for t in dtypes for a in (_v(t, 2), _v(t, 3))]
    return module.every_atomic.cuda_source(*args)


_SM90_ONLY = {t for accepted in ATOMICS.values() for t, how in accepted.items() if how == "sm_90"}
_ACCEPTED = {t for accepted in ATOMICS.values() for t in accepted}


def test_every_accepted_atomic_compiles_for_sm80_and_sm90(tmp_path):
    _sm(_every_atomic_module(tmp_path, _ACCEPTED), "sm_90")
    _sm(_every_atomic_module(tmp_path, _ACCEPTED - _SM90_ONLY), "sm_80")
    with pytest.raises(kspec.CompileError) as info:
        _sm(_every_atomic_module(tmp_path, _SM90_ONLY), "sm_80")
    for op, accepted in ATOMICS.items():
        for t, how in accepted.items():
            if how == "sm_90":
                assert f"kspec.jit: atomic_{op} of {t} needs sm_90 or newer" in info.value.log


def test_atomic_spellings():
    @jit.rawkernel()
    def cas_only(a, expected, desired):
        jit.atomic_cas(a, 0, expected, desired)

    unsigned = cas_only.cuda_source(_v(np.uint16), np.uint16(1), np.uint16(2))
    assert "atomicCAS(&a[0], expected, desired)" in unsigned  # CUDA's own unsigned short overload (sm_70+)
    signed = cas_only.cuda_source(_v(np.int16), np.int16(1), np.int16(2))
    assert "static_cast<short>(atomicCAS(reinterpret_cast<unsigned short*>(&a[0])" in signed
    wide = cas_only.cuda_source(_v(np.int64), np.int64(1), np.int64(2))
    assert "static_cast<long long>(atomicCAS(reinterpret_cast<unsigned long long*>(&a[0])" in wide
    pair = cas_only.cuda_source(_v(np.complex128), np.complex128(1), np.complex128(2))
    assert "kspec_jit_atomic_cas_complex128(&a[0], expected, desired)" in pair and "#if __CUDA_ARCH__ >= 900" in pair


def _one_atomic(op):
    fn = getattr(jit, f"atomic_{op}")
    if op == "cas":
        @jit.rawkernel()
        def cas(a, v):
            fn(a, 0, v[0], v[1])
        return cas

    @jit.rawkernel()
    def other(a, v):
        fn(a, 0, v[0])
    return other


def test_atomics_reject_every_type_cuda_lacks_naming_op_and_type():
    cuda = {"add": "atomicAdd", "sub": "atomicSub", "exch": "atomicExch", "min": "atomicMin", "max": "atomicMax",
            "inc": "atomicInc", "dec": "atomicDec", "cas": "atomicCAS", "and": "atomicAnd", "or": "atomicOr",
            "xor": "atomicXor"}
    candidates = [n for n in kspec_dtypes.NAMES if n != "bfloat16"]  # bfloat16: jit kernels lack it altogether
    for op, accepted in ATOMICS.items():
        kernel = _one_atomic(op)
        for name in candidates:
            if name in accepted:
                assert "__global__" in kernel.cuda_source(_v(name), _v(name))
                continue
            with pytest.raises(TypeError, match=rf"`{cuda[op]}` does not support {name} input: jit.atomic_{op} takes "):
                kernel.cuda_source(_v(name), _v(name))


def test_cupy_ufuncs_are_known_by_their_names_whatever_their_class():
    # cupyx.scipy.signal's gammatone kernel calls cupy.exp / cupy.sqrt / cupy.abs: CuPy's ufuncs are named
    # 'cupy_<name>' and have nin / nout, however their class is spelled
    from kspec.jit._builtins import _math_name

    odd_class = type("_CupyStyleUfunc", (), {"__module__": "cupyx.whatever", "nin": 1, "nout": 1})
    exp = odd_class()
    exp.name = exp.__name__ = "cupy_exp"
    assert _math_name(exp) == "exp"
    not_a_ufunc = odd_class()
    not_a_ufunc.name = "exp"
    assert _math_name(not_a_ufunc) is None
