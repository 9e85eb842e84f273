"""kspec.fuse where CuPy's own fusion tests look, without a GPU: error types and phrases, ``x[...] = v``,
views of arguments (``mask[:, None]``), nan reductions, ``clear_cache``, and the way CuPy's routines reach a
trace (a stand-in for CuPy's fusion thread-local, since CuPy is not installed here)."""

from __future__ import annotations

import pickle
import sys
import threading
import types

import numpy as np
import pytest

import kspec
from kspec.compiler import CompileOptions, compile_source
from kspec.fuse import _index
from kspec.render import render, specialize
from kspec.runtime._devicearray import DeviceArray

F2 = np.zeros((3, 4), np.float32)
F1 = np.zeros(4, np.float32)
I2 = np.zeros((3, 4), np.int32)
B1 = np.zeros(3, np.bool_)


def _compiles(spec) -> None:
    module = render(specialize(spec, {}, scalars=frozenset(spec.scalars)))
    compile_source(module.source, name=module.name, options=CompileOptions(arch="sm_80"),
                   name_expressions=module.name_expressions, needs=module.needs)


# -- errors of NumPy's and CuPy's types ------------------------------------------------------------------


@pytest.mark.parametrize("axis", [2, -3, (0, 5)])
def test_out_of_range_axis_is_numpy_axis_error(axis):
    f = kspec.fuse(lambda x: np.sum(x, axis=axis))
    with pytest.raises(np.exceptions.AxisError) as info:
        f.spec(F2)
    err = info.value
    assert isinstance(err, kspec.AxisError) and isinstance(err, kspec.KspecValueError) and isinstance(err, IndexError)
    bad = axis[1] if isinstance(axis, tuple) else axis
    assert f"axis {bad} is out of bounds for array of dimension 2" in str(err) and "function '<lambda>'" in str(err)
    assert (err.axis, err.ndim) == (bad, 2)


def test_axis_error_keeps_its_message_and_fields_through_pickle():
    err = kspec.AxisError("axis 3 is out of bounds for array of dimension 1: kernel 'k'", axis=3, ndim=1)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is kspec.AxisError and str(back) == str(err) and (back.axis, back.ndim) == (3, 1)
    assert str(kspec.AxisError("plain message")) == "plain message"


def test_reduction_kernel_axis_error_is_numpy_axis_error():
    from kspec.kernels.planning._reduction_plan import normalize_axis

    with pytest.raises(np.exceptions.AxisError, match=r"axis -3 is out of bounds for array of dimension 2: kernel 'r'"):
        normalize_axis("r", -3, 2)


def test_branch_on_traced_value_is_a_type_error_with_cupy_phrase():
    def f(x):
        if x > 0:
            return x
        return -x

    with pytest.raises(TypeError, match=r"^Cannot convert to Python scalar in cupy\.fuse: kspec\.fuse: function 'f'"):
        kspec.fuse(f).spec(F1)
    with pytest.raises(kspec.FuseError, match="Python scalar.*float()"):
        kspec.fuse(lambda x: float(x)).spec(F1)


def test_non_broadcastable_in_place_output_is_a_value_error():
    def f(x, y):
        x += y

    with pytest.raises(ValueError, match=r"^non-broadcastable output operand: .*ufunc 'add': the result has 2") as info:
        kspec.fuse(f).spec(F1, F2)
    assert isinstance(info.value, kspec.FuseError)


# -- x[...] = v ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value, literal", [(np.nan, "0x7ff8"), (np.inf, "0x7ff0"), (-np.inf, "(-__longlong_as_double(0x7ff0")])
def test_whole_array_assignment_of_a_number_writes_the_argument(value, literal):
    def f(x):
        x[:] = value
        return x

    spec = kspec.fuse(f).spec(F2)
    assert spec.in_params == () and [p.name for p in spec.out_params] == ["x"]
    assert literal in spec.operation.lower()
    _compiles(spec)


def test_whole_array_assignment_of_a_traced_value_broadcasts_and_casts_unsafely():
    def f(x, y):
        x[...] = y * 2.5  # float64 into int32: NumPy's assignment casts without the same_kind check

    spec = kspec.fuse(f).spec(I2, np.zeros(4))
    assert [p.name for p in spec.in_params] == ["y"] and [(p.name, p.type) for p in spec.out_params] == [("x", "int32")]
    _compiles(spec)


