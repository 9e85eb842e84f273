"""kspec.fuse's ufunc library on a device: every loop of every supported ufunc against NumPy on real data, on
kspec's CPU device (the host C++ compiler's math) and on a GPU (CUDA's).

The kernels are plain ``kspec.ElementwiseKernel``s whose operation is built from ``emit``/``cast``/``literal``
(not from the tracer): one kernel per first-operand dtype computes every ufunc loop of that dtype into raw
outputs, one row per (loop, output). Data: cartesian pairs of special values (signed zeros, +-1, halves, inf,
NaN, integer extremes) plus random values. bfloat16 (which NumPy lacks) travels as uint16 bits and is checked
against NumPy's float32 result rounded to bfloat16.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import kspec
from kspec.dtypes import BY_NAME
from kspec.fuse._ufuncs import cast, emit, headers, literal
from test_fuse_ufuncs import ALL_DTYPES, NUMPY_DTYPES, every_loop

# Results NumPy defines exactly and kspec must reproduce bit for bit (up to the sign of zero and NaN payloads).
EXACT = frozenset({
    "add", "subtract", "multiply", "divide", "negative", "positive", "absolute", "fabs", "conjugate", "sign",
    "square", "reciprocal", "floor", "ceil", "trunc", "rint", "copysign", "nextafter", "spacing", "signbit",
    "isnan", "isinf", "isfinite", "maximum", "minimum", "fmax", "fmin", "fmod", "remainder", "floor_divide",
    "divmod", "modf", "frexp", "ldexp", "heaviside", "equal", "not_equal", "less", "less_equal", "greater",
    "greater_equal", "logical_and", "logical_or", "logical_xor", "logical_not",
})
# Complex results computed with NumPy's own formulas but where FMA contraction may move the last bit.
COMPLEX_ROUNDED = frozenset({"multiply", "divide", "square", "reciprocal", "sign", "absolute"})
# Complex ufuncs whose special-value handling kspec shares with NumPy (checked on inf/NaN too): the structural
# ones, and the functions of kspec/complex_math.cuh, which follow C99 Annex G as NumPy's libm does.
COMPLEX_STRUCTURAL = frozenset({
    "add", "subtract", "negative", "positive", "conjugate", "isnan", "isinf", "isfinite", "equal", "not_equal",
    "less", "less_equal", "greater", "greater_equal", "maximum", "minimum", "fmax", "fmin", "logical_and",
    "logical_or", "logical_xor", "logical_not", "rint",
    "sqrt", "exp", "log", "log10", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh",
    "arcsinh", "arccosh", "arctanh",
})
RTOL = {"float16": 1e-3, "bfloat16": 8e-3, "float32": 1e-6, "float64": 4e-15, "complex64": 1e-5, "complex128": 1e-13}
ATOL = {"float16": 6e-8, "bfloat16": 1e-38, "float32": 1e-37, "float64": 1e-300, "complex64": 1e-37, "complex128": 1e-300}
COMPLEX_PART = {"complex64": "float32", "complex128": "float64"}

N_RANDOM = 400


# ------------------------------------------------------------------------------------------------ data
def _float_specials() -> list[float]:
    return [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -2.5, 2.0, 3.0, -3.0, 0.25, 7.0, -7.25, 10.0, 100.0, -1e3,
            1e-3, 0.9, -0.9, 1.1, np.inf, -np.inf, np.nan]


def _int_specials(dtype: str) -> list[int]:
    info = np.iinfo(dtype)
    values = [0, 1, -1, 2, -2, 3, -3, 5, 7, -7, 10, 64, 100, -100, info.min, info.max, info.min + 1, info.max - 1]
    return sorted({v for v in values if info.min <= v <= info.max})


def operands(dtype: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two arrays of equal length: every pair of special values, then random values."""
    if dtype == "bool":
        a, b = zip(*itertools.product([False, True], repeat=2))
        return np.array(a * 8, dtype=bool), np.array(b * 8, dtype=bool)
    if dtype in ("complex64", "complex128"):
        parts = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -3.0, 0.1, np.inf, np.nan]
        specials = [complex(r, i) for r, i in itertools.product(parts, repeat=2)]
        pairs = list(itertools.product(specials[::3], specials[1::3]))
        rnd = rng.uniform(-4, 4, size=(4, N_RANDOM))
        a = np.array([p[0] for p in pairs] + list(rnd[0] + 1j * rnd[1]), dtype=dtype)
        b = np.array([p[1] for p in pairs] + list(rnd[2] + 1j * rnd[3]), dtype=dtype)
        return a, b
    if dtype in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
        s = _int_specials(dtype)
        pairs = list(itertools.product(s, repeat=2))
        info = np.iinfo(dtype)
        draw = np.uint64 if dtype == "uint64" else np.int64
        rnd = rng.integers(info.min, info.max, size=(2, N_RANDOM), endpoint=True, dtype=draw)
        small = rng.integers(max(info.min, -20), 20, size=(2, N_RANDOM), endpoint=True, dtype=draw)
        a = np.concatenate([np.array([p[0] for p in pairs], dtype=dtype), rnd[0].astype(dtype), small[0].astype(dtype)])
        b = np.concatenate([np.array([p[1] for p in pairs], dtype=dtype), rnd[1].astype(dtype), small[1].astype(dtype)])
        return a, b
    store = "float32" if dtype == "bfloat16" else dtype
    s = _float_specials()
    pairs = list(itertools.product(s, repeat=2))
    rnd = np.concatenate([rng.uniform(-10, 10, size=(2, N_RANDOM)),
                          rng.choice([-1, 1], size=(2, N_RANDOM)) * 10.0 ** rng.uniform(-6, 6, size=(2, N_RANDOM))], axis=1)
    with np.errstate(over="ignore"):  # float16: values up to 1e6 overflow to inf, on purpose
        a = np.array([p[0] for p in pairs] + list(rnd[0]), dtype=store)
        b = np.array([p[1] for p in pairs] + list(rnd[1]), dtype=store)
    if dtype == "bfloat16":
        a, b = to_bf16(a), to_bf16(b)
    return a, b


