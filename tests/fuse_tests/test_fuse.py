"""kspec.fuse without a GPU: tracing to specs, NumPy's result dtypes, errors, pickling, compiling, building.

NumPy arrays stand in for device arrays in ``spec()`` / ``specs()`` / ``cuda_source()`` (only dtype and ndim
are read), so everything here runs in CI.
"""

from __future__ import annotations

import itertools
import json
import math
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest

import kspec
from kspec.compiler import CompileOptions, compile_source
from kspec.fuse import FusedFunction
from kspec.render import render, specialize
from kspec.spec import ElementwiseSpec, ReductionSpec, dumps_toml, load_file

A2 = np.zeros((3, 4), np.float32)
A1 = np.zeros(4, np.float32)


@kspec.fuse()
def squared_diff(x, y):
    """(x - y)^2, the seed's example."""
    return (x - y) * (x - y)


@kspec.fuse(kernel_name="sop")
def sum_of_products(x, y):
    return np.sum(x * y, axis=-1)


@kspec.fuse
def bare(x):
    return x + 1


def out_dtypes(f, *args):
    """The dtypes of what a one-kernel fused function returns, read from its spec."""
    spec = f.spec(*args)
    return [p.type for p in spec.out_params]


# -- the API ---------------------------------------------------------------------------------------------


def test_every_decorator_form_gives_a_fused_function():
    def plain(x, y):
        return x * y

    for f in (kspec.fuse(plain), kspec.fuse()(plain), kspec.fuse(kernel_name="mul")(plain), bare):
        assert isinstance(f, FusedFunction)
    assert kspec.fuse(kernel_name="mul")(plain).spec(A1, A1).name == "mul"
    assert kspec.fuse(plain).spec(A1, A1).name == "plain"
    assert kspec.fuse(lambda x: x).kernel_name == "fused_kernel"


def test_wrapper_keeps_name_doc_wrapped_and_pickles():
    assert squared_diff.__name__ == "squared_diff"
    assert squared_diff.__doc__ == "(x - y)^2, the seed's example."
    assert squared_diff.__wrapped__.__name__ == "squared_diff"
    again = pickle.loads(pickle.dumps(squared_diff))
    assert again is squared_diff
    rebuilt = pickle.loads(pickle.dumps(kspec.fuse(np.add)))  # not a module attribute: rebuilt from the function
    assert rebuilt.spec(A1, A1).operation == kspec.fuse(np.add).spec(A1, A1).operation


def test_numpy_arrays_and_scalars_run_the_plain_function():
    x, y = np.arange(10), np.arange(10)[::-1]
    np.testing.assert_array_equal(squared_diff(x, y), (x - y) ** 2)
    assert squared_diff(3, 1) == 4
    assert squared_diff(np.float32(2), 0.5) == np.float32(2.25)


def test_invalid_kernel_name_and_non_callable():
    with pytest.raises(TypeError, match="kernel_name"):
        kspec.fuse(kernel_name="not a name")(lambda x: x)
    with pytest.raises(TypeError, match="expected a function"):
        kspec.fuse(3)


def test_keyword_arguments_and_defaults_bind_like_python():
    @kspec.fuse
    def axpy(x, y, a=2.0):
        return a * x + y

    assert axpy.spec(A1, y=A1).in_params[2].type == "float64"
    assert axpy.spec(A1, A1, a=np.float32(3)).in_params[2].type == "float32"
    with pytest.raises(TypeError, match="axpy"):
        axpy.spec(A1, z=A1)


# -- the spec: readable, named after the function's arguments -------------------------------------------


def test_elementwise_spec_names_parameters_and_writes_one_line_per_step():
    spec = squared_diff.spec(A1, A1)
    assert isinstance(spec, ElementwiseSpec)
    assert [p.name for p in spec.in_params] == ["x", "y"]
    assert [(p.name, p.type) for p in spec.out_params] == [("out0", "float32")]
    lines = spec.operation.splitlines()
    assert lines[0].startswith("const float t0 = (x - y);")  # computed once: equal expressions are shared
    assert lines[1].startswith("const float t1 = (t0 * t0);")
    assert lines[-1] == "out0 = t1;"
    assert "test_fuse.py" in lines[0]  # each step names its line