@pytest.mark.parametrize("key", ["x[1:]", "x[0]", "x[::2]", "x[x > 0]"])
def test_partial_assignment_is_a_value_error_with_cupy_phrase(key):
    code = f"def f(x):\n    {key} = 1\n"
    scope: dict = {}
    exec(code, scope)
    with pytest.raises(ValueError, match=r"^The fusion supports `\[\.\.\.\]` or `\[:\]`\.: kspec\.fuse") as info:
        kspec.fuse(scope["f"]).spec(F2)
    assert isinstance(info.value, kspec.FuseError)


def test_assignment_of_a_higher_dimensional_value_is_a_value_error():
    def f(x, y):
        x[:] = y

    with pytest.raises(ValueError, match="non-broadcastable output operand"):
        kspec.fuse(f).spec(F1, F2)


# -- views of arguments ----------------------------------------------------------------------------------


def test_new_axis_view_of_an_argument_is_a_parameter_passed_as_a_view():
    def f(points, mask):
        return np.where(mask[:, np.newaxis], np.inf, points)

    fused = kspec.fuse(f)
    spec = fused.spec(np.zeros((5, 2), np.float16), B1)
    assert [p.name for p in spec.in_params] == ["points", "mask_view"]
    (step,) = fused._program(fused._types((np.zeros((5, 2), np.float16), B1), {})).steps
    assert step.inputs == [("arg", 0), ("view", (1, (("slice", None, None, None), ("newaxis",))))]
    _compiles(spec)


@pytest.mark.parametrize(
    "key, ndim, python_key",
    [
        ((slice(None), None), 3, (slice(None), None, slice(None))),
        ((Ellipsis, None), 3, (slice(None), slice(None), None)),
        ((0,), 1, (0, slice(None))),
        ((slice(1, None), slice(None, None, -1)), 2, (slice(1, None), slice(None, None, -1))),
    ],
)
def test_view_keys_normalize_to_the_python_key_and_ndim(key, ndim, python_key):
    seen = {}

    def f(x):
        v = x[key]
        seen["ndim"] = v.ndim
        return v + 1

    kspec.fuse(f).spec(F2)
    assert seen["ndim"] == ndim
    items = _index._normalize(None, key, 2)  # type: ignore[arg-type]  # no error path is taken
    assert _index.key_of(items) == python_key


def test_equal_views_share_one_parameter():
    spec = kspec.fuse(lambda x, m: m[:, None] * x + m[:, None]).spec(F2, np.zeros(3, np.float32))
    assert [p.name for p in spec.in_params] == ["x", "m_view"]


def test_copy_is_a_new_array():
    for fn in (lambda x: x.copy(), lambda x: np.copy(x)):
        spec = kspec.fuse(fn).spec(F1)
        assert [p.name for p in spec.in_params] == ["x"] and len(spec.out_params) == 1


def test_a_returned_view_is_a_new_array():
    spec = kspec.fuse(lambda x: x[::-1]).spec(F1)
    assert [p.name for p in spec.in_params] == ["x_view"] and len(spec.out_params) == 1


def test_kspec_device_arrays_take_axis_adding_keys_as_a_reshape():
    arr = DeviceArray._wrap(0x7F0000000000, (5,), np.dtype(np.float32), 0, None)
    view = _index.view(arr, _index._normalize(None, (slice(None), None), 1))  # type: ignore[arg-type]
    assert view.shape == (5, 1)
    with pytest.raises(kspec.KspecTypeError, match="DeviceArray.*no indexing"):
        _index.view(arr, (("slice", 1, None, None),))


@pytest.mark.parametrize(
    "fn, words",
    [
        (lambda x: (x + 1)[0], "only array arguments"),
        (lambda x: x[np.array([0, 1])], "basic indexing"),
        (lambda x: x[0, 0, 0], "too many indices"),
        (lambda x: x[..., ...], "single ellipsis"),
    ],
)
def test_other_indexing_is_a_fuse_error(fn, words):
    with pytest.raises(kspec.FuseError, match=words):
        kspec.fuse(fn).spec(F2)