def to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (half to even, NaN kept), still as float32."""
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16).astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), np.float32(np.nan), rounded).astype(np.float32)


def bf16_bits(x: np.ndarray) -> np.ndarray:
    return (np.asarray(x, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def from_bf16_bits(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


# ------------------------------------------------------------------------------------------------ kernels
def _stored(dtype: str) -> str:
    return "uint16" if dtype == "bfloat16" else dtype


def body_kernel(name: str, inputs: list[tuple[str, str]], outputs: list[str], lines: list[str], used) -> kspec.ElementwiseKernel:
    """An ElementwiseKernel whose work is one ``__noinline__`` device function in the preamble: the
    kernel's four launch variants then share one compiled body (dozens of ufuncs inlined four times would
    multiply NVRTC time). Inputs are (stored dtype, name) pairs; each output dtype R is ``raw R o_R``,
    seen by the body as a pointer."""
    params = [f"const {BY_NAME[d].c_type} {p}" for d, p in inputs] + [f"{BY_NAME[d].c_type}* o_{d}" for d in outputs]
    body = ";\n  ".join(lines)
    preamble = (f"{headers(used)}\n__device__ __noinline__ void {name}_body({', '.join(params)}, const long long n, "
                f"const long long i) {{\n  {body};\n}}")
    call_args = [p for _, p in inputs] + [f"o_{d}.data()" for d in outputs] + ["_ind.size()", "i"]
    return kspec.ElementwiseKernel(
        ", ".join(f"{d} {p}" for d, p in inputs), ", ".join(f"raw {d} o_{d}" for d in outputs),
        f"{name}_body({', '.join(call_args)})", name, preamble=preamble)


def _build(group: str, loops, rng):
    """One kernel computing every loop of the group, its host operands, and where each output goes."""
    in_dtypes = sorted({d for _, loop_in, _ in loops for d in loop_in})
    host = {d: operands(d, rng) for d in in_dtypes}
    n = min(len(a) for a, _ in host.values())
    host = {d: (a[:n], b[:n]) for d, (a, b) in host.items()}
    rows: dict[str, int] = {}
    where: list[tuple] = []
    lines = []
    for d in in_dtypes:  # bfloat16 arrives as bits; name the values like the others
        if d == "bfloat16":
            lines += ["const __nv_bfloat16 xa_bfloat16 = __ushort_as_bfloat16(a_bfloat16)",
                      "const __nv_bfloat16 xb_bfloat16 = __ushort_as_bfloat16(b_bfloat16)"]
        else:
            lines += [f"const {BY_NAME[d].c_type} xa_{d} = a_{d}", f"const {BY_NAME[d].c_type} xb_{d} = b_{d}"]
    used = set(in_dtypes)
    for name, loop_in, loop_out in loops:
        args = [f"xa_{loop_in[0]}"] + [f"xb_{d}" for d in loop_in[1:]]
        used |= set(loop_out)
        for k, (expr, out) in enumerate(zip(emit(name, loop_in, loop_out, args), loop_out)):
            row = rows.get(out, 0)
            rows[out] = row + 1
            assert out != "bfloat16" or "uint16" not in rows, "bfloat16 and uint16 outputs would share o_uint16"
            value = f"__bfloat16_as_ushort({expr})" if out == "bfloat16" else expr
            lines.append(f"o_{_stored(out)}[{row} * n + i] = {value}")
            where.append((name, loop_in, loop_out, k, out, row))
    inputs = [(_stored(d), f"{x}_{d}") for d in in_dtypes for x in "ab"]
    outputs = sorted({_stored(d) for d in rows})
    kernel = body_kernel(f"ufuncs_{group}", inputs, outputs, lines, used)
    return kernel, host, where, rows, n


def _run(kernel, host, rows, n, xp):
    dev_in = []
    for d in sorted(host):
        for arr in host[d]:
            dev_in.append(xp.asarray(bf16_bits(arr) if d == "bfloat16" else arr))
    dev_out = {_stored(d): xp.zeros((rows[d], n), dtype=_stored(d)) for d in rows}
    kernel(*dev_in, *[dev_out[d] for d in sorted(dev_out)])
    return {d: xp.asnumpy(dev_out[_stored(d)]) for d in rows}


def _reference(name, loop_in, host):
    """NumPy's outputs of ``name`` on the group's operands, and the mask of elements NumPy defines."""
    args = [host[loop_in[0]][0]] + [host[d][1] for d in loop_in[1:]]
    valid = np.ones(len(args[0]), dtype=bool)
    if name == "power" and BY_NAME[loop_in[1]].kind == "i":
        valid &= args[1] >= 0  # NumPy raises for negative integer exponents; the device documents its choice
    ufunc = getattr(np, name)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        out = ufunc(*[a[valid] for a in args])  # bfloat16 operands are float32 here: NumPy's float32 loop
    outs = out if isinstance(out, tuple) else (out,)
    return outs, valid, args


def _compare(name, loop_in, loop_out, k, got, ref, valid, args) -> str | None:
    """None when the device output matches NumPy's; else a short report with the first mismatches."""
    out = loop_out[k]
    ref = np.asarray(ref)
    if out == "bfloat16":
        got = from_bf16_bits(got)
        ref = to_bf16(ref)
    got = got[valid]
    args = [a[valid] for a in args]
    complex_in = BY_NAME[loop_in[0]].kind == "c"
    if complex_in and name not in COMPLEX_STRUCTURAL:  # inf/NaN parts: C99 and NumPy corner cases differ
        finite = np.ones(len(got), dtype=bool)
        for a in args:
            finite &= np.isfinite(a)
        got, ref, args = got[finite], ref[finite], [a[finite] for a in args]
    kind = BY_NAME[out].kind
    with np.errstate(all="ignore"):
        if kind in "biu" or (name in EXACT and not (complex_in and name in COMPLEX_ROUNDED)):
            bad = ~((got == ref.astype(got.dtype)) | (_isnan(got) & _isnan(ref)))
        else:
            atol = ATOL[out]
            if name in ("logaddexp", "logaddexp2"):
                # x + log1p(exp(y - x)) cancels when the result is near 0: an ulp of the operands, not of
                # the result, is what either implementation can promise.
                atol = atol + 4 * RTOL[out] * np.maximum(np.abs(args[0]), np.abs(args[1])).astype(np.float64)
            bad = ~np.isclose(got, ref, rtol=RTOL[out], atol=atol, equal_nan=True)
    if not bad.any():
        return None
    idx = np.flatnonzero(bad)[:6]
    rows = "; ".join(f"{tuple(a[j] for a in args)} -> {got[j]!r}, NumPy {ref[j]!r}" for j in idx)
    return f"{name}{tuple(loop_in)}->{out}[{k}]: {bad.sum()}/{len(bad)} differ: {rows}"