def test_reduction_spec_has_map_reduce_and_post_map():
    spec = sum_of_products.spec(A2, A1)
    assert isinstance(spec, ReductionSpec)
    assert spec.name == "sop" and spec.reduce_expr == "a + b" and spec.identity == "0"
    assert spec.map_expr == "sop_map(x, y)" and "sop_map" in spec.preamble
    assert spec.reduce_type == "float32"

    @kspec.fuse
    def l2norm(x):
        return np.sqrt((x * x).sum(axis=1))

    spec = l2norm.spec(A2)
    assert "kspec::uf::sqrt(a)" in spec.post_map_expr.replace(" ", "") or "sqrt" in spec.post_map_expr
    assert spec.post_map_expr.splitlines()[-1].startswith("out0 = ")


def test_scalars_are_parameters_not_constants():
    @kspec.fuse
    def axpy(a, x, y):
        return a * x + y

    spec = axpy.spec(2.0, A1, A1)
    assert [(p.name, p.type) for p in spec.in_params] == [("a", "float64"), ("x", "float32"), ("y", "float32")]
    assert "2.0" not in spec.operation
    assert spec.out_params[0].type == "float32"  # a Python float is weak (NEP 50)
    assert axpy.spec(np.float64(2.0), A1, A1).out_params[0].type == "float64"  # a NumPy scalar is not


def test_reserved_argument_names_are_renamed():
    def f(i, _x, int):
        return i + _x + int

    spec = kspec.fuse(f).spec(A1, A1, A1)
    names = [p.name for p in spec.in_params]
    assert names == ["i_", "x", "int_"]


def test_python_loops_unroll_and_constants_fold_into_the_code():
    @kspec.fuse
    def poly(x):
        acc = x * 0
        for k in range(3):
            acc = acc * x + (k + 1)
        return acc

    assert poly.spec(A1).operation.count("multiply") == 4


def test_in_place_update_writes_into_the_argument():
    @kspec.fuse
    def update(p, g, lr):
        p -= lr * g

    spec = update.spec(A1, A1, 0.1)
    assert [p.name for p in spec.out_params] == ["p"]
    assert [p.name for p in spec.in_params] == ["g", "lr"]
    assert spec.operation.splitlines()[-1].startswith("p = ")


def test_several_outputs_and_returned_arguments():
    @kspec.fuse
    def several(x, y):
        return x + y, x - y, x

    spec = several.spec(A1, A1)
    assert [p.name for p in spec.out_params] == ["out0", "out1"]


def test_outputs_with_different_array_dependencies_get_their_own_kernel():
    @kspec.fuse
    def two(x, y):
        return x * 2, x + y  # NumPy shapes: x.shape and broadcast(x, y)

    specs = two.specs(A1, A2)
    assert len(specs) == 2
    with pytest.raises(kspec.FuseError, match="use .specs"):
        two.spec(A1, A2)


def test_reductions_split_into_several_kernels_where_cupy_refuses():
    @kspec.fuse
    def centered(x):
        return (x - x.sum(axis=1, keepdims=True)).max()

    specs = centered.specs(A2)
    assert [s.KIND for s in specs] == ["reduction", "reduction"]
    assert "sum_result" in [p.name for p in specs[1].in_params]

    @kspec.fuse
    def normalized(x):
        return x / np.sqrt((x * x).sum())

    specs = normalized.specs(A1)
    assert [s.KIND for s in specs] == ["reduction", "elementwise"]
    assert "sqrt" in specs[0].post_map_expr  # the work on the sum alone runs in its post-map


# -- NumPy's result dtypes, systematically -----------------------------------------------------------------

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]
SCALARS = [True, 3, 2.5, 1j, np.int8(3), np.uint16(3), np.float32(2), np.float64(2)]

