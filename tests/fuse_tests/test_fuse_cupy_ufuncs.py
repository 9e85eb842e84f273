"""Every ufunc ``cupy.fuse`` accepts, accepted by kspec.fuse; CuPy's ufuncs that NumPy lacks (``cupyx.rsqrt``,
``cupy.sinc``, ``cupy.i0``, ``cupy.fix``, and the ufuncs behind ``cupy.angle`` and ``cupy.around``) with CuPy's
result dtypes and NumPy's values, on kspec's CPU device; their C++ compiling with NVRTC (no GPU).

CuPy is not installed here: a CuPy ufunc is a stand-in of the class name CuPy's has (``ufunc``) with its
``name`` (``cupy_<name>``), handing the call to ``__cupy_override_elementwise_kernel__`` as CuPy 14's
``ufunc.__call__`` does (cupy/_core/_kernel.pyx).
"""

from __future__ import annotations

import sys
import threading
import types
import warnings

import numpy as np
import pytest

import kspec
from kspec.compiler import CompileOptions, compile_source
from kspec.dtypes import BY_NAME
from kspec.fuse._ufunc_cupy import LOOPS
from kspec.fuse._ufuncs import CUPY_ONLY, UfuncTypeError, emit, resolve
from helpers.ufunc_kernels import kernel_source

# CuPy v14.2.0's ufuncs under `cupy.<name>` / `cupyx.<name>`: public name -> (the ufunc's name without "cupy_",
# nin, nout). Derived from CuPy's source (git -C /work/.mirror/cupy+cupy/repo show v14.2.0:PATH): every name
# that cupy/__init__.py (with its aliases: acos..atanh, pow, bitwise_invert/_left_shift/_right_shift, abs,
# conj, mod) and cupyx/__init__.py bind to a cupy._core._kernel.ufunc, i.e. to a create_ufunc result of
# cupy/_core/_routines_{math,logic,binary}.pyx, cupy/_core/core.pyx (divmod), cupy/_logic/{content,ops}.py,
# cupy/_math/{arithmetic,explog,floating,hyperbolic,misc,rational,rounding,special,trigonometric}.py
# (directly or through create_math_ufunc / create_rounding_ufunc / create_comparison / _create_bit_op /
# create_arithmetic) and cupyx/_rsqrt.py. Functions that are not ufuncs (cupy.angle, cupy.around, cupy.real,
# cupy.clip, cupy.where, cupy.isneginf, cupy.nan_to_num...) are not here; matmul is a gufunc-like function.
_UNARY = """negative positive absolute:abs fabs rint sign conjugate:conj exp exp2 log log2 log10 expm1 log1p sqrt
square cbrt reciprocal sin cos tan arcsin:asin arccos:acos arctan:atan sinh cosh tanh arcsinh:asinh
arccosh:acosh arctanh:atanh rad2deg:degrees deg2rad:radians invert:bitwise_not,bitwise_invert bitwise_count
logical_not isfinite isinf isnan signbit floor ceil trunc fix i0 sinc rsqrt"""
_BINARY = """add subtract multiply true_divide:divide floor_divide power:pow float_power remainder:mod fmod
heaviside logaddexp logaddexp2 gcd lcm arctan2:atan2 hypot bitwise_and bitwise_or bitwise_xor
left_shift:bitwise_left_shift right_shift:bitwise_right_shift greater greater_equal less less_equal not_equal
equal logical_and logical_or logical_xor maximum minimum fmax fmin copysign nextafter ldexp"""
_TWO_OUT = {"divmod": 2, "modf": 1, "frexp": 1}  # name -> nin (two outputs each)


def _cupy_ufuncs() -> dict[str, tuple[str, int, int]]:
    table = {}
    for text, nin in ((_UNARY, 1), (_BINARY, 2)):
        for entry in text.split():
            name, _, aliases = entry.partition(":")
            for public in [name, *filter(None, aliases.split(","))]:
                table[public] = (name, nin, 1)
    for name, nin in _TWO_OUT.items():
        table[name] = (name, nin, 2)
    return table