def test_too_many_indices_is_an_index_error_as_in_numpy():
    with pytest.raises(IndexError, match="too many indices"):  # CuPy's fusion tests accept IndexError only
        kspec.fuse(lambda x: x[0, 0, 0]).spec(F2)


def test_a_view_of_an_argument_updated_in_place_is_refused():
    def f(x):
        x += x[::-1]

    with pytest.raises(kspec.FuseError, match="through an index .* also updates that argument"):
        kspec.fuse(f).spec(F1)


# -- nan reductions, where= ------------------------------------------------------------------------------


def test_nansum_and_nanprod_replace_nan_before_reducing():
    spec = kspec.fuse(lambda x: np.nansum(x)).spec(F2)
    assert "isnan" in spec.preamble and spec.identity == "0" and spec.reduce_expr == "a + b"
    prod = kspec.fuse(lambda x: np.nanprod(x, axis=1)).spec(F2)
    assert "isnan" in prod.preamble and prod.identity == "1"
    ints = kspec.fuse(lambda x: np.nansum(x)).spec(I2)  # no NaN in integers: a plain sum, of int64
    assert "isnan" not in ints.preamble and ints.out_params[0].type == "int64"
    _compiles(spec)


def test_nanmax_reduces_with_fmax_and_integers_with_max():
    spec = kspec.fuse(lambda x: np.nanmax(x, axis=0)).spec(F2)
    assert "fmax" in spec.reduce_expr and spec.out_params[0].type == "float32"
    assert "fmin" in kspec.fuse(lambda x: np.nanmin(x)).spec(F2).reduce_expr
    assert "fmax" not in kspec.fuse(lambda x: np.nanmax(x)).spec(I2).reduce_expr
    _compiles(spec)


def test_ufunc_where_with_out_keeps_the_output_where_the_mask_is_false():
    def f(x, y, m):
        np.add(x, y, out=x, where=m)

    spec = kspec.fuse(f).spec(F1, F1, np.zeros(4, np.bool_))
    assert [p.name for p in spec.out_params] == ["x"] and "?" in spec.operation
    with pytest.raises(kspec.FuseError, match="where=mask.*needs out="):
        kspec.fuse(lambda x, m: np.add(x, x, where=m)).spec(F1, np.zeros(4, np.bool_))


# -- clear_cache -----------------------------------------------------------------------------------------


def test_clear_cache_makes_the_next_call_trace_again():
    traced = []

    @kspec.fuse
    def f(x, y):
        traced.append(1)
        return x - y * 2

    f.spec(F2, F2)
    f.spec(F2, F2)
    assert len(traced) == 1
    f.clear_cache()
    f.spec(F2, F2)
    assert len(traced) == 2


# -- CuPy's routines: a stand-in of CuPy's fusion thread-local and classes -----------------------------------


class _Kernel:
    def __init__(self, name):
        self.name = name


class _FusionVarArray:  # what cupy._core.fusion calls its traced arrays
    pass