BINARY = {
    "add": lambda x, y: x + y, "subtract": lambda x, y: x - y, "multiply": lambda x, y: x * y,
    "divide": lambda x, y: x / y, "floor_divide": lambda x, y: x // y, "remainder": lambda x, y: x % y,
    "power": lambda x, y: x ** y, "and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y,
    "lshift": lambda x, y: x << y, "less": lambda x, y: x < y, "equal": lambda x, y: x == y,
    "maximum": np.maximum, "arctan2": np.arctan2, "hypot": np.hypot, "copysign": np.copysign,
    "logaddexp": np.logaddexp, "fmod": np.fmod, "logical_and": np.logical_and, "heaviside": np.heaviside,
}
UNARY = {
    "negative": lambda x: -x, "absolute": abs, "invert": lambda x: ~x, "sin": np.sin, "exp": np.exp,
    "log1p": np.log1p, "sqrt": np.sqrt, "cbrt": np.cbrt, "square": np.square, "reciprocal": np.reciprocal,
    "floor": np.floor, "rint": np.rint, "isnan": np.isnan, "signbit": np.signbit, "sign": np.sign,
    "conj": np.conj, "real": np.real, "imag": np.imag, "astype_f32": lambda x: x.astype(np.float32),
    "where": lambda x: np.where(x, x, 0), "clip": lambda x: np.clip(x, 1, 2), "arccosh": np.arccosh,
    "logical_not": np.logical_not, "deg2rad": np.deg2rad,
}


