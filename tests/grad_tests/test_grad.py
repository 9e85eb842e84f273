"""Gradients declared in an elementwise spec (issue [AD]): the ``grad`` table's checks, the backward spec kspec
renders from it, and ``kspec.vjp`` on the CPU device against NumPy's analytic gradients and finite differences.
GPU: tests/grad_tests/test_grad_gpu.py."""

from __future__ import annotations

import numpy as np
import pytest

import kspec
from kspec.grad import backward_spec
from kspec.spec import ElementwiseSpec, load_file

from helpers.child_env import child_env
from helpers.cycles import collector_off
from helpers.grad_cases import fused_rowprod, fused_rowsum, numeric_vjp

FIELDS = dict(name="sinmul", in_params="T x, T y", out_params="T z", operation="z = x * y + sin(x);")
GRAD = {"x": "grad_z * (y + cos(x))", "y": "grad_z * x"}


def _spec(**changes):
    return ElementwiseSpec(**{**FIELDS, "grad": GRAD, **changes})


# -- the table's checks ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, field, message",
    [
        (dict(grad={"w": "grad_z"}), "grad.w", "'w' is not an input; the differentiable inputs are: x, y"),
        (dict(grad={"x": "grad_q * 2"}), "grad.x", "'grad_q' is not an output's gradient; this kernel's are: grad_z"),
        (dict(grad={"x": "  "}), "grad.x", "the gradient of 'x' is empty"),
        (dict(grad={}), "grad", "is empty"),
        (dict(grad="grad_z"), "grad", "expected a table of input name -> gradient expression"),
        (dict(in_params="raw T x, T y", grad={"x": "grad_z"}), "grad.x", "'x' is a raw input"),
        (dict(in_params="int32 x, T y", grad={"x": "grad_z"}), "grad.x", "'x' is a int32 input, which has no gradient"),
        (dict(in_params="T x, T grad_y", grad={"x": "grad_z"}), "grad", "parameter 'grad_y' starts with 'grad_'"),
        (dict(out_params="raw T z", grad={"x": "grad_z"}), "grad", "raw output 'z' has no gradient"),
    ],
)
def test_a_bad_grad_table_names_the_field(changes, field, message):
    with pytest.raises(kspec.SpecError, match=f"field '{field}'") as info:
        _spec(**changes)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError) and "kernel 'sinmul'" in str(info.value)


def test_grad_round_trips_through_plain_data_and_leaves_other_specs_alone():
    spec = _spec()
    assert spec.to_data()["grad"] == GRAD
    assert ElementwiseSpec(**{k: v for k, v in spec.to_data().items() if k != "kind"}) == spec
    assert "grad" not in ElementwiseSpec(**FIELDS).to_data()  # no table: the data (and so the key) is unchanged


def test_a_spec_file_declares_grad(tmp_path):
    path = tmp_path / "k.toml"
    path.write_text(
        'schema = 1\n[[kernel]]\nkind = "elementwise"\nname = "sq"\nin_params = "float32 x"\nout_params = "float32 y"\n'
        'operation = "y = x * x;"\ngrad = { x = "grad_y * 2 * x" }\n'
    )
    (spec,) = load_file(path)
    assert spec.grad == {"x": "grad_y * 2 * x"}


# -- the backward spec -----------------------------------------------------------------------------------------


def test_backward_spec_reads_inputs_outputs_and_their_gradients():
    back = backward_spec(_spec(in_params="T x, T y, raw float32 w"))
    assert back.name == "sinmul_backward"
    assert [p.to_str() for p in back.in_params] == ["T x", "T y", "raw float32 w", "T z", "T grad_z"]
    assert [p.to_str() for p in back.out_params] == ["T grad_x", "T grad_y"]
    assert back.operation == "grad_x = (grad_z * (y + cos(x)));\ngrad_y = (grad_z * x);"


def test_backward_spec_needs_a_table():
    with pytest.raises(kspec.SpecError, match="kernel 'sinmul': field 'grad': declares no gradient"):
        backward_spec(ElementwiseSpec(**FIELDS))


# -- kspec.vjp on the CPU device -------------------------------------------------------------------------------


def test_vjp_matches_finite_differences_with_broadcasting(on_cpu_device):
    kernel = kspec.ElementwiseKernel.from_spec(_spec())
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((4, 5)), rng.standard_normal((5,))
    g = rng.standard_normal((4, 5))
    z, back = kspec.vjp(kernel, x, y)
    np.testing.assert_allclose(z, x * y + np.sin(x), rtol=1e-12)
    gx, gy = back(g)
    assert gx.shape == x.shape and gy.shape == y.shape  # y's gradient summed over the axis it was broadcast along
    np.testing.assert_allclose(gx, g * (y + np.cos(x)), rtol=1e-12)
    np.testing.assert_allclose(gy, (g * x).sum(axis=0), rtol=1e-12)
    fx, fy = numeric_vjp(lambda a, b: a * b + np.sin(a), [x, y], g)
    np.testing.assert_allclose(gx, fx, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gy, fy, rtol=1e-6, atol=1e-8)