CUPY_UFUNCS = _cupy_ufuncs()
# cupy.rad2deg / deg2rad are the ufuncs; degrees / radians are the same objects (cupy/_math/trigonometric.py).
assert len(CUPY_UFUNCS) == 104 and CUPY_UFUNCS["rsqrt"] == ("rsqrt", 1, 1)

# CuPy ufuncs that are no public name but that CuPy's routines call on a traced value under cupy.fuse:
# cupy.where (cupy/_sorting/search.py _where_ufunc), cupy.clip (_routines_math.pyx _clip), cupy.copy and
# x[...] = v (cupy/_core/_ufuncs.py elementwise_copy), cupy.real / cupy.imag (cupy/_math/arithmetic.py, through
# fusion._call_ufunc), cupy.angle(z, deg) (_routines_math.pyx _angle, _angle_deg), cupy.around / cupy.round
# (core.pyx _round_ufunc, through fusion._call_ufunc). Not reachable inside cupy.fuse, so not here:
# cupy_nan_to_num_ (cupy.nan_to_num allocates with cupy.full / empty_like first), cupy_is_close(_complex)
# (cupy.isclose calls cupy.asanyarray first), cupy_round_neg_uint (ndarray.round only), cupy_arange /
# cupy_linspace (creation routines).
ROUTINE_UFUNCS = {"where": 3, "clip": 3, "copy": 1, "real": 1, "imag": 1, "angle": 1, "angle_deg": 1, "round": 2}

# Operands CuPy's loops take: integer-only ufuncs get int32 arrays, the rest float64.
_INTEGER_ONLY = {"gcd", "lcm", "bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift", "right_shift",
                 "bitwise_count"}


class ufunc:  # noqa: N801 - the class name CuPy's ufuncs have (kspec checks it)
    def __init__(self, name: str, nin: int = 1, nout: int = 1) -> None:
        self.name, self.nin, self.nout = f"cupy_{name}", nin, nout

    def __call__(self, *args, **kwargs):
        for arg in args:
            if hasattr(arg, "__cupy_override_elementwise_kernel__"):
                return arg.__cupy_override_elementwise_kernel__(self, *args, **kwargs)
        raise AssertionError("a stand-in CuPy ufunc is only called on traced values here")


def _operands(name: str, nin: int) -> list[np.ndarray]:
    if name == "ldexp":
        return [np.ones(4), np.ones(4, np.int32)]
    if name == "round":
        return [np.ones(4)]
    dtype = np.int32 if name in _INTEGER_ONLY else np.float64
    return [np.ones(4, dtype)] * nin


def _traced(name: str, nin: int, nout: int, extra=()):
    uf = ufunc(name, nin + len(extra), nout)
    return kspec.fuse(lambda *a: uf(*a, *extra))


@pytest.mark.parametrize("public", sorted(CUPY_UFUNCS))
def test_every_cupy_ufunc_is_accepted(public):
    name, nin, nout = CUPY_UFUNCS[public]
    args = _operands(name, nin)
    spec = _traced(name, nin, nout).spec(*args)
    outs = [p.type for p in spec.out_params]
    assert len(outs) == nout
    numpy_ufunc = getattr(np, name, None)
    if isinstance(numpy_ufunc, np.ufunc):  # NumPy's result dtypes
        with np.errstate(all="ignore"):
            want = numpy_ufunc(*args)
        assert outs == [w.dtype.name for w in (want if nout > 1 else (want,))]
    else:  # CuPy's: float64 operands take each CuPy-only ufunc's float64 loop
        assert outs == ["float64"] and name in CUPY_ONLY


@pytest.mark.parametrize("name", sorted(ROUTINE_UFUNCS))
def test_ufuncs_cupys_routines_call_while_fusing_are_accepted(name):
    nin = ROUTINE_UFUNCS[name]
    args = [np.ones(4, bool if name == "where" else np.float64)] + [np.ones(4)] * (nin - 1)
    if name == "round":
        args = [np.ones(4, np.float32)]
    f = _traced(name, len(args), 1, extra=(2,) if name == "round" else ())
    spec = f.specs(*args) if name == "real" else [f.spec(*args)]  # real of a float64 array is the array
    assert all(s.kind == "elementwise" for s in spec)