def _isnan(x: np.ndarray) -> np.ndarray:
    return np.isnan(x) if x.dtype.kind in "fc" else np.zeros(x.shape, dtype=bool)


def _groups():
    groups: dict[str, list] = {}
    for (name, loop_in), loop_out in every_loop().items():
        groups.setdefault(loop_in[0], []).append((name, loop_in, loop_out))
    return groups


@pytest.mark.parametrize("group", ALL_DTYPES)
def test_every_ufunc_loop_matches_numpy(group, xp):
    rng = np.random.default_rng(sum(map(ord, group)))
    loops = [entry for entry in _groups()[group] if not (group == "bfloat16" and entry[0] in ("spacing", "nextafter"))]
    kernel, host, where, rows, n = _build(group, loops, rng)
    got = _run(kernel, host, rows, n, xp)
    failures = []
    for name, loop_in, loop_out, k, out, row in where:
        outs, valid, args = _reference(name, loop_in, host)
        report = _compare(name, loop_in, loop_out, k, got[out][row], outs[k], valid, args)
        if report is not None:
            failures.append(report)
    assert not failures, f"{len(failures)} of {len(where)} outputs differ:\n" + "\n".join(failures)


def test_bfloat16_nextafter_and_spacing(xp):
    """NumPy has no bfloat16: checked against the same steps on float32 bits truncated to bfloat16."""
    xs = np.array([1.0, 1.0, -1.0, 0.0, -0.0, 3.3895314e38, np.inf, np.nan, 2.0], dtype=np.float32)
    ys = np.array([2.0, 0.0, 0.0, 1.0, -1.0, np.inf, 0.0, 1.0, 2.0], dtype=np.float32)
    k = kspec.ElementwiseKernel(
        "uint16 a, uint16 b", "uint16 n, uint16 s",
        "const __nv_bfloat16 x = __ushort_as_bfloat16(a), y = __ushort_as_bfloat16(b);\n"
        f"n = __bfloat16_as_ushort({emit('nextafter', ['bfloat16'] * 2, ['bfloat16'], ['x', 'y'])[0]});\n"
        f"s = __bfloat16_as_ushort({emit('spacing', ['bfloat16'], ['bfloat16'], ['x'])[0]})",
        "bf16_steps", preamble=headers(["bfloat16"]))
    n, s = k(xp.asarray(bf16_bits(xs)), xp.asarray(bf16_bits(ys)))
    n, s = from_bf16_bits(xp.asnumpy(n)), from_bf16_bits(xp.asnumpy(s))
    ulp1 = 2.0 ** -7
    expected_n = [1 + ulp1, 1 - ulp1 / 2, -1 + ulp1 / 2, 2.0 ** -133, -(2.0 ** -133), np.inf, np.float32(3.3895314e38), np.nan, 2.0]
    np.testing.assert_array_equal(n, np.array(expected_n, dtype=np.float32))
    expected_s = [ulp1, ulp1, -ulp1, 2.0 ** -133, 2.0 ** -133, np.inf, np.nan, np.nan, 2 * ulp1]  # as float32's
    np.testing.assert_array_equal(s, np.array(expected_s, dtype=np.float32))


