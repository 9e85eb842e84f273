"""``kernel.output_specs`` / ``kernel.plan_launch`` and ``kspec.ArraySpec`` (issue [X]): a call planned for
arrays that have no memory, as ``torch.compile`` and ``jax.jit`` trace them.

output_specs runs the call's binding and planning, so its shapes, dtypes and errors are a call's; it needs no
GPU, and loads, compiles and allocates nothing. plan_launch is checked on kspec's CPU device by launching the
plan by hand (tests/helpers/launch_plans.py) and comparing with a call of the kernel on the same data; the GPU test
does the same on CUDA (tests/kernels_tests/test_launch_plan_gpu.py).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kspec
from kspec import ArraySpec

from helpers.launch_plans import host_function, launch_plan

add = kspec.ElementwiseKernel("T x, T y", "T z", "z = x + y", "plan_add")
axpy = kspec.ElementwiseKernel("float32 a, T x, T y", "T z", "z = a * x + y", "plan_axpy")
scale_int = kspec.ElementwiseKernel("int32 x, int32 k", "int32 z", "z = x * k", "plan_scale_int")
# the same kernel from a spec: the typed path, stricter about scalars than the CuPy-style constructor
scale_int_typed = kspec.ElementwiseKernel.from_spec(scale_int.spec)
two_out = kspec.ElementwiseKernel("T x", "T lo, float64 hi", "lo = x - 1; hi = x + 1", "plan_two")
reverse = kspec.ElementwiseKernel("T x, raw T y", "T z", "z = x + y[_ind.size() - i - 1]", "plan_reverse")
fill = kspec.ElementwiseKernel("raw T x", "raw T y", "y[i] = x[i] * 2", "plan_fill")
silent = kspec.ElementwiseKernel("T x", "T y", "y = x", "plan_silent", no_return=True)
total = kspec.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "plan_sum")
minmax = kspec.ReductionKernel("T x", "T lo, T hi", "x", "a + b", "lo = a; hi = a * 2", "0", "plan_minmax")


def f32(*shape: int, device: str = "cuda", strides: tuple[int, ...] | None = None) -> ArraySpec:
    return ArraySpec(shape, "float32", device, strides=strides)


# -- ArraySpec ---------------------------------------------------------------------------------------------


def test_array_spec_fields_and_normalisation():
    a = ArraySpec([2, np.int64(3)], np.float32)
    assert a == ArraySpec((2, 3), "float32", "cuda", 0, None)
    assert a.dtype == "float32" and a.ndim == 2 and a.itemsize == 4 and a.nbytes == 24
    assert a.byte_strides == (12, 4)
    assert ArraySpec((4,), "f8").dtype == "float64"
    assert ArraySpec((4,), "float").dtype == "float64"
    cpu = ArraySpec((4,), "int32", "cpu")
    assert cpu.device_id == -1 and cpu == ArraySpec((4,), "int32", "cpu", -1)
    assert ArraySpec((2, 3), "float32", strides=(4, 8)).byte_strides == (4, 8)
    assert ArraySpec((4,), "float32", device_id=1).device_id == 1


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        (dict(shape=(2, -1), dtype="float32"), ValueError, "shape: extents must be >= 0"),
        (dict(shape=(2.0,), dtype="float32"), TypeError, "shape: expected ints"),
        (dict(shape=3, dtype="float32"), TypeError, "shape: expected a tuple of ints"),
        (dict(shape=(2,), dtype="float128x"), TypeError, "dtype: expected one of"),
        (dict(shape=(2,), dtype="float32", device="tpu"), ValueError, "device: expected 'cuda' or 'cpu'"),
        (dict(shape=(2,), dtype="float32", device="cpu", device_id=3), ValueError, "device_id: the CPU device"),
        (dict(shape=(2,), dtype="float32", device_id=-2), ValueError, "device_id: expected a CUDA ordinal"),
        (dict(shape=(2, 3), dtype="float32", strides=(4,)), ValueError, "strides: 1 strides for 2 dims"),
    ],
)
def test_array_spec_refuses_invalid_fields(kwargs, error, words):
    with pytest.raises(error, match=words) as info:
        ArraySpec(**kwargs)
    assert isinstance(info.value, kspec.KspecError)


# -- output_specs: elementwise -------------------------------------------------------------------------------


def test_elementwise_broadcasts_and_binds_placeholders():
    assert add.output_specs(f32(3, 1), f32(4)) == (f32(3, 4),)
    assert add.output_specs(ArraySpec((5,), "int64"), ArraySpec((2, 1), "int64")) == (ArraySpec((2, 5), "int64"),)
    assert add.output_specs(ArraySpec((0, 4), "float64"), ArraySpec((4,), "float64")) == (ArraySpec((0, 4), "float64"),)
    # strided and broadcast (stride 0) inputs: the output is C-contiguous all the same
    assert add.output_specs(f32(4, 3, strides=(4, 16)), f32(4, 3, strides=(0, 4))) == (f32(4, 3),)


def test_elementwise_scalars_bind_no_placeholder_and_keep_their_python_type():
    assert add.output_specs(f32(6), 2.5) == (f32(6),)
    assert add.output_specs(ArraySpec((6,), "int32"), 3) == (ArraySpec((6,), "int32"),)
    assert axpy.output_specs(2, ArraySpec((3,), "float64"), ArraySpec((3,), "float64")) == (ArraySpec((3,), "float64"),)
    assert scale_int.output_specs(ArraySpec((3,), "int32"), 2.0) == (ArraySpec((3,), "int32"),)  # CuPy converts it
    with pytest.raises(kspec.KspecTypeError, match="kernel 'plan_scale_int': k is int32 but got a float scalar"):
        scale_int_typed.output_specs(ArraySpec((3,), "int32"), 2.0)
    with pytest.raises(kspec.KspecOverflowError, match="k = 4294967296 is out of range for int32"):
        scale_int_typed.output_specs(ArraySpec((3,), "int32"), 2**32)
    with pytest.raises(kspec.KspecOverflowError, match="k = 4294967296 does not fit int32"):
        scale_int.output_specs(ArraySpec((3,), "int32"), 2**32)
    with pytest.raises(kspec.KspecTypeError, match="placeholder 'T' .* is given only scalars"):
        add.output_specs(1.0, 2.0)


def test_elementwise_several_outputs_given_outputs_and_no_return():
    assert two_out.output_specs(f32(2, 2)) == (f32(2, 2), ArraySpec((2, 2), "float64"))
    given = (f32(5), ArraySpec((5,), "float64", strides=(16,)))
    assert two_out.output_specs(f32(5), *given) == given  # given outputs come back as given
    assert silent.output_specs(f32(3)) == (f32(3),)


def test_elementwise_raw_parameters_and_size():
    assert reverse.output_specs(f32(7), f32(7)) == (f32(7),)
    assert fill.output_specs(f32(9), f32(9), size=4) == (f32(9),)
    with pytest.raises(kspec.KspecValueError, match="Loop size is undecided"):
        fill.output_specs(f32(9))
    with pytest.raises(kspec.KspecValueError, match="size= is only allowed when every array argument is raw"):
        add.output_specs(f32(3), f32(3), size=3)


def test_cpu_array_specs_give_cpu_outputs():
    out = add.output_specs(f32(2, 3, device="cpu"), f32(3, device="cpu"))
    assert out == (ArraySpec((2, 3), "float32", "cpu"),) and out[0].device_id == -1


def test_errors_name_the_parameter_as_a_call_does():
    with pytest.raises(kspec.KspecTypeError, match="Type is mismatched. kernel 'plan_add': y is an array of float64"):
        add.output_specs(f32(3), ArraySpec((3,), "float64"))
    with pytest.raises(kspec.KspecValueError, match=r"could not be broadcast together: kernel 'plan_add': x \(3, 2\), y \(4,\)"):
        add.output_specs(f32(3, 2), f32(4))
    with pytest.raises(kspec.KspecTypeError, match="Wrong number of arguments for 'plan_add'"):
        add.output_specs(f32(3))
    with pytest.raises(kspec.KspecTypeError, match="unexpected keyword argument 'stream'"):
        add.output_specs(f32(3), f32(3), stream=0)
    with pytest.raises(kspec.KspecValueError, match="Out shape is mismatched: kernel 'plan_add': output z has shape"):
        add.output_specs(f32(3), f32(3), f32(1))
    with pytest.raises(kspec.KspecValueError, match="arrays on different devices in one call: x on device 0, y on device 1"):
        add.output_specs(f32(3), ArraySpec((3,), "float32", device_id=1))
    with pytest.raises(kspec.KspecTypeError, match="input y: expected a kspec.ArraySpec .* got a ndarray"):
        add.output_specs(f32(3), np.zeros(3, np.float32))


def test_a_call_refuses_an_array_spec():
    with kspec.use_device("cpu"), pytest.raises(kspec.KspecTypeError, match="y must be a device array, got a kspec.ArraySpec"):
        add(np.zeros(3, np.float32), f32(3, device="cpu"))


# -- output_specs: reductions --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("axis", "keepdims", "shape"),
    [(None, False, ()), (None, True, (1, 1, 1)), (1, False, (3, 5)), (-1, True, (3, 4, 1)), ((0, 2), False, (4,)),
     ([2, 0], True, (1, 4, 1)), ((), False, (3, 4, 5))],
)  # fmt: skip
def test_reduction_axis_and_keepdims(axis, keepdims, shape):
    assert total.output_specs(f32(3, 4, 5), axis=axis, keepdims=keepdims) == (f32(*shape),)


def test_reduction_outputs_out_and_errors():
    assert minmax.output_specs(ArraySpec((6, 2), "int64"), axis=0) == (ArraySpec((2,), "int64"),) * 2
    given = f32(3, strides=(8,))
    assert total.output_specs(f32(3, 4), axis=1, out=given) == (given,)
    with pytest.raises(kspec.AxisError, match="axis 3 is out of bounds for array of dimension 3"):
        total.output_specs(f32(3, 4, 5), axis=3)
    with pytest.raises(kspec.KspecValueError, match="duplicate value in 'axis'"):
        total.output_specs(f32(3, 4, 5), axis=(1, -2))
    with pytest.raises(kspec.KspecTypeError, match="axis must be None, an int or a tuple of ints"):
        total.output_specs(f32(3, 4), axis=1.0)
    with pytest.raises(kspec.KspecValueError, match="Out shape is mismatched"):
        total.output_specs(f32(3, 4), axis=1, out=f32(4))
    with pytest.raises(kspec.KspecTypeError, match="unexpected keyword argument 'size'"):
        total.output_specs(f32(3, 4), size=3)


# -- output_specs: fused functions ---------------------------------------------------------------------------


@kspec.fuse
def fused_axpb(x, y, a):
    return a * x + y


@kspec.fuse
def fused_norm(x, y):
    s = (x * y).sum(axis=1)
    return s, s / x.max()


@kspec.fuse
def fused_inplace(x, y):
    x += y
    return x


@kspec.fuse
def fused_view(x):
    return x[1:] * 2


@kspec.fuse
def fused_ratio(x, k):
    return x // k


def test_fused_output_specs():
    assert fused_axpb.output_specs(f32(3, 1), f32(4), 2.0) == (f32(3, 4),)
    assert fused_axpb.output_specs(ArraySpec((4,), "int32"), ArraySpec((4,), "int32"), 2) == (ArraySpec((4,), "int32"),)
    # NumPy's promotion, as a call traces it: a Python float with int arrays gives float64
    assert fused_axpb.output_specs(ArraySpec((4,), "int32"), ArraySpec((4,), "int32"), 2.0) == (ArraySpec((4,), "float64"),)
    assert fused_norm.output_specs(f32(5, 6), f32(6)) == (f32(5), f32(5))


def test_fused_errors():
    with pytest.raises(kspec.KspecNotImplementedError, match="updates an argument in place"):
        fused_inplace.output_specs(f32(3), f32(3))
    with pytest.raises(kspec.KspecNotImplementedError, match=r"indexes an argument \(x\[...\]\)"):
        fused_view.output_specs(f32(3))
    with pytest.raises(kspec.KspecTypeError, match="need at least one"):
        fused_axpb.output_specs(1.0, 2.0, 3.0)
    with pytest.raises(kspec.KspecOverflowError, match="Python integer 300 out of bounds for int8"):
        fused_ratio.output_specs(ArraySpec((3,), "int8"), 300)
    with pytest.raises(kspec.FuseError, match="ufunc"):
        kspec.fuse(lambda x: np.linalg.norm(x)).output_specs(f32(3))


# -- nothing loads, compiles or starts -----------------------------------------------------------------------


def test_output_specs_starts_no_driver_and_compiles_nothing():
    """In a fresh process (kspec's CUDA driver never started, nothing compiled): output_specs of a new kernel,
    a reduction and a fused function for CUDA ArraySpecs leave the driver bindings and NVRTC unimported,
    the driver not started and no kernel loaded."""
    code = textwrap.dedent("""
        import sys
        import kspec
        from kspec import ArraySpec
        k = kspec.ElementwiseKernel("T x, T y", "T z", "z = x - y", "fresh_sub")
        r = kspec.ReductionKernel("T x", "T y", "x", "max(a, b)", "y = a", None, "fresh_max")
        f = kspec.fuse(lambda x, y: (x * y).sum(axis=0) + 1)
        a = ArraySpec((64, 32), "float32")
        assert k.output_specs(a, a) == (a,)
        assert r.output_specs(a, axis=1) == (ArraySpec((64,), "float32"),)
        assert f.output_specs(a, a) == (ArraySpec((32,), "float32"),)
        imported = [m for m in ("cuda.bindings.driver", "cuda.bindings.nvrtc") if m in sys.modules]
        assert not imported, imported
        from kspec.kernels.binaries import _loaded
        from kspec.runtime import _driver
        assert not _loaded._loaded and _driver._driver is None and _driver._failure is None
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


# -- plan_launch on the CPU device: launched by hand, compared with a call -------------------------------------


def host_spec(a: np.ndarray) -> ArraySpec:
    return ArraySpec(a.shape, a.dtype, "cpu", strides=a.strides)


def run_on_host(plan: kspec.LaunchPlan, inputs: list[np.ndarray]) -> tuple[np.ndarray, ...]:
    outputs = tuple(np.empty(o.shape, o.dtype) for o in plan.outputs)
    workspace = np.empty(max(plan.workspace, 1), np.uint8)
    pointers = [a.ctypes.data for a in inputs]
    launch_plan(plan, pointers, [o.ctypes.data for o in outputs], workspace.ctypes.data, host_function,
                kspec.runtime.cuda_driver().cuLaunchKernel)  # fmt: skip
    return outputs


def plan_and_compare(kernel, args, expected_steps=None, **kwargs):
    """plan_launch for ``args`` (NumPy arrays become ArraySpecs), launched by hand, against a call."""
    plan = kernel.plan_launch(*[host_spec(a) if isinstance(a, np.ndarray) else a for a in args], **kwargs)
    got = run_on_host(plan, [a for a in args if isinstance(a, np.ndarray)])
    called = kernel(*args, **kwargs)
    called = called if isinstance(called, tuple) else (called,)
    assert plan.device_id == -1 and len(got) == len(called)
    for g, c in zip(got, called):
        assert g.shape == c.shape and g.dtype == c.dtype
        np.testing.assert_allclose(g, c, rtol=1e-6)
    if expected_steps is not None:
        assert len(plan.steps) == expected_steps
    return plan


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def test_plan_launch_elementwise_matches_a_call(on_cpu_device, rng):
    x = rng.random((37, 29), np.float32)
    y = rng.random((29,), np.float32)
    plan = plan_and_compare(add, (x, y), expected_steps=1)
    assert plan.result == "single" and plan.workspace == 0
    assert {role for _, role, _ in plan.steps[0].pointers} == {"input", "output"}
    plan_and_compare(add, (x.T, x[::-1, ::-1].T))  # strided and reversed
    plan_and_compare(add, (x[::2], x[::2, :1]))  # sliced, broadcast
    plan_and_compare(axpy, (np.float32(1.5), x, x), expected_steps=1)
    plan_and_compare(axpy, (3, x.astype(np.float64), 2.5))  # scalars written into params
    plan_and_compare(two_out, (x,))
    plan_and_compare(reverse, (y, y))


def test_plan_launch_of_nothing_to_do(on_cpu_device):
    plan = add.plan_launch(ArraySpec((0, 3), "float32", "cpu"), ArraySpec((3,), "float32", "cpu"))
    assert plan.steps == () and plan.outputs == (ArraySpec((0, 3), "float32", "cpu"),)


@pytest.mark.parametrize(("shape", "axis", "keepdims"),
                         [((37, 29), 1, False), ((37, 29), 0, True), ((6, 5, 40), (0, 2), False),
                          ((4, 70000), 1, False), ((200000,), None, False)])  # fmt: skip
def test_plan_launch_reduction_matches_a_call(on_cpu_device, rng, shape, axis, keepdims):
    x = rng.random(shape).astype(np.float32)
    plan = plan_and_compare(total, (x,), axis=axis, keepdims=keepdims)
    assert plan.workspace % 256 == 0
    for step in plan.steps:
        assert len(step.slot_offsets) >= 2 and len(step.params) >= max(step.slot_offsets)


def test_plan_launch_reduction_uses_a_workspace_where_a_call_splits(on_cpu_device, rng):
    """A long row and one output: two passes (the CPU device has a few SMs' worth of threads, so one output
    splits), partials in the workspace."""
    x = rng.random(1 << 20).astype(np.float32)
    plan = plan_and_compare(total, (x,), expected_steps=2)
    assert plan.workspace >= 256 and plan.workspace % 256 == 0
    roles = [[role for _, role, _ in step.pointers] for step in plan.steps]
    assert all("workspace" in r for r in roles) and "input" in roles[0] and "output" in roles[1]


def test_plan_launch_fused_matches_a_call(on_cpu_device, rng):
    x = rng.random((5, 6), np.float32) + 0.5
    y = rng.random((6,), np.float32)
    plan = fused_norm.plan_launch(host_spec(x), host_spec(y))
    assert plan.result == "tuple" and len(plan.steps) >= 2 and plan.workspace > 0
    got = run_on_host(plan, [x, y])
    for g, c in zip(got, fused_norm(x, y)):
        np.testing.assert_allclose(g, c, rtol=1e-6)
    plan = fused_axpb.plan_launch(host_spec(x), host_spec(y), 2.0)
    assert plan.result == "single"
    np.testing.assert_allclose(run_on_host(plan, [x, y])[0], fused_axpb(x, y, 2.0), rtol=1e-6)


def test_plan_launch_for_the_cpu_device_needs_it_on():
    with kspec.use_device("cuda"), pytest.raises(kspec.KspecValueError, match="kspec's CPU device, which is off"):
        add.plan_launch(f32(3, device="cpu"), f32(3, device="cpu"))
