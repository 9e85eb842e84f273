"""Kernels with gradients under JAX (issue [AD]): ``jax.grad`` / ``jax.vjp`` through ``kspec.jax.call`` and bare
calls, under ``jax.jit`` and ``jax.vmap``, checked with ``jax.test_util.check_grads`` and against the analytic
gradient. On kspec's CPU device with JAX's CPU backend; skipped without JAX or a host compiler."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.device_arrays import host_compiler_missing
from helpers.grad_cases import fused_normalized, fused_rowmax, fused_rowprod, fused_rowsum

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

import kspec  # noqa: E402
import kspec.jax as kj  # noqa: E402
from jax.test_util import check_grads  # noqa: E402

GELU = kspec.ElementwiseKernel(
    "T x, T b", "T y",
    "T v = x + b; T u = 0.7978845608028654f * (v + 0.044715f * v * v * v); y = 0.5f * v * (1 + tanh(u));",
    "jax_bias_gelu", grad="auto",
)  # fmt: skip
SCALED = kspec.ElementwiseKernel("T x, float32 s, int32 n", "T y", "y = x * s + n;", "jax_scaled", grad={"x": "grad_y * s"})
PLAIN = kspec.ElementwiseKernel("T x", "T y", "y = x * x;", "jax_plain_square")
EXP = kspec.ElementwiseKernel("T x", "T y", "y = exp(x);", "jax_exp_keeps", grad={"x": "grad_y * y"})


@pytest.fixture(autouse=True)
def cpu_device():
    reason = host_compiler_missing()
    if reason is not None:
        pytest.skip(reason)
    with kspec.use_device("cpu"), jax.default_device(jax.devices("cpu")[0]):
        yield


def _gelu_grads(x, b, g):
    v = x + b
    u = 0.7978845608028654 * (v + 0.044715 * v**3)
    t = np.tanh(u)
    dv = g * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * v * v))
    return dv, dv.sum(axis=0)


def _data(seed, *shape):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


@pytest.mark.parametrize("how", ["kj.call", "bare", "jit(kj.call)", "jit(bare)"])
def test_grad_of_bias_gelu(how):
    x, b, g = _data(0, 8, 16), _data(1, 16), _data(2, 8, 16)
    call = {"kj.call": lambda x, b: kj.call(GELU, x, b), "bare": lambda x, b: GELU(x, b)}[how.removeprefix("jit(").rstrip(")")]
    if how.startswith("jit"):
        call = jax.jit(call)
    y, back = jax.vjp(call, x, b)
    gx, gb = back(g)
    want_x, want_b = _gelu_grads(np.asarray(x, np.float64), np.asarray(b, np.float64), np.asarray(g, np.float64))
    assert gx.shape == x.shape and gb.shape == b.shape
    np.testing.assert_allclose(np.asarray(gx), want_x, rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(np.asarray(gb), want_b, rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("kernel", ["gelu", "exp"])
def test_residuals_hold_the_outputs_the_backward_reads_and_no_others(kernel):
    """jax.vjp's residuals (the arrays the function it returns holds): bias-GELU's backward recomputes from its
    inputs, so its output is none of them (XLA may free it once the forward's consumers are done); exp with
    ``grad_y * y`` keeps its output. The gradients are right either way."""
    x, b, g = _data(0, 8, 16), _data(1, 16), _data(2, 8, 16)
    call, args = ((lambda x, b: GELU(x, b)), (x, b)) if kernel == "gelu" else ((lambda x: EXP(x)), (x,))
    y, back = jax.vjp(call, *args)
    held = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(back) if getattr(leaf, "shape", None) == y.shape]
    assert any(np.array_equal(leaf, np.asarray(x)) for leaf in held)  # the input: a residual
    assert sum(np.array_equal(leaf, np.asarray(y)) for leaf in held) == (0 if kernel == "gelu" else 1)
    grads = back(g)
    if kernel == "gelu":
        want_x, want_b = _gelu_grads(np.asarray(x, np.float64), np.asarray(b, np.float64), np.asarray(g, np.float64))
        np.testing.assert_allclose(np.asarray(grads[0]), want_x, rtol=2e-4, atol=2e-5)
        np.testing.assert_allclose(np.asarray(grads[1]), want_b, rtol=2e-4, atol=2e-4)
    else:
        np.testing.assert_allclose(np.asarray(grads[0]), np.exp(np.asarray(x)) * np.asarray(g), rtol=1e-5, atol=1e-6)


def test_check_grads_and_vmap_of_grad():
    x, b = _data(3, 4, 5), _data(4, 5)
    check_grads(lambda x, b: kj.call(GELU, x, b), (x, b), order=1, modes=["rev"], atol=5e-2, rtol=5e-2)
    per_row = jax.jit(jax.vmap(jax.grad(lambda x, b: GELU(x, b).sum(), argnums=(0, 1))))(x, jnp.broadcast_to(b, (4, 5)))
    want_x, _ = _gelu_grads(np.asarray(x, np.float64), np.asarray(b, np.float64), np.ones((4, 5)))
    np.testing.assert_allclose(np.asarray(per_row[0]), want_x, rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(np.asarray(per_row[1]), want_x, rtol=2e-4, atol=2e-5)  # d/db = d/dx per row


def test_static_scalars_and_integer_arrays_get_no_gradient():
    x = _data(5, 6)
    n = jnp.arange(6, dtype=jnp.int32)
    gx = jax.grad(lambda x: kj.call(SCALED, x, 2.5, n).sum())(x)
    np.testing.assert_allclose(np.asarray(gx), np.full(6, 2.5, np.float32))
    _, back = jax.vjp(lambda x, n: SCALED(x, np.float32(2.5), n), x, n)
    gx, gn = back(jnp.ones(6, jnp.float32))
    assert gn.dtype == jax.dtypes.float0 and gn.shape == (6,)


def test_a_kernel_without_gradients_still_says_so():
    with pytest.raises(kspec.KspecNotImplementedError, match="kernel 'jax_plain_square' cannot be differentiated"):
        jax.grad(lambda v: PLAIN(v).sum())(_data(6, 3))


@kspec.fuse
def fused_poly(x, b):
    v = x + b
    return v * np.tanh(v) + x * x


SUMSQ = kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "jax_grad_sumsq", grad="auto")


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_a_fused_function_is_differentiable_with_no_declaration(jit):
    x, b, g = _data(7, 4, 5), _data(8, 5), _data(9, 4, 5)
    call = jax.jit(fused_poly) if jit else (lambda x, b: kj.call(fused_poly, x, b))
    y, back = jax.vjp(call, x, b)
    gx, gb = back(g)
    xd, bd, gd = (np.asarray(a, np.float64) for a in (x, b, g))
    v = xd + bd
    dv = gd * (np.tanh(v) + v * (1 - np.tanh(v) ** 2))
    np.testing.assert_allclose(np.asarray(y), v * np.tanh(v) + xd * xd, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(gx), dv + 2 * xd * gd, rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(np.asarray(gb), dv.sum(axis=0), rtol=2e-4, atol=2e-4)
    check_grads(jax.jit(fused_poly), (x, b), order=1, modes=["rev"], atol=5e-2, rtol=5e-2)


def test_fused_functions_of_reductions_are_differentiable():
    x, b = _data(10, 3, 4), _data(13, 4)
    gx = jax.jit(jax.grad(lambda v: fused_rowsum(v).sum()))(x)
    np.testing.assert_allclose(np.asarray(gx), 2 * np.asarray(x), rtol=1e-5)
    got = jax.grad(lambda v, b: (fused_normalized(v, b) ** 2).sum(), argnums=(0, 1))(x, b)
    want = jax.grad(lambda v, b: (jax.nn.softmax(v * b, axis=1) ** 2).sum(), argnums=(0, 1))(x, b)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-4, atol=1e-6)


def test_vmap_of_the_grad_of_a_fused_reduction():
    x, b = _data(14, 5, 3, 4), _data(15, 4)
    got = jax.jit(jax.vmap(jax.grad(lambda v: (fused_normalized(v, b) ** 2).sum())))(x)
    want = jax.vmap(jax.grad(lambda v: (jax.nn.softmax(v * b, axis=1) ** 2).sum()))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-4, atol=1e-6)


def test_a_fused_max_is_differentiable_and_a_product_says_it_is_not():
    x = _data(10, 3, 4)
    gx = jax.grad(lambda v: fused_rowmax(v).sum())(x)
    np.testing.assert_allclose(np.asarray(gx), np.asarray(jax.grad(lambda v: v.max(axis=1).sum())(x)))
    np.testing.assert_allclose(np.asarray(jax.jit(fused_rowprod)(x)), np.asarray(x).prod(axis=1), rtol=1e-5)
    with pytest.raises(kspec.KspecNotImplementedError, match="'fused_rowprod' cannot be differentiated.*its kernel 1 of 1"):
        jax.grad(lambda v: fused_rowprod(v).sum())(x)


@pytest.mark.parametrize("axis, keepdims", [(None, False), (1, False), ((0, 2), True)])
def test_a_reduction_with_grad_under_jax_grad(axis, keepdims):
    x = _data(11, 3, 4, 5)
    g = _data(12, *np.asarray(x).sum(axis=axis, keepdims=keepdims).shape)
    y, back = jax.vjp(lambda v: SUMSQ(v, axis=axis, keepdims=keepdims), x)
    (gx,) = back(g)
    gd = np.asarray(g, np.float64)
    want = 2 * np.asarray(x, np.float64) * (gd if keepdims or axis is None else np.expand_dims(gd, axis))
    np.testing.assert_allclose(np.asarray(gx), want, rtol=2e-5, atol=1e-6)
    gj = jax.jit(jax.grad(lambda v: SUMSQ(v, axis=axis, keepdims=keepdims).sum()))(x)
    np.testing.assert_allclose(np.asarray(gj), 2 * np.asarray(x), rtol=2e-5, atol=1e-6)