def test_vjp_of_a_kept_axis_and_a_partial_table(on_cpu_device):
    kernel = kspec.ElementwiseKernel.from_spec(_spec(grad={"y": "grad_z * x"}))
    x, y = np.arange(6.0).reshape(2, 3), np.array([[2.0], [3.0]])
    _, back = kspec.vjp(kernel, x, y)
    gx, gy = back(np.ones((2, 3)))
    assert gx is None
    np.testing.assert_allclose(gy, x.sum(axis=1, keepdims=True))


def test_vjp_refuses_integer_inputs_and_kernels_without_a_table(on_cpu_device):
    kernel = kspec.ElementwiseKernel.from_spec(_spec())
    with pytest.raises(kspec.KspecTypeError, match="input 'x' is int64; a gradient needs a floating or complex input"):
        kspec.vjp(kernel, np.arange(3), np.arange(3))
    plain = kspec.ElementwiseKernel("T x", "T y", "y = x", "plain_copy")
    with pytest.raises(kspec.KspecValueError, match="kernel 'plain_copy' declares no gradient"):
        kspec.vjp(plain, np.ones(3))
    with pytest.raises(kspec.KspecTypeError, match="the backward takes one gradient per output"):
        kspec.vjp(kernel, np.ones(3), np.ones(3))[1]()


# -- grad = "auto" ---------------------------------------------------------------------------------------------

GELU = dict(
    name="bias_gelu", in_params="T x, T b", out_params="T y",
    operation="T v = x + b;\nT u = 0.7978845608028654 * (v + 0.044715 * v * v * v);\ny = 0.5 * v * (1 + tanh(u));",
    grad="auto",
)


def _gelu(x, b):
    v = x + b
    return 0.5 * v * (1 + np.tanh(0.7978845608028654 * (v + 0.044715 * v**3)))


@pytest.mark.parametrize(
    "fields, reference",
    [
        (dict(_spec(grad="auto").to_data()), lambda x, y: x * y + np.sin(x)),
        (GELU, _gelu),
        (dict(FIELDS, operation="z = x > 0 ? x * y : 0.1 * x / y;", grad="auto"),
         lambda x, y: np.where(x > 0, x * y, 0.1 * x / y)),
        (dict(FIELDS, operation="const T t = x * x;\nz = t / (1 + t) + exp(-y) * (T)2 + pow(x, 3.0) + fmax(x, y);",
              grad="auto"),
         lambda x, y: x * x / (1 + x * x) + np.exp(-y) * 2 + x**3 + np.maximum(x, y)),
    ],
    ids=["sinmul", "bias_gelu", "ternary", "locals_and_calls"],
)
def test_auto_gradients_match_finite_differences(on_cpu_device, fields, reference):
    spec = ElementwiseSpec(**{k: v for k, v in fields.items() if k != "kind"})
    kernel = kspec.ElementwiseKernel.from_spec(spec)
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((3, 4)), rng.uniform(0.5, 1.5, (4,))
    g = rng.standard_normal((3, 4))
    out, back = kspec.vjp(kernel, x, y)
    np.testing.assert_allclose(out, reference(x, y), rtol=1e-12)
    numeric = numeric_vjp(reference, [x, y], g)
    for got, want in zip(back(g), numeric):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_auto_with_two_outputs_one_read_by_the_other(on_cpu_device):
    spec = ElementwiseSpec(name="two_out", in_params="T x, T y", out_params="T z, T w",
                           operation="z = x * x;\nw = z * y;", grad="auto")  # fmt: skip
    kernel = kspec.ElementwiseKernel.from_spec(spec)
    x, y = np.array([1.0, 2.0, -3.0]), np.array([0.5, 4.0, 2.0])
    gz, gw = np.array([1.0, 0.0, 2.0]), np.array([0.0, 1.0, 3.0])
    _, back = kspec.vjp(kernel, x, y)
    gx, gy = back(gz, gw)
    np.testing.assert_allclose(gx, gz * 2 * x + gw * y * 2 * x)  # w = x^2 y
    np.testing.assert_allclose(gy, gw * x * x)