# ------------------------------------------------------------------------------------------------ dtypes
NUMPY_DTYPES = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                "float16", "float32", "float64", "complex64", "complex128")
_FLOATING = {"bool": "float16", "int8": "float16", "uint8": "float16", "int16": "float32", "uint16": "float32",
             "int32": "float64", "uint32": "float64", "int64": "float64", "uint64": "float64"}
# CuPy's result dtype per operand dtype (None: CuPy has no loop, or NumPy refuses), from the loops in
# cupyx/_rsqrt.py, cupy/_math/special.py, cupy/_math/rounding.py, _routines_math.pyx (_angle), core.pyx (_round).
_SAME = {d: d for d in ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")}
CUPY_RESULT = {
    "rsqrt": {**_FLOATING, **_SAME, "bfloat16": "float32"},  # no bfloat16 loop: bfloat16 -> float32
    "sinc": {**_FLOATING, **_SAME},
    "i0": {**_FLOATING, **_SAME, "complex64": None, "complex128": None},
    "fix": {**{d: d for d in NUMPY_DTYPES + ("bfloat16",)}, "complex64": None, "complex128": None},
    "angle": {**_FLOATING, **_SAME, "bool": "float64", "complex64": "float32", "complex128": "float64"},
    "round": {**{d: d for d in NUMPY_DTYPES + ("bfloat16",)}, "bool": "float16", "bfloat16": "float32"},
}
CUPY_RESULT["angle_deg"] = CUPY_RESULT["angle"]


def test_cupy_only_table_is_what_the_tests_expect():
    assert set(CUPY_ONLY) == set(CUPY_RESULT) and set(LOOPS) == set(CUPY_ONLY)


@pytest.mark.parametrize("name", sorted(CUPY_RESULT))
@pytest.mark.parametrize("dtype", NUMPY_DTYPES + ("bfloat16",))
def test_cupy_result_dtypes(name, dtype):
    want = CUPY_RESULT[name][dtype]
    ops = (dtype, int) if name == "round" else (dtype,)
    if want is None:
        with pytest.raises(UfuncTypeError, match="complex" if name == "i0" else "CuPy has no loop"):
            resolve(name, ops)
        return
    loop_in, loop_out = resolve(name, ops)
    assert loop_out == (want,)
    if name == "round":
        assert loop_in[1] == "int64"  # CuPy's decimals operand is 'q'


def test_cupy_weak_scalar_rules():
    assert resolve("round", ("float32", int)) == (("float32", "int64"), ("float32",))
    assert resolve("round", ("int8", "int32")) == (("int8", "int64"), ("int8",))
    assert resolve("rsqrt", (float,)) == (("float64",), ("float64",))  # a scalar alone: its default dtype
    assert resolve("rsqrt", ("float32",), dtype="float64") == (("float64",), ("float64",))
    with pytest.raises(UfuncTypeError):
        resolve("round", ("float32", float))  # a float decimals fits no 'q' loop


def test_cupy_only_names_are_refused_through_numpy():
    f = kspec.fuse(lambda x: np.sinc(x))  # numpy.sinc is a function, not a ufunc: not CuPy's loops
    with pytest.raises(kspec.FuseError, match="numpy.sinc is not supported"):
        f.spec(np.ones(3))


# ------------------------------------------------------------------------------------------------ values (CPU)
UNARY_NEW = ("rsqrt", "sinc", "i0", "fix", "angle", "angle_deg")
DECIMALS = (0, 1, 2, -1, -2)


def _data(dtype: str, rng: np.random.Generator) -> np.ndarray:
    if dtype == "bool":
        return np.array([False, True] * 4)
    if BY_NAME[dtype].kind in "iu":
        info = np.iinfo(dtype)
        small = rng.integers(max(info.min, -300), min(info.max, 300), 40, endpoint=True)
        return np.concatenate([np.array([info.min, info.max, 0, 1, 5, 15, 25, 125, 127], dtype), small.astype(dtype)])
    specials = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 1.5, 2.5, -2.5, 3.0, 0.125, -0.125, 7.25, 8.0, -8.0, 8.5, 11.0,
                20.0, -30.0, 1e-3, 0.015, 0.025, 1.005, 123.456, np.inf, -np.inf, np.nan]
    random = rng.standard_normal(40) * 4
    if BY_NAME[dtype].kind == "c":  # finite, and small enough that sin(pi z) stays finite in complex64
        parts = np.array([v for v in specials if abs(v) <= 8] + list(random[:24] / 2))
        return (parts + 1j * parts[::-1]).astype(dtype)
    return np.array(specials + list(random)).astype(dtype)