@pytest.fixture
def fake_cupy(monkeypatch):
    """Modules named as CuPy's, holding what kspec reads: the fusion thread-local and the fusion array class;
    and routines written the way CuPy 14 writes them (ask the thread-local, else call the typed core)."""
    local_mod = types.ModuleType("cupy._core._fusion_thread_local")
    local_mod.thread_local = threading.local()
    fusion_mod = types.ModuleType("cupy._core.fusion")
    fusion_mod._FusionVarArray = _FusionVarArray
    core = types.ModuleType("cupy._core")
    core._fusion_thread_local = local_mod
    core.fusion = fusion_mod
    for name, mod in (("cupy", types.ModuleType("cupy")), ("cupy._core", core),
                      ("cupy._core._fusion_thread_local", local_mod), ("cupy._core.fusion", fusion_mod)):
        monkeypatch.setitem(sys.modules, name, mod)
    local = local_mod.thread_local

    def fusing():
        return getattr(local, "is_new_fusing", False)

    def nansum(a, axis=None, dtype=None, out=None, keepdims=False):
        if fusing():
            return local.history.call_reduction(_Kernel("cupy_nansum"), a, axis=axis, dtype=dtype, out=out)
        raise TypeError("Argument 'a' has incorrect type (expected cupy._core.core._ndarray_base, got TraceValue)")

    def amax(a, axis=None, out=None, keepdims=False):
        if fusing():
            if keepdims:
                raise NotImplementedError("cupy.amax does not support `keepdims` in fusion yet.")
            return local.history.call_reduction(_Kernel("cupy_max"), a, axis=axis, out=out)
        return a.max(axis=axis, out=out, keepdims=keepdims)

    def get_array_module(*args):
        return "cupy" if any(isinstance(a, _FusionVarArray) for a in args) else "numpy"

    # a routine whose non-fusing path asks a question of its result (a bool of a traced value: kspec's own
    # FuseError) from a frame of CuPy's code, and whose fusing path reduces: defined under a CuPy module name
    order = {"__name__": "cupy._statistics.order", "np": np, "fusing": fusing, "local": local, "_Kernel": _Kernel}
    exec(
        "def checked_max(a, axis=None, out=None, keepdims=False):\n"
        "    if fusing():\n"
        "        return local.history.call_reduction(_Kernel('cupy_nanmax'), a, axis=axis, out=out)\n"
        "    res = a.max(axis=axis)\n"
        "    if np.isnan(res).any():\n"
        "        pass\n"
        "    return res\n",
        order,
    )
    return types.SimpleNamespace(local=local, nansum=nansum, amax=amax, checked_max=order["checked_max"],
                                 get_array_module=get_array_module)


def test_cupy_routines_without_a_hook_reach_the_trace_through_cupys_fusion_dispatch(fake_cupy):
    spec = kspec.fuse(lambda x: fake_cupy.nansum(x, axis=1)).spec(F2)
    assert "isnan" in spec.preamble and spec.identity == "0"
    assert getattr(fake_cupy.local, "is_new_fusing", False) is False  # restored after the trace
    assert getattr(fake_cupy.local, "history", None) is None


def test_a_kspec_error_raised_inside_cupys_code_is_retraced_with_cupys_dispatch(fake_cupy):
    spec = kspec.fuse(lambda x: fake_cupy.checked_max(x, axis=1)).spec(F2)
    assert "fmax" in spec.reduce_expr or "fmax" in spec.preamble


def test_the_first_trace_leaves_cupys_dispatch_alone_so_keepdims_works(fake_cupy):
    spec = kspec.fuse(lambda x: fake_cupy.amax(x, axis=0, keepdims=True)).spec(F2)
    assert "keepdims=True" in spec.doc


def test_kspec_errors_are_not_retraced_with_cupys_dispatch(fake_cupy):
    traced = []

    def f(x):
        traced.append(1)
        return np.sum(x, axis=3)

    with pytest.raises(np.exceptions.AxisError):
        kspec.fuse(f).spec(F2)
    assert len(traced) == 1


def test_get_array_module_sees_a_traced_array_as_cupys(fake_cupy):
    seen = []

    def f(x, s):
        seen.append((fake_cupy.get_array_module(x), fake_cupy.get_array_module(s)))
        assert type(x).__name__ == "TraceValue"
        return x * s

    kspec.fuse(f).spec(F2, 2.0)
    assert seen == [("cupy", "numpy")]


def test_without_cupy_a_traced_array_is_its_own_class(monkeypatch):
    monkeypatch.delitem(sys.modules, "cupy._core.fusion", raising=False)
    seen = []
    kspec.fuse(lambda x: seen.append(x.__class__) or x + 1).spec(F2)
    assert seen[0].__name__ == "TraceValue"


def test_a_failed_second_trace_says_why_it_ran_and_what_traces_without_cupys_dispatch(fake_cupy):
    def f(x):
        return fake_cupy.amax(x, axis=0, keepdims=True) + fake_cupy.nansum(x)

    with pytest.raises(NotImplementedError, match="keepdims") as info:
        kspec.fuse(f).spec(F2)
    note = "".join(info.value.__notes__)
    assert "second time with CuPy's fusion dispatch" in note and "x.max(keepdims=True)" in note
    assert "incorrect type" in note  # the first trace's error, which started the second