def test_auto_covers_only_the_inputs_it_reads_differentiably():
    spec = ElementwiseSpec(name="masked", in_params="T x, T m, int32 n", out_params="T z",
                           operation="z = m > 0 ? x * n : x;", grad="auto")  # fmt: skip
    assert spec.backward()[0] == ("x",)


@pytest.mark.parametrize(
    "operation, message",
    [
        ("if (x > 0) z = x; else z = y;", "'if' in"),
        ("z = x[0];", "indexing '[...]'"),
        ("z = x; z += y;", "operator '+='"),
        ("z = my_fn(x);", "no derivative for the call my_fn(...) (known: abs, acos"),
        ("T t = x; t = t * 2; z = t;", "'t' is assigned twice"),
        ("q = x;", "'q' is assigned but is neither an output nor a local declared here"),
        ("auto t = x; z = t;", "local 't' is declared 'auto'"),
    ],
)
def test_auto_names_what_it_cannot_differentiate(operation, message):
    with pytest.raises(kspec.SpecError, match="field 'grad'") as info:
        ElementwiseSpec(**dict(FIELDS, operation=operation, grad="auto"))
    assert "'auto' cannot differentiate this operation" in str(info.value) and message in str(info.value)


def test_auto_refuses_loop_prep():
    with pytest.raises(kspec.SpecError, match="loop_prep or after_loop"):
        ElementwiseSpec(**dict(FIELDS, loop_prep="int k = 0;", grad="auto"))


def test_the_constructor_takes_grad_and_checks_it(on_cpu_device):
    k = kspec.ElementwiseKernel("T x", "T y", "y = x * x * x;", "cube", grad="auto")
    assert k.spec.grad == "auto"
    _, back = kspec.vjp(k, np.array([1.0, -2.0]))
    np.testing.assert_allclose(back(np.array([1.0, 0.5]))[0], [3.0, 6.0])
    assert kspec.ElementwiseKernel("T x", "T y", "y = x * x * x;", "cube", grad="auto") is not None  # remembered
    with pytest.raises(kspec.SpecError, match="field 'grad.w'"):
        kspec.ElementwiseKernel("T x", "T y", "y = x;", "bad_grad", grad={"w": "grad_y"})


def test_kspec_build_precompiles_the_backward_beside_its_forward():
    from kspec.spec import with_backwards

    specs = with_backwards([_spec(instantiations=[{"T": ["float32", "float64"]}]), ElementwiseSpec(**FIELDS)])
    assert [s.name for s in specs] == ["sinmul", "sinmul_backward", "sinmul_backward_rowsum_x", "sinmul_backward_rowsum_y",
                                       "sinmul", "kspec_grad_sum_float32", "kspec_grad_sum_float64"]  # fmt: skip


def test_plan_build_has_a_unit_for_the_backward():
    from kspec.build import plan_build

    spec = _spec(instantiations=[{"T": "float32"}])
    plan = plan_build([spec], ["sm_90"])
    assert sorted(u.spec.name for u in plan.units) == ["kspec_grad_sum_float32", "sinmul", "sinmul_backward",
                                                       "sinmul_backward_rowsum_x", "sinmul_backward_rowsum_y"]  # fmt: skip


_SERVE_BACKWARD = """
import json, sys
import numpy as np, kspec
kspec.use_device("cpu")
k = kspec.load(sys.argv[1], binaries=sys.argv[2])["served_cube"]
y, back = kspec.vjp(k, np.array([1.0, 2.0], dtype=np.float32))
(g,) = back(np.ones(2, dtype=np.float32))
m = kspec.load(sys.argv[1], binaries=sys.argv[2])["served_mul"]
y, back = kspec.vjp(m, np.ones((3, 2), dtype=np.float32), np.array([1.0, 2.0], dtype=np.float32))
gx, gw = back(np.ones((3, 2), dtype=np.float32))  # w broadcast over 3 rows: its gradient summed, from the binaries
a = kspec.load(sys.argv[1], binaries=sys.argv[2])["served_affine"]
y, back = kspec.vjp(a, np.ones((3, 2), dtype=np.float32), np.array([1.0, 2.0], dtype=np.float32), np.ones(2, dtype=np.float32))
_, aw, ac = back(np.ones((3, 2), dtype=np.float32))  # w and c broadcast: no variant built for both, the second pass
route = kspec.grad.summed_backward(a).last_route
print(json.dumps({"g": g.tolist(), "gw": gw.tolist(), "aw": aw.tolist(), "ac": ac.tolist(), "route": route,
                  "log": [[e.kernel, e.source] for e in kspec.compile_log()]}))
"""