def _reference(name: str, x: np.ndarray) -> np.ndarray:
    wide = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
    with np.errstate(all="ignore"):
        if name == "rsqrt":
            return 1 / np.sqrt(wide)
        if name in ("sinc", "i0"):
            return getattr(np, name)(wide)
        if name == "fix":
            return np.fix(x)
        return np.angle(wide, deg=name == "angle_deg")


def _close(got: np.ndarray, want: np.ndarray, out: str, ulps: float, what: str) -> None:
    """``got`` (dtype ``out``) against the float64 reference rounded to ``out``, within ``ulps`` of ``out``'s eps
    (relative, and absolute for values near 0)."""
    assert got.dtype == np.dtype(out), what
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want.astype(out), err_msg=what)
        return
    with np.errstate(all="ignore"):
        want = want.astype(out)
    eps = float(np.finfo(got.dtype).eps)
    np.testing.assert_allclose(got, want, rtol=ulps * eps, atol=ulps * eps, err_msg=what)


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_values_against_numpy_float64_on_the_cpu_device(on_cpu_device, dtype):
    """All new ufuncs accepting ``dtype`` in one fused kernel (one compile per dtype)."""
    names = [n for n in UNARY_NEW if CUPY_RESULT[n][dtype] is not None]
    calls = {n: ufunc(n) for n in names}
    around = ufunc("round", 2)

    @kspec.fuse
    def f(x):
        return tuple(calls[n](x) for n in names) + tuple(around(x, d) for d in DECIMALS)

    x = _data(dtype, np.random.default_rng(7))
    results = f(x)
    for name, got in zip(names, results):
        ulps = {"float16": 4, "float32": 16, "float64": 16}.get(np.dtype(CUPY_RESULT[name][dtype]).name, 16)
        _close(got, _reference(name, x), CUPY_RESULT[name][dtype], ulps, f"{name}({dtype})")
    for d, got in zip(DECIMALS, results[len(names):]):
        out = CUPY_RESULT["round"][dtype]
        assert got.dtype == np.dtype(out)
        if dtype == "bool":  # CuPy's ?q->e loop copies (numpy.round refuses bool unless decimals is 0)
            np.testing.assert_array_equal(got, x.astype(out))
            continue
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exact = np.round(x, d)  # NumPy's own steps in x's dtype: kspec repeats them
            wide = np.round(x.astype(np.complex128 if x.dtype.kind == "c" else np.float64), d)
        if x.dtype.kind in "iu":
            # NumPy converts the rounded double back with a C cast, undefined out of range (x86 gives
            # INT_MIN for int32 where kspec's astype wraps as for int8/int16): compared where in range only
            info = np.iinfo(x.dtype)
            inside = (wide >= float(info.min)) & (wide < float(info.max) + 1.0)
            np.testing.assert_array_equal(got[inside], exact[inside], err_msg=f"round({dtype}, {d})")
            np.testing.assert_array_equal(got[inside], wide[inside], err_msg=f"round({dtype}, {d}) against float64")
            continue
        np.testing.assert_array_equal(got, exact, err_msg=f"round({dtype}, {d})")
        # and the float64 reference: equal up to one unit of the last decimal kept (NumPy scales by 10**d in
        # x's dtype, so 0.015 in float32, 0.01499999966, becomes 1.5 and rounds to 0.02; in float64, to 0.01)
        with np.errstate(all="ignore"):
            error = np.abs(got.astype(wide.dtype) - wide)
            far = (error > 10.0 ** -d * 1.001 + np.abs(wide) * np.finfo(got.dtype).eps) & np.isfinite(wide)
        assert not np.any(far), f"round({dtype}, {d}): {x[far]} -> {got[far]}, not {wide[far]}"