def _numpy_dtypes(fn, *args):
    """NumPy's result dtypes on real arrays, or None when NumPy refuses."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = fn(*args)
        except (TypeError, ValueError, OverflowError):
            return None
    outs = out if isinstance(out, tuple) else (out,)
    return [np.asarray(o).dtype.name for o in outs]


def _fused_dtypes(fn, *args):
    try:
        specs = kspec.fuse(fn).specs(*args)
    except kspec.FuseError:
        return None
    if not specs:  # the function returns its argument (numpy.real of a real array)
        return [args[0].dtype.name]
    (spec,) = specs
    return [p.type for p in spec.out_params]


def _check_against_numpy(fn, *args):
    with np.errstate(all="ignore"):
        expected = _numpy_dtypes(fn, *args)
    got = _fused_dtypes(fn, *args)
    if expected is not None and all(a.dtype.kind == "c" for a in args if isinstance(a, np.ndarray)) and got is None:
        return  # NumPy's complex loops that kspec does not support are reported by the ufunc library's tests
    assert got == expected, f"{args}: kspec {got}, NumPy {expected}"


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_result_dtypes_match_numpy_for_every_pair_of_dtypes(name):
    fn = BINARY[name]
    for a, b in itertools.product(DTYPES, DTYPES):
        _check_against_numpy(fn, np.ones(2, a), np.ones(2, b))


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_result_dtypes_with_python_and_numpy_scalars_match_numpy(name):
    fn = BINARY[name]
    for a, s in itertools.product(DTYPES, SCALARS):
        _check_against_numpy(fn, np.ones(2, a), s)
        _check_against_numpy(lambda x, y: fn(y, x), np.ones(2, a), s)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_result_dtypes_match_numpy(name):
    for a in DTYPES:
        _check_against_numpy(UNARY[name], np.ones(2, a))


@pytest.mark.parametrize("op", ["sum", "prod", "max", "min", "all", "any"])
def test_reduction_result_dtypes_match_numpy(op):
    for a in DTYPES:
        x = np.ones((2, 3), a)
        for axis in (None, 0, (0, 1), -1):
            fn = _reducer(op, axis)
            expected = _numpy_dtypes(fn, x)
            assert _fused_dtypes(fn, x) == expected, (op, a, axis)
    if op in ("sum", "prod"):
        fn = lambda v: getattr(np, op)(v, axis=1, dtype=np.float32)  # noqa: E731
        assert _fused_dtypes(fn, np.ones((2, 3), np.int8)) == ["float32"]


def _reducer(op, axis):
    return lambda v: getattr(v, op)(axis=axis)


def test_python_scalar_arithmetic_stays_weak_as_in_python():
    def f(x, a):
        return x * (a * 2 + 1)  # a * 2 + 1 is a Python float: weak against float32

    assert _fused_dtypes(f, np.ones(2, np.float32), 1.5) == ["float32"]

    def g(x, a):
        return x * np.multiply(a, 2)  # a NumPy ufunc on Python numbers gives a NumPy float64

    assert _fused_dtypes(g, np.ones(2, np.float32), 1.5) == ["float64"]


# -- errors name the function and the line -----------------------------------------------------------------


def _line_of(marker: str) -> int:
    import inspect

    src, start = inspect.getsourcelines(sys.modules[__name__])
    return next(k + 1 for k, line in enumerate(src) if marker in line)


def test_data_dependent_branch_is_a_type_error_naming_function_and_line():
    @kspec.fuse
    def relu(x):
        if x > 0:  # MARK-branch
            return x
        return 0 * x

    with pytest.raises(TypeError, match=r"function 'relu' \(.*test_fuse.py:%d\).*data-dependent" % _line_of("MARK-branch")):
        relu.spec(A1)


@pytest.mark.parametrize(
    "fn, words",
    [
        (lambda x: x @ x, "matmul"),
        (lambda x: x.reshape(4), "x.reshape"),
        (lambda x: (x + 1)[0], "only array arguments"),
        (lambda x: x[x > 0], "basic indexing"),
        (lambda x: np.dot(x, x), "numpy.dot"),
        (lambda x: x.shape[0] * x, ".shape"),
        (lambda x: math.sin(x), "float()"),
        (lambda x: np.bitwise_and(x, 1), "bitwise_and"),
        (lambda x: np.add.accumulate(x), "accumulate"),
        (lambda x: x.mean(), "x.mean"),
        (lambda x: x * np.ones(4), "arguments"),
    ],
)
def test_unsupported_operations_name_the_operation_and_line(fn, words):
    with pytest.raises(kspec.FuseError) as info:
        kspec.fuse(fn).spec(A1)
    message = str(info.value)
    assert words in message and "test_fuse.py:" in message, message


def test_in_place_cast_follows_same_kind():
    def f(x):
        x += 1.5

    with pytest.raises(TypeError, match="Cannot cast .*float64.* to .*int32.*same_kind"):
        kspec.fuse(f).spec(np.zeros(3, np.int32))


def test_axis_errors():
    with pytest.raises(kspec.AxisError, match="axis 2 is out of bounds for array of dimension 2"):
        kspec.fuse(lambda x: x.sum(axis=2)).spec(A2)
    with pytest.raises(ValueError, match="duplicate"):
        kspec.fuse(lambda x: x.sum(axis=(0, -2))).spec(A2)


def test_argument_types_are_checked():
    with pytest.raises(TypeError, match="argument 0 is a list"):
        kspec.fuse(lambda x: x).spec([1, 2])
    with pytest.raises(TypeError, match="does not support"):
        kspec.fuse(lambda x: x).spec(np.zeros(2, "U3"))


def test_scalar_only_result_is_refused_with_a_reason():
    with pytest.raises(kspec.FuseError, match="scalar arguments and constants only"):
        kspec.fuse(lambda x, a: (x + a, np.sqrt(a))).specs(A1, 2.0)


def test_traced_values_do_not_escape():
    kept = []

    def f(x):
        kept.append(x)
        return x + 1

    kspec.fuse(f).spec(A1)
    with pytest.raises(kspec.FuseError, match="after its function returned"):
        kept[0] + 1


# -- CuPy's functions on traced values (CuPy's own hooks; skipped where CuPy is not installed) --------------


def test_cupy_functions_are_traced():
    cp = pytest.importorskip("cupy")

    @kspec.fuse
    def f(x, y):
        z = cp.sin(x) + cp.true_divide(y, 2)
        w = cp.where(x > y, z, cp.clip(y, 0, 1))
        cp.add(x, w, out=x)
        return cp.sum(w, axis=1), cp.amax(z, axis=0, keepdims=True)

    specs = f.specs(A2, A2)
    kinds = sorted(s.KIND for s in specs)
    assert kinds == ["elementwise", "reduction", "reduction"]
    text = "\n".join(s.to_data().get("preamble", "") + s.to_data().get("operation", "") for s in specs)
    assert "sin" in text and "maximum" in text


# -- compiled with NVRTC, saved as a spec file, built ahead of time --------------------------------------


def _compile_all(f, *args):
    for spec in f.specs(*args):
        scalars = frozenset(p.name for p, a in zip(spec.in_params, args) if not isinstance(a, np.ndarray))
        module = render(specialize(spec, {}, scalars=scalars))
        program = compile_source(module.source, name=module.name, options=CompileOptions(arch="sm_90"),
                                 name_expressions=module.name_expressions, needs=module.needs)
        assert set(program.lowered_names) == set(module.name_expressions)


@kspec.fuse
def kitchen_sink(x, y, a):
    z = np.exp(-x * x) * a + np.where(y > 0, y, -y) // 3
    w = z.astype(np.float16) ** 2
    x += w
    return z.sum(axis=0), np.maximum(w, 1).max(), (z - z.min()).prod(axis=1, keepdims=True)


def test_fused_kernels_compile_for_several_dtypes():
    _compile_all(kitchen_sink, A2, A2, 0.5)
    _compile_all(kitchen_sink, np.zeros((2, 2), np.float64), np.zeros(2, np.int32), np.float32(2))
    _compile_all(squared_diff, np.zeros(3, np.complex64), np.zeros(3, np.float16))
    _compile_all(kspec.fuse(lambda x: (x.any(axis=0), x.all(), x.sum())), np.zeros((2, 3), bool))


def test_cuda_source_shows_every_kernel():
    source = kitchen_sink.cuda_source(A2, A2, 0.5)
    specs = kitchen_sink.specs(A2, A2, 0.5)
    assert [s.KIND for s in specs] == ["reduction"] * 4 + ["elementwise"]  # the in-place update runs last
    assert source.count("Generated by kspec") == len(specs)


def test_fused_spec_round_trips_through_a_spec_file_and_builds(tmp_path):
    spec = kspec.fuse(kernel_name="sqdiff")(squared_diff.__wrapped__).spec(A1, A1)
    red = sum_of_products.spec(A2, A1)
    path = tmp_path / "fused.toml"
    path.write_text(dumps_toml([spec, red]))
    loaded = load_file(path)
    assert [s.name for s in loaded] == ["sqdiff", "sop"]
    assert loaded[0] == spec and loaded[1] == red
    out = tmp_path / "build"
    done = subprocess.run([sys.executable, "-m", "kspec", "build", str(path), "-o", str(out), "--arch", "sm_90"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    manifest = (out / "manifest.json").read_text()
    assert '"sqdiff"' in manifest and '"sop"' in manifest
    library = kspec.load(path, binaries=out)
    assert library.sqdiff.spec == spec and library.sop.spec == red


def test_scalar_parameters_are_declared_so_builds_precompile_them():
    @kspec.fuse
    def axpy(a, x, y):
        return a * x + y

    spec = axpy.spec(2.0, A1, A1)
    assert spec.scalars == ("a",)
    from kspec.build import plan_build

    units = plan_build([spec], ["sm_90"]).units
    assert [u.scalars for u in units] == [frozenset({"a"})]


def test_importing_fuse_and_decorating_load_no_tracer_and_no_spec_models():
    """``import kspec.fuse`` and ``@kspec.fuse`` at a module's top load neither the tracer nor the spec models
    (pydantic): kspec.cupy.enable() binds ``cupy.fuse`` to kspec's in programs that may never call a fused
    function, and CuPy-style constructor calls need no spec model either. The first call traces and loads them."""
    from helpers.child_env import child_env

    script = (
        "import json, sys\n"
        "import numpy as np\n"
        "import kspec.fuse\n"
        "@kspec.fuse\n"
        "def f(x, y):\n"
        "    return x * y + 1\n"
        "before = sorted(m for m in ('pydantic', 'kspec.fuse._program', 'kspec.spec._models') if m in sys.modules)\n"
        "spec = f.spec(np.ones(3, np.float32), np.ones(3, np.float32))\n"
        "print(json.dumps([before, 'kspec.fuse._program' in sys.modules, type(spec).__name__]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], env=child_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    before, traced, kind = json.loads(done.stdout.splitlines()[-1])
    assert before == [] and traced and kind == "ElementwiseSpec"