def test_a_precompiled_backward_is_served_with_compiles_forbidden(on_cpu_device, tmp_path):
    import json
    import subprocess
    import sys

    spec = tmp_path / "cube.toml"
    spec.write_text(
        'schema = 1\n[[kernel]]\nkind = "elementwise"\nname = "served_cube"\nin_params = "T x"\nout_params = "T y"\n'
        'operation = "y = x * x * x;"\ngrad = "auto"\ninstantiations = [{T = "float32"}]\n'
        '[[kernel]]\nkind = "elementwise"\nname = "served_mul"\nin_params = "T x, T w"\nout_params = "T y"\n'
        'operation = "y = x * w;"\ngrad = "auto"\ninstantiations = [{T = "float32"}]\n'
        '[[kernel]]\nkind = "elementwise"\nname = "served_affine"\nin_params = "T x, T w, T c"\nout_params = "T y"\n'
        'operation = "y = x * w + c;"\ngrad = "auto"\ninstantiations = [{T = "float32"}]\n'
    )
    out = tmp_path / "binaries"
    env = child_env(KSPEC_CACHE_DIR=str(tmp_path / "build-cache"))  # the checkout, then the parent's path
    done = subprocess.run([sys.executable, "-m", "kspec", "build", str(spec), "-o", str(out), "--arch", "host"],
                          env=env, capture_output=True, text=True, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    env.update(KSPEC_CACHE_DIR=str(tmp_path / "empty"), KSPEC_COMPILE="never")
    done = subprocess.run([sys.executable, "-c", _SERVE_BACKWARD, str(spec), str(out)], env=env, capture_output=True,
                          text=True, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    served = json.loads(done.stdout.strip().splitlines()[-1])
    assert served["g"] == [3.0, 12.0] and served["gw"] == [3.0, 3.0]
    assert served["aw"] == [3.0, 3.0] and served["ac"] == [3.0, 3.0] and served["route"] == "second pass"
    assert sorted(map(tuple, served["log"])) == [
        ("kspec_grad_sum_float32", "binary"), ("served_affine", "binary"), ("served_affine_backward", "binary"),
        ("served_cube", "binary"), ("served_cube_backward", "binary"),
        ("served_mul", "binary"), ("served_mul_backward_rowsum_w", "binary"),
    ]  # w is broadcast: its gradient summed in the backward's pass, by the row-sum variant the build precompiled


# -- fused functions -------------------------------------------------------------------------------------------


@kspec.fuse
def fused_act(x, b):
    v = x + b
    return v * np.tanh(v) + np.sin(x) / np.maximum(b, 0.5) - np.square(x)


def test_vjp_of_a_fused_function_matches_finite_differences(on_cpu_device):
    rng = np.random.default_rng(5)
    x, b, g = rng.standard_normal((3, 4)), rng.standard_normal(4), rng.standard_normal((3, 4))

    def reference(x, b):
        v = x + b
        return v * np.tanh(v) + np.sin(x) / np.maximum(b, 0.5) - x * x

    out, back = kspec.vjp(fused_act, x, b)
    np.testing.assert_allclose(out, reference(x, b), rtol=1e-12)
    gx, gb = back(g)
    fx, fb = numeric_vjp(reference, [x, b], g)
    np.testing.assert_allclose(gx, fx, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gb, fb, rtol=1e-6, atol=1e-8)


@kspec.fuse
def fused_normalized(x, b):
    e = np.exp(x * b)
    return e / e.sum(axis=1, keepdims=True), np.tanh(x).sum(axis=0)


def test_vjp_of_a_fused_reduction(on_cpu_device):
    rng = np.random.default_rng(6)
    x, g = rng.standard_normal((3, 4)), rng.standard_normal(3)
    out, back = kspec.vjp(fused_rowsum, x)
    np.testing.assert_allclose(out, (x * x).sum(axis=1))
    (gx,) = back(g)
    np.testing.assert_allclose(gx, 2 * x * g[:, None], rtol=1e-12)


def test_vjp_of_a_fused_function_of_several_kernels_and_two_results(on_cpu_device):
    rng = np.random.default_rng(7)
    x, b = rng.standard_normal((3, 4)), rng.standard_normal(4)
    g1, g2 = rng.standard_normal((3, 4)), rng.standard_normal(4)

    def reference(x, b):
        e = np.exp(x * b)
        return e / e.sum(axis=1, keepdims=True), np.tanh(x).sum(axis=0)

    assert len(fused_normalized.specs(x, b)) > 1
    (y1, y2), back = kspec.vjp(fused_normalized, x, b)
    np.testing.assert_allclose(y1, reference(x, b)[0], rtol=1e-12)
    np.testing.assert_allclose(y2, reference(x, b)[1], rtol=1e-12)
    gx, gb = back(g1, g2)
    fx1, fb1 = numeric_vjp(lambda x, b: reference(x, b)[0], [x, b], g1)
    fx2, fb2 = numeric_vjp(lambda x, b: reference(x, b)[1], [x, b], g2)
    np.testing.assert_allclose(gx, fx1 + fx2, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gb, fb1 + fb2, rtol=1e-6, atol=1e-8)
    gx, gb = back(None, g2)  # a result without a gradient counts as zero
    np.testing.assert_allclose(gx, fx2, rtol=1e-6, atol=1e-8)
    assert gb is None


def test_a_fused_vjp_leaves_no_reference_cycles(on_cpu_device):
    """The forward's values and the gradients are freed when the caller drops them, not when the garbage collector
    next runs: a training loop's full-size gradients would otherwise pile up between collections. (The reverse
    pass's recursive helpers were closures that called themselves: a cycle holding the gradients.)"""
    rng = np.random.default_rng(8)
    x, b = rng.standard_normal((3, 4)), rng.standard_normal(4)
    g1, g2 = rng.standard_normal((3, 4)), rng.standard_normal(4)
    kspec.vjp(fused_normalized, x, b)[1](g1, g2)  # warm: programs and kernels made and kept
    with collector_off() as held:
        for _ in range(3):
            (y1, y2), back = kspec.vjp(fused_normalized, x, b)
            gx, gb = back(g1, g2)
            del y1, y2, back, gx, gb
        assert not held()


def test_vjp_of_a_fused_function_names_the_kernel_it_cannot_differentiate(on_cpu_device):
    with pytest.raises(kspec.KspecNotImplementedError, match=r"fused function 'fused_rowprod': its kernel 1 of 1 \(reduction"):
        kspec.vjp(fused_rowprod, np.ones((2, 3)))


# -- reductions ------------------------------------------------------------------------------------------------

WSSQ = dict(name="wssq", in_params="T x, T w", out_params="T y", map_expr="x * x * w", reduce_expr="a + b",
            post_map_expr="y = a", identity="0")  # fmt: skip


@pytest.mark.parametrize("axis, keepdims", [(None, False), (1, False), (0, True), ((0, 1), False)])
def test_vjp_of_a_sum_reduction_with_auto(on_cpu_device, axis, keepdims):
    from kspec.spec import ReductionSpec

    kernel = kspec.ReductionKernel.from_spec(ReductionSpec(**WSSQ, grad="auto"))
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((3, 4)), rng.standard_normal(4)
    y, back = kspec.vjp(kernel, x, w, axis=axis, keepdims=keepdims)
    want = (x * x * w).sum(axis=axis, keepdims=keepdims)
    np.testing.assert_allclose(y, want, rtol=1e-12)
    g = rng.standard_normal(np.shape(want))
    gx, gw = back(np.asarray(g))
    fx, fw = numeric_vjp(lambda a, b: (a * a * b).sum(axis=axis, keepdims=keepdims), [x, w], g)
    np.testing.assert_allclose(gx, fx, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gw, fw, rtol=1e-6, atol=1e-8)


def test_a_product_reduction_takes_a_table_reading_the_output(on_cpu_device):
    k = kspec.ReductionKernel("T x", "T y", "x", "a * b", "y = a", "1", "prod_grad", grad={"x": "grad_y * y / x"})
    x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 0.5]])
    y, back = kspec.vjp(k, x, axis=1)
    np.testing.assert_allclose(y, [6.0, 10.0])
    (gx,) = back(np.array([1.0, 2.0]))
    np.testing.assert_allclose(gx, [[6.0, 3.0, 2.0], [5.0, 4.0, 40.0]])


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(reduce_expr="a * b"), "'auto' differentiates sums (reduce_expr 'a + b') and minima / maxima"),
        (dict(post_map_expr="y = a / _in_ind.size()"), "'auto' differentiates sums"),
        (dict(map_expr="x * _J"), "cannot differentiate a map_expr that reads '_J'"),
    ],
)
def test_auto_on_a_reduction_names_what_it_cannot_do(changes, message):
    from kspec.spec import ReductionSpec

    with pytest.raises(kspec.SpecError, match="field 'grad'") as info:
        ReductionSpec(**{**WSSQ, **changes, "grad": "auto"})
    assert message in str(info.value)


