"""Gradients declared in an elementwise spec (issue [AD]): the ``grad`` table's checks, the backward spec kspec
renders from it, and ``kspec.vjp`` on the CPU device against NumPy's analytic gradients and finite differences.
GPU: tests/test_grad_gpu.py."""

from __future__ import annotations

import numpy as np
import pytest

import kspec
from kspec.grad import backward_spec
from kspec.spec import ElementwiseSpec, load_file

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
    with pytest.raises(kspec.KspecError, match="kernel 'sinmul' declares no gradient"):
        backward_spec(ElementwiseSpec(**FIELDS))


# -- kspec.vjp on the CPU device -------------------------------------------------------------------------------


def _numeric_vjp(f, args, g, eps=1e-6):
    """Finite differences of sum(f(args) * g) with respect to each argument."""
    out = []
    for k, a in enumerate(args):
        a = np.asarray(a, dtype=np.float64)
        grad = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            plus, minus = a.copy(), a.copy()
            plus[idx] += eps
            minus[idx] -= eps
            hi = f(*[plus if j == k else args[j] for j in range(len(args))])
            lo = f(*[minus if j == k else args[j] for j in range(len(args))])
            grad[idx] = ((hi - lo) * g).sum() / (2 * eps)
        out.append(grad)
    return out


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
    fx, fy = _numeric_vjp(lambda a, b: a * b + np.sin(a), [x, y], g)
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