def test_bfloat16_values_on_the_cpu_device(on_cpu_device):
    calls = {n: ufunc(n) for n in UNARY_NEW}
    around = ufunc("round", 2)

    @kspec.fuse
    def f(x):
        b = x.astype("bfloat16")
        return tuple(calls[n](b).astype("float32") for n in UNARY_NEW) + (around(b, 1),)

    x = np.array([0.0, -0.0, 0.5, -0.5, 1.0, -2.5, 3.0, 7.25, 11.0, -30.0, 0.015, np.inf, -np.inf, np.nan], np.float32)
    *results, rounded = f(x)
    assert rounded.dtype == np.float32  # CuPy's round has no bfloat16 loop
    bf16 = 2.0 ** -7
    for name, got in zip(UNARY_NEW, results):
        want = _reference(name, x.astype(np.float64)).astype(np.float32)
        np.testing.assert_allclose(got, want, rtol=4 * bf16, atol=4 * bf16, err_msg=name)


def test_cupy_routines_reach_the_new_ufuncs(on_cpu_device, monkeypatch):
    """cupy.angle calls its ufuncs directly; cupy.around asks CuPy's fusion thread-local (a stand-in here)
    and hands the round ufunc to its history, as cupy/_math/rounding.py does."""
    local_mod = types.ModuleType("cupy._core._fusion_thread_local")
    local_mod.thread_local = local = threading.local()
    core = types.ModuleType("cupy._core")
    core._fusion_thread_local = local_mod
    for name, mod in (("cupy", types.ModuleType("cupy")), ("cupy._core", core),
                      ("cupy._core._fusion_thread_local", local_mod)):
        monkeypatch.setitem(sys.modules, name, mod)
    round_ufunc, angle_ufunc, angle_deg_ufunc = ufunc("round", 2), ufunc("angle"), ufunc("angle_deg")

    def around(a, decimals=0, out=None):
        if getattr(local, "is_new_fusing", False):
            return local.history.call_ufunc(round_ufunc, a, decimals, out=out)
        raise TypeError(f"Unsupported type {type(a)}")  # CuPy's _core.array(a) on a foreign object

    def angle(z, deg=False):
        return angle_deg_ufunc(z) if deg else angle_ufunc(z)

    @kspec.fuse
    def f(z, x):
        return angle(z), angle(z, deg=True), around(x, 1)

    z = np.array([1 + 1j, -1 + 0j, -2j, 0j], np.complex64)
    x = np.array([0.25, 1.35, -2.45, 12.5], np.float32)
    a, a_deg, r = f(z, x)
    assert (a.dtype, a_deg.dtype, r.dtype) == (np.float32, np.float32, np.float32)
    np.testing.assert_allclose(a, np.angle(z), rtol=1e-6)
    np.testing.assert_allclose(a_deg, np.angle(z, deg=True), rtol=1e-6)
    np.testing.assert_array_equal(r, np.round(x, 1))


# ------------------------------------------------------------------------------------------------ NVRTC


def test_every_cupy_only_loop_compiles_with_exact_types():
    """One CUDA kernel holds every loop of every CuPy-only ufunc; static_assert checks each expression's C type."""
    used: set[str] = set()
    lines = []
    for k, (name, loops) in enumerate(sorted(LOOPS.items())):
        for j, (loop_in, loop_out) in enumerate(loops):
            used |= set(loop_in) | set(loop_out)
            (expr,) = emit(name, loop_in, loop_out, [f"v_{d}" for d in loop_in])
            lines.append(f"KSPEC_CHECK({BY_NAME[loop_out[0]].c_type}, {expr});")
            lines.append(f"p_{loop_out[0]}[{k * 32 + j}] = {expr};  // {name}")
    source, needs = kernel_source("cupy_only", used, lines)
    program = compile_source(source, name="cupy_only", options=CompileOptions(arch="sm_80"), needs=needs)
    assert "warning" not in program.log.lower(), program.log