def test_auto_reads_function_style_casts_and_casts_each_sum():
    spec = ElementwiseSpec(name="widen", in_params="T x", out_params="U y", operation="y = U(x) * float(x);", grad="auto")
    operation = spec.backward_spec().operation
    assert "(T)(_kspec_adj_y * (U)(" in operation  # T * int is ambiguous for __half: every sum is cast
    assert "((U)(x))" in operation and "((float)(x))" in operation  # U(x), float(x): casts, not calls


@pytest.mark.parametrize("reduce_expr", ["max(a, b)", "a > b ? a : b"])
def test_auto_routes_a_maximum_to_the_selected_element(on_cpu_device, reduce_expr):
    kernel = kspec.ReductionKernel("T x", "T y", "x * x", reduce_expr, "y = a", "-1e300", "rowmax_sq", grad="auto")
    rng = np.random.default_rng(8)
    x, g = rng.standard_normal((3, 5)), rng.standard_normal(3)
    y, back = kspec.vjp(kernel, x, axis=1)
    np.testing.assert_allclose(y, (x * x).max(axis=1))
    (gx,) = back(g)
    want = np.zeros_like(x)
    picked = (x * x).argmax(axis=1)
    want[np.arange(3), picked] = 2 * x[np.arange(3), picked] * g
    np.testing.assert_allclose(gx, want)