def cast_sources() -> dict[str, np.ndarray]:
    """Per NumPy dtype, values to convert: small, negative, fractional, and inf/NaN for floats."""
    base = [0.0, 1.0, 2.5, -0.0, 3.75, 100.0, 127.0, -1.0, -2.5, -100.0, 7.0]
    special = [np.inf, -np.inf, np.nan, 1e10, 0.1, 70000.0]
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for src in NUMPY_DTYPES:
            kind = np.dtype(src).kind
            vals = np.array(base + (special if kind in "fc" else []))
            x = vals.astype(src)
            if kind == "c":
                x = x + (1j * np.arange(len(vals))).astype(src)
            out[src] = x
    return out


def cast_defined(x: np.ndarray, dst: str) -> np.ndarray:
    """Elements whose conversion to ``dst`` C (and so NumPy) defines: float -> int needs the truncated
    value in range (negative -> unsigned is undefined for floats; it wraps for integers)."""
    if x.dtype.kind not in "fc" or np.dtype(dst).kind not in "iu":
        return np.ones(len(x), dtype=bool)
    r = np.real(x).astype(np.float64)
    lo = 0 if np.dtype(dst).kind == "u" else np.iinfo(dst).min
    with np.errstate(invalid="ignore"):
        return np.isfinite(r) & (np.trunc(r) >= lo) & (np.trunc(r) <= np.iinfo(dst).max)