def test_vjp_of_a_fused_min(on_cpu_device):
    rng = np.random.default_rng(9)
    x, g = rng.standard_normal((4, 3)), rng.standard_normal(3)
    y, back = kspec.vjp(fused_colmin, x)
    (gx,) = back(g)
    want = np.zeros_like(x)
    picked = (2 * x).argmin(axis=0)
    want[picked, np.arange(3)] = 2 * g
    np.testing.assert_allclose(y, (2 * x).min(axis=0))
    np.testing.assert_allclose(gx, want)


@kspec.fuse
def fused_colmin(x):
    return np.amin(x * 2, axis=0)


FUSED_CASES = {
    "where": lambda x, y: np.where(x > 0, x * y, y),
    "clip": lambda x, y: np.clip(x, -0.5, 0.5) * y,
    "abs": lambda x, y: np.abs(x) + y,
    "maximum": lambda x, y: np.maximum(x, 0.0) * y,
    "comparison": lambda x, y: (x > y) * x,
    "int_cast": lambda x, y: x.astype(np.int32) * y + x,
    "power": lambda x, y: x**2 + y**3,
    "softplus": lambda x, y: np.log1p(np.exp(x)) * np.sqrt(np.abs(y) + 1),
    "sigmoid": lambda x, y: 1 / (1 + np.exp(-x)) * y,
    "sum": lambda x, y: (x * y).sum(),
}


@pytest.mark.parametrize("name", list(FUSED_CASES))
def test_fused_functions_of_numpy_code_match_finite_differences(on_cpu_device, name):
    """Non-differentiable steps (comparisons, where's condition, integer casts) give zero, as in PyTorch and JAX."""
    f = FUSED_CASES[name]
    rng = np.random.default_rng(10)
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    out, back = kspec.vjp(kspec.fuse(f), x, y)
    g = rng.standard_normal(np.shape(out))
    gx, gy = back(g)
    fx, fy = numeric_vjp(f, [x, y], g)
    np.testing.assert_allclose(gx, fx, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(np.zeros_like(y) if gy is None else gy, fy, rtol=1e-5, atol=1e-7)  # None: none flows


# every NumPy ufunc kspec.fuse calls that has a derivative, on data inside its domain
UNARY_UFUNCS = {
    "sin": (0.1, 2.0), "cos": (0.1, 2.0), "tan": (0.1, 1.0), "arcsin": (-0.8, 0.8), "arccos": (-0.8, 0.8),
    "arctan": (-2.0, 2.0), "sinh": (-2.0, 2.0), "cosh": (-2.0, 2.0), "tanh": (-2.0, 2.0), "arcsinh": (-2.0, 2.0),
    "arccosh": (1.2, 3.0), "arctanh": (-0.8, 0.8), "exp": (-2.0, 2.0), "exp2": (-2.0, 2.0), "expm1": (-2.0, 2.0),
    "log": (0.2, 3.0), "log2": (0.2, 3.0), "log10": (0.2, 3.0), "log1p": (0.2, 3.0), "sqrt": (0.2, 3.0),
    "cbrt": (0.2, 3.0), "square": (-2.0, 2.0), "reciprocal": (0.5, 3.0), "negative": (-2.0, 2.0),
    "absolute": (0.2, 2.0), "fabs": (-2.0, -0.2), "floor": (0.1, 0.9), "rint": (0.1, 0.4), "sign": (0.2, 2.0),
}
BINARY_UFUNCS = ["add", "subtract", "multiply", "divide", "power", "arctan2", "hypot", "logaddexp", "maximum",
                 "minimum", "fmax", "fmin", "fmod"]  # fmt: skip


@pytest.mark.parametrize("name", list(UNARY_UFUNCS))
def test_the_derivative_of_every_unary_ufunc(on_cpu_device, name):
    ufunc = getattr(np, name)
    low, high = UNARY_UFUNCS[name]
    x = np.random.default_rng(11).uniform(low, high, (2, 5))
    g = np.random.default_rng(12).standard_normal((2, 5))
    _, back = kspec.vjp(kspec.fuse(lambda x: ufunc(x) * 1.0), x)
    (gx,) = back(g)
    (want,) = numeric_vjp(ufunc, [x], g)
    np.testing.assert_allclose(np.zeros_like(x) if gx is None else gx, want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", BINARY_UFUNCS)
def test_the_derivative_of_every_binary_ufunc(on_cpu_device, name):
    ufunc = getattr(np, name)
    rng = np.random.default_rng(13)
    x, y, g = rng.uniform(0.5, 2.0, (2, 5)), rng.uniform(0.3, 2.5, (2, 5)), rng.standard_normal((2, 5))
    _, back = kspec.vjp(kspec.fuse(lambda x, y: ufunc(x, y) * 1.0), x, y)
    gx, gy = back(g)
    fx, fy = numeric_vjp(ufunc, [x, y], g)
    np.testing.assert_allclose(gx, fx, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(gy, fy, rtol=1e-5, atol=1e-7)


BIAS_GELU = dict(name="bias_gelu_shared", in_params="T x, T b", out_params="T y", grad="auto",
                 operation="T v = x + b; T u = 0.79f * (v + 0.044f * v * v * v); y = 0.5f * v * (1 + tanh(u));")  # fmt: skip


def test_inputs_that_share_a_gradient_and_the_backward_that_writes_it_once():
    spec = ElementwiseSpec(**BIAS_GELU)
    assert spec.shared_gradients() == {"b": "x"}
    shared = spec.backward_spec(shared=True)
    assert shared.name == "bias_gelu_shared_backward_shared"
    assert [p.name for p in shared.out_params] == ["grad_x"] and "_kspec_grad_b" not in shared.operation
    assert [s.name for s in kspec.spec.with_backwards([spec])] == [
        "bias_gelu_shared", "bias_gelu_shared_backward", "bias_gelu_shared_backward_shared",
        "bias_gelu_shared_backward_rowsum_x", "bias_gelu_shared_backward_rowsum_b"]
    assert _spec().shared_gradients() == {}  # sinmul: x's and y's gradients differ
    table = ElementwiseSpec(**{**FIELDS, "grad": {"x": "grad_z * 2", "y": "grad_z * 2"}})
    assert table.shared_gradients() == {"y": "x"}


# b's shape -> the backward kernel that runs: the row-sum variant where b spans the last dims (its gradient summed
# in the pass that writes x's), the shared one (b's gradient summed afterwards from x's) where b is broadcast
# along the last dim, the plain one where nothing is broadcast
_BACKWARD_FOR = {(5,): "_rowsum_b", (1, 5): "_rowsum_b", (1,): "_rowsum_b", (4, 1): "_shared", (4, 5): ""}


@pytest.mark.parametrize("b_shape", list(_BACKWARD_FOR), ids=str)
def test_vjp_sums_a_broadcast_inputs_gradient_in_the_backward(on_cpu_device, b_shape):
    kernel = kspec.ElementwiseKernel.from_spec(ElementwiseSpec(**{**BIAS_GELU, "name": f"bias_gelu_{len(b_shape)}_{b_shape[0]}"}))
    rng = np.random.default_rng(14)
    x, b, g = rng.standard_normal((4, 5)), rng.standard_normal(b_shape), rng.standard_normal((4, 5))
    before = len(kspec.compile_log())
    _, back = kspec.vjp(kernel, x, b)
    gx, gb = back(g)
    used = {e.kernel for e in kspec.compile_log()[before:]}  # the kernels loaded: each the first time
    assert f"{kernel.name}_backward{_BACKWARD_FOR[b_shape]}" in used
    assert gb.shape == b_shape and gx is not gb
    v = x + b
    u = 0.79 * (v + 0.044 * v**3)
    dv = g * (0.5 * (1 + np.tanh(u)) + 0.5 * v * (1 - np.tanh(u) ** 2) * 0.79 * (1 + 3 * 0.044 * v * v))
    np.testing.assert_allclose(gx, dv, rtol=1e-5, atol=1e-8)  # 0.79f, 0.044f: float constants
    axes = tuple(d for d, n in enumerate(np.broadcast_to(b, x.shape).strides) if n == 0)
    np.testing.assert_allclose(gb, dv.sum(axis=axes, keepdims=True).reshape(b_shape), rtol=1e-5, atol=1e-8)


# -- the row-sum variant (a broadcast input's gradient summed in the backward's pass) ---------------------------


def test_row_split_sees_the_broadcast_shape_as_rows_and_columns():
    from kspec.grad._summed import row_split

    full = (8, 6, 5)
    c = {"x": (full, (120, 20, 4), 4)}  # a C-contiguous float32 x
    split = row_split(full, {"b": (6, 5)}, {**c, "b": ((6, 5), (20, 4), 4)})
    assert (split.rows, split.cols, split.strides) == (8, 30, {"x": (30, 1), "b": (0, 1)})
    split = row_split(full, {"b": (5,)}, {**c, "b": ((5,), (4,), 4), "g": (full, (0, 0, 4), 4)})
    assert (split.rows, split.cols, split.strides["g"]) == (48, 5, (0, 1))  # an expanded gradient: row stride 0
    assert row_split(full, {"b": (1,)}, {**c, "b": ((1,), (4,), 4)}).strides["b"] == (0, 0)
    assert row_split(full, {"b": (6, 1)}, {**c, "b": ((6, 1), (4, 4), 4)}) is None  # broadcast along the last dim
    assert row_split(full, {"b": (6, 5), "w": (5,)}, {**c}) is None  # two splits at once
    assert row_split(full, {"b": (5,)}, {"x": (full, (4, 32, 192), 4), "b": ((5,), (4,), 4)}) is None  # x transposed


def test_the_row_sum_variant_is_refused_where_the_body_reads_the_loop():
    spec = ElementwiseSpec(name="with_i", in_params="T x, T b", out_params="T y", operation="y = x * b + i;",
                           grad={"x": "grad_y * b", "b": "grad_y * x + i"})  # fmt: skip
    with pytest.raises(kspec.SpecError, match="reads no loop state"):
        spec.row_sum_spec(("b",))
    with pytest.raises(kspec.SpecError, match="expected names of inputs"):
        _spec().row_sum_spec(("nope",))
    variant = _spec().row_sum_spec(("y",))
    assert [p.name for p in variant.out_params] == ["kspec_out_grad_x", "grad_y"]
    assert all(p.raw for p in variant.in_params if p.name.startswith("kspec_in_"))


def test_the_row_sum_variant_serves_reductions_complex_values_and_steps_aside_for_numbers(on_cpu_device):
    rng = np.random.default_rng(21)
    wsum = kspec.ReductionKernel("T x, T w", "T y", "x * w", "a + b", "y = a", "0", "rowsum_wsum", grad="auto")
    x, w, g = rng.standard_normal((50, 9)), rng.standard_normal(9), rng.standard_normal(50)
    _, back = kspec.vjp(wsum, x, w, axis=1)
    gx, gw = back(g)
    assert kspec.grad.summed_backward(wsum).last_route == "row sums"  # the kept output broadcasts along the columns
    np.testing.assert_allclose(gx, g[:, None] * w, rtol=1e-12)
    np.testing.assert_allclose(gw, (g[:, None] * x).sum(0), rtol=1e-12)
    cmul = kspec.ElementwiseKernel("T x, T b", "T y", "y = x * b + x", "rowsum_cmul", grad="auto")
    x, b = rng.standard_normal((40, 6)) + 1j * rng.standard_normal((40, 6)), rng.standard_normal(6) + 1j
    g = rng.standard_normal((40, 6)) + 1j * rng.standard_normal((40, 6))
    _, back = kspec.vjp(cmul, x, b)
    gx, gb = back(g)
    assert kspec.grad.summed_backward(cmul).last_route == "row sums"
    np.testing.assert_allclose(gx, g * (b + 1), rtol=1e-12)  # grad * f'(z): JAX's convention
    np.testing.assert_allclose(gb, (g * x).sum(0), rtol=1e-12)
    saxpy = kspec.ElementwiseKernel("T a, T x, T y", "T z", "z = a * x + y", "rowsum_saxpy", grad="auto")
    x, y, g = rng.standard_normal((30, 4)), rng.standard_normal(4), rng.standard_normal((30, 4))
    _, back = kspec.vjp(saxpy, 2.0, x, y)
    ga, gx, gy = back(g)
    assert kspec.grad.summed_backward(saxpy).last_route == "second pass"  # a Python number is no raw array
    np.testing.assert_allclose(float(np.asarray(ga)), (g * x).sum(), rtol=1e-12)
    np.testing.assert_allclose(gy, g.sum(0), rtol=1e-12)