def _cast_kernel():
    """Inputs x_<src> (one per dtype); output o_<dst> holds row k = the k-th source converted."""
    lines = [f"o_{d}[{k} * n + i] = {cast(f'x_{s}', s, d)}" for k, s in enumerate(NUMPY_DTYPES) for d in NUMPY_DTYPES]
    return body_kernel("casts", [(s, f"x_{s}") for s in NUMPY_DTYPES], list(NUMPY_DTYPES), lines, NUMPY_DTYPES)


def test_casts_match_numpy_astype(xp):
    sources = cast_sources()
    width = max(len(x) for x in sources.values())
    padded = {s: np.resize(x, width) for s, x in sources.items()}
    dev_out = {d: xp.zeros((len(NUMPY_DTYPES), width), dtype=d) for d in NUMPY_DTYPES}
    _cast_kernel()(*[xp.asarray(padded[s]) for s in NUMPY_DTYPES], *[dev_out[d] for d in NUMPY_DTYPES])
    got = {d: xp.asnumpy(v) for d, v in dev_out.items()}
    failures, checked = [], 0
    for k, s in enumerate(NUMPY_DTYPES):
        for d in NUMPY_DTYPES:
            x = padded[s]
            ok = cast_defined(x, d)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                expected = x.astype(d)
            checked += int(ok.sum())
            try:
                np.testing.assert_array_equal(got[d][k][ok], expected[ok], err_msg=f"{s} -> {d}")
            except AssertionError as exc:
                failures.append(str(exc))
    assert checked > 1000
    assert not failures, "\n".join(failures)


LITERAL_VALUES = [True, 0, -1, 7, 0.5, -0.0, 0.1, 1e-30, 3.4e38, np.inf, -np.inf, np.nan, 1.5 - 2j, 65519.0,
                  65520.0, 2**63 - 1, 1 + 2**-8]


def _literal_kernel():
    lines, outs = [], []
    for dst in ALL_DTYPES:
        kept = []
        for v in LITERAL_VALUES:
            try:
                text = literal(v, dst)
            except (kspec.KspecTypeError, kspec.KspecOverflowError):
                continue
            kept.append(v)
            value = f"__bfloat16_as_ushort({text})" if dst == "bfloat16" else text
            row = 1 if dst == "bfloat16" else 0  # bfloat16 bits share o_uint16 (row 0 is uint16's)
            lines.append(f"if (i == {len(kept) - 1}) o_{_stored(dst)}[{row} * n + i] = {value}")
        outs.append((dst, kept))
    kernel = body_kernel("literals", [("int32", "dummy")], list(NUMPY_DTYPES), lines, ALL_DTYPES)
    return kernel, outs


def test_literals_match_numpy(xp):
    from kspec.fuse._ufunc_casts import _round_bfloat16

    kernel, outs = _literal_kernel()
    width = max(len(k) for _, k in outs)
    dev = {d: xp.zeros((2, width), dtype=d) for d in NUMPY_DTYPES}
    kernel(xp.zeros(width, dtype=np.int32), *[dev[d] for d in NUMPY_DTYPES])
    for dst, kept in outs:
        got = xp.asnumpy(dev[_stored(dst)])[1 if dst == "bfloat16" else 0][: len(kept)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if dst == "bfloat16":
                expected = bf16_bits(np.array([_round_bfloat16(float(v)) for v in kept], dtype=np.float32))
            elif BY_NAME[dst].kind == "c":
                expected = np.array([complex(v) for v in kept], dtype=dst)
            else:
                expected = np.array([np.array(v).astype(dst) for v in kept], dtype=dst)
        np.testing.assert_array_equal(got, expected, err_msg=dst)
