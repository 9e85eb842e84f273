"""The Python surface code written for CuPy uses on kernel objects and arguments (issue 52), without a GPU.

- Kernel objects: CuPy's parameter records (``in_params[i].ctype`` / ``.dtype`` / ``.raw`` / ``.is_const``),
  ``name``, ``nin``/``nout``/``nargs``, a ReductionKernel's texts as CuPy holds them (``identity`` ``''`` for
  none, ``reduce_type`` the first output's ``ctype`` by default), reused to build another kernel.
- Arguments: CuPy's scalar conversion for kernels of the CuPy-style constructors (a float for an integer
  parameter, a scalar for a raw parameter), the typed path's stricter rules for kernels of spec files.
- Outputs of a call without any array: the library ``library_without_arrays`` picks.
- Identical constructor calls share what the first one built (kspec/kernels/records/_constructor_memo.py); a RawKernel's
  function attributes stay on the kernel that set them.

Launches run on kspec's CPU device (``xp``: and with CuPy arrays on a GPU, where the test takes ``xp``).
"""

from __future__ import annotations

import pickle
import sys
import types
import weakref

import numpy as np
import pytest

import kspec
from kspec import ArraySpec
from kspec.kernels.planning._binding import bind, library_without_arrays, scalar_bytes
from kspec.kernels.records._constructor_memo import SPEC_KERNELS, ConstructorMemo
from kspec.render import specialize
from kspec.spec import ElementwiseSpec

EW = kspec.ElementwiseKernel
RED = kspec.ReductionKernel


def typed(in_params: str, out_params: str, operation: str, name: str) -> kspec.ElementwiseKernel:
    """The same kernel from a spec (the typed path a spec file takes)."""
    spec = ElementwiseSpec(name=name, in_params=in_params, out_params=out_params, operation=operation)
    return EW.from_spec(spec)


# -- CuPy's parameter records and attributes -----------------------------------------------------------------


def test_parameter_records_carry_cupys_fields():
    k = EW("raw T x, _non_const float32 y, float a", "int64 z, raw U w", "z = a; w[i] = x[i];", "records")
    x, y, a = k.in_params
    z, w = k.out_params
    assert (x.name, x.ctype, x.dtype, x.raw, x.is_const) == ("x", "T", None, True, True)
    assert (y.name, y.ctype, y.dtype, y.raw, y.is_const) == ("y", "float", np.dtype(np.float32), False, False)
    assert (a.ctype, a.dtype, a.is_const) == ("double", np.dtype(np.float64), True)  # 'float' is NumPy's float64
    assert (z.ctype, z.dtype, z.raw, z.is_const) == ("long long", np.dtype(np.int64), False, False)  # outputs: never const
    assert (w.ctype, w.dtype, w.raw, w.is_const) == ("U", None, True, False)
    assert k.params == k.in_params + k.out_params
    assert (k.nin, k.nout, k.nargs, k.name, k.__name__) == (3, 2, 5, "records", "records")
    # kspec's own fields stay for the layers above (kspec.torch reads them)
    assert y.type == "float32" and y.non_const and x.is_placeholder and not y.is_placeholder


@pytest.mark.parametrize(
    "dtype, ctype",
    [("bool", "bool"), ("int8", "signed char"), ("uint16", "unsigned short"), ("int32", "int"),
     ("uint64", "unsigned long long"), ("float16", "__half"), ("float64", "double"),
     ("complex64", "complex<float>"), ("complex128", "complex<double>")],
)
def test_ctype_is_the_c_type_the_kernel_sees(dtype, ctype):
    (param,) = EW(f"{dtype} x", "raw T y", "", f"ctype_{dtype}").in_params
    assert param.ctype == ctype and param.dtype == np.dtype(dtype)


def test_parameter_records_compare_and_print_as_cupys():
    first = EW("raw T x", "T y", "y = x[i]", "cmp_a").in_params[0]
    same = EW("raw T x, float32 s", "T y", "y = x[i] * s", "cmp_b").in_params[0]
    assert first == same and hash(first) == hash(same)
    assert first != EW("T x", "T y", "y = x", "cmp_c").in_params[0]  # not raw
    assert repr(first) == "<ParameterInfo(name='x' dtype=None ctype='T' raw=True is_const=True)>"


def test_reduction_texts_are_cupys_values():
    rk = RED("X x", "Y y", "x * x", "a + b", "y = a / _in_ind.size()", "0", "rms_like")
    assert (rk.name, rk.__name__, rk.nin, rk.nout, rk.nargs) == ("rms_like", "rms_like", 1, 1, 2)
    assert (rk.map_expr, rk.reduce_expr, rk.post_map_expr, rk.identity) == ("x * x", "a + b", "y = a / _in_ind.size()", "0")
    assert rk.reduce_type == "Y"  # CuPy: the first output's ctype when none is given
    assert (rk.preamble, rk.options) == ("", ())
    texts = ("name", "map_expr", "reduce_expr", "post_map_expr", "identity", "reduce_type", "preamble")
    assert all(type(getattr(rk, t)) is str for t in texts)  # values, never methods: code is built from them
    none = RED("float32 x", "float32 y", "x", "max(a, b)", "y = a", None, "no_identity")
    assert none.identity == "" and none.spec.identity is None and none.reduce_type == "float"
    assert RED("T x", "T y", "x", "a + b", "y = a", 0, "number_identity").identity == "0"
    assert RED("T x", "T y", "x", "a + b", "y = a", "0", "given_type", reduce_type="int").reduce_type == "int"
    assert RED("T x", "T y", "x", "a + b", "y = a", "0", "with_options", options=["-DK=1"]).options == ("-DK=1",)


SUM_OF_SQUARES = RED("X x", "Y y", "twice(x) * x", "a + b", "y = a / 2", "0", "sumsq",
                     preamble="template <class V> __device__ V twice(V v) { return v + v; }")


def reduction_as_device_code(rk: kspec.ReductionKernel, in_ctype: str, out_ctype: str) -> str:
    """A serial kernel over one row made of a ReductionKernel's attributes, as library code written for CuPy
    builds one (cupyx.scipy.ndimage's generic_filter does it with CuPy's own kernel environment)."""
    (x,), (y,) = rk.in_params, rk.out_params
    return f"""{rk.preamble}
typedef {in_ctype} {x.ctype};
typedef {out_ctype} {y.ctype};
typedef {rk.reduce_type} _type_reduce;
extern "C" __global__ void {rk.name}_row(const {x.ctype}* row, {y.ctype}* out, int n) {{
    _type_reduce a = _type_reduce({rk.identity});
    for (int j = 0; j < n; ++j) {{
        {"const" if x.is_const else ""} {x.ctype}& {x.name} = row[j];
        _type_reduce b = static_cast<_type_reduce>({rk.map_expr});
        a = {rk.reduce_expr};
    }}
    {y.ctype}& {y.name} = out[0];
    {rk.post_map_expr};
}}"""


def test_a_reduction_kernels_attributes_build_another_kernel():
    code = reduction_as_device_code(SUM_OF_SQUARES, "float", "double")
    kspec.RawKernel(code, "sumsq_row").compile(arch="sm_90")  # NVRTC, no GPU


def test_the_kernel_built_from_the_attributes_computes(on_cpu_device):
    row = np.arange(1, 6, dtype=np.float32)
    out = np.zeros(1, np.float64)
    kspec.RawKernel(reduction_as_device_code(SUM_OF_SQUARES, "float", "double"), "sumsq_row")((1,), (1,), (row, out, np.int32(5)))
    assert out[0] == float((row.astype(np.float64) ** 2).sum())


# -- CuPy's scalar rules for the drop-in constructors, the typed path's stricter ones -------------------------


def test_cached_codes_count_the_specializations_calls_used(on_cpu_device):
    # CuPy's _cached_codes: empty before a call, one entry per argument types, not per call or per shape
    ew = kspec.ElementwiseKernel("T x, T y", "T z", "z = x + y", "cached_codes_ew")
    rk = kspec.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", name="cached_codes_rk")
    assert len(ew._cached_codes) == len(rk._cached_codes) == 0
    a = np.arange(6, dtype=np.float32)
    ew(a, a)
    ew(a[:3], a[:3])
    ew.source(a.astype(np.int8), a.astype(np.int8))  # inspecting is not a call
    assert len(ew._cached_codes) == 1
    ew(a.astype(np.float64), a.astype(np.float64))
    rk(a)
    rk(a.reshape(2, 3), axis=1)
    assert (len(ew._cached_codes), len(rk._cached_codes)) == (2, 1)
    again = kspec.ElementwiseKernel("T x, T y", "T z", "z = x + y", "cached_codes_ew")  # the same kernel, built again
    assert len(again._cached_codes) == 2
    with pytest.raises(TypeError):
        again._cached_codes[("x",)] = None  # a view, not the kernel's own table


@pytest.mark.parametrize(
    "value, dtype, expected",
    [(2.0, "int32", 2), (2.7, "int32", 2), (-2.7, "int32", -2), (np.float64(3.9), "int16", 3), (True, "float32", 1.0),
     (5, "bool", True), (0.0, "bool", False), (7, "uint8", 7), (np.int64(-1), "int8", -1), (3, "float16", 3.0)],
)
def test_cupy_rules_store_a_scalar_as_numpy_stores_an_item(value, dtype, expected):
    assert scalar_bytes("k", "s", value, dtype, cupy_rules=True) == np.asarray(expected, dtype=dtype).tobytes()


@pytest.mark.parametrize(
    "value, dtype, error, phrase",
    [(float("nan"), "int32", kspec.KspecValueError, "s = nan does not convert to int32"),
     (2**40, "int32", kspec.KspecOverflowError, "s = 1099511627776 does not fit int32"),
     (-1, "uint32", kspec.KspecOverflowError, "s = -1 does not fit uint32"),
     (1 + 2j, "float64", kspec.KspecTypeError, r"s = \(1\+2j\) does not convert to float64")],
)
def test_cupy_rules_refuse_what_numpy_refuses(value, dtype, error, phrase):
    with pytest.raises(error, match=phrase):
        scalar_bytes("k", "s", value, dtype, cupy_rules=True)
    assert issubclass(error, (ValueError, TypeError, OverflowError))


def test_the_typed_path_still_refuses_a_fraction_or_an_imaginary_part():
    with pytest.raises(kspec.KspecTypeError, match="s is int32 but got a float scalar 2.0; convert it explicitly"):
        scalar_bytes("k", "s", 2.0, "int32")
    with pytest.raises(kspec.KspecTypeError, match="complex scalar"):
        scalar_bytes("k", "s", 1j, "float32")


def test_the_constructors_bind_by_cupys_rules_and_spec_kernels_by_the_typed_ones():
    args = ("int32 x, int32 order", "int32 z", "z = x * order", "order_scale")
    x = ArraySpec((4,), "int32")
    assert EW(*args).output_specs(x, 52.0) == (x,)  # cupyx.scipy.signal's chebwin passes a float order
    with pytest.raises(kspec.KspecTypeError, match="order is int32 but got a float scalar 52.0"):
        typed(*args).output_specs(x, 52.0)
    assert EW(*args)._cupy_rules and not typed(*args)._cupy_rules
    restored = pickle.loads(pickle.dumps(EW(*args)))
    assert restored._cupy_rules and restored.output_specs(x, 2.5) == (x,)


def test_a_float_scalar_for_an_integer_parameter_is_truncated_as_cupy_does(xp):
    k = EW("int32 x, int32 s", "int32 z", "z = x * s", "truncating_scale")
    x = xp.arange(5, dtype=np.int32)
    np.testing.assert_array_equal(xp.asnumpy(k(x, 3.9)), np.arange(5) * 3)
    np.testing.assert_array_equal(xp.asnumpy(k(x, -2.5)), np.arange(5) * -2)  # toward zero
    np.testing.assert_array_equal(xp.asnumpy(k(x, 2)), np.arange(5) * 2)  # an int again: same signature, new value
    with pytest.raises(kspec.KspecOverflowError, match="s = 4294967296 does not fit int32"):
        k(x, 2**32)


def test_a_scalar_for_a_raw_parameter_is_passed_by_value(xp):
    k = EW("raw T a, raw int32 n", "T w", "T t = 0; for (int j = 0; j < n; ++j) t += a[j]; w = t + i;", "raw_by_value")
    a = xp.asarray(np.arange(6, dtype=np.float64))
    w = k(a, 4, size=3)  # every array raw: size= decides; the output is the arrays' library's
    assert isinstance(w, type(a))
    np.testing.assert_array_equal(xp.asnumpy(w), [6, 7, 8])
    np.testing.assert_array_equal(xp.asnumpy(k(a, 3.0, size=2)), [3, 4])  # converted to int32 as any scalar
    spec = ElementwiseSpec(name="raw_typed", in_params="raw T a, raw int32 n", out_params="T w", operation="w = a[i] + n;")
    with pytest.raises(kspec.KspecTypeError, match="n is a raw parameter and needs a device array, got a scalar int"):
        EW.from_spec(spec).output_specs(ArraySpec((6,), "float64"), 4, size=3)


def test_a_raw_input_given_a_scalar_renders_as_a_value():
    spec = ElementwiseSpec(name="k", in_params="raw T x, raw int32 n", out_params="T y", operation="y = x[i] * n")
    (x, n, _y) = specialize(spec, {"T": "float32"}, scalars=["n"]).operands
    assert (x.raw, x.scalar, n.raw, n.scalar) == (True, False, False, True)
    k = EW("raw T x, raw int32 n", "T y", "y = x[i] * n", "raw_value_source")
    source = k.source(np.zeros(4, np.float32), 3, np.zeros(4, np.float32))
    assert "const int n" in source and "RawView<int> n" not in source


def test_bind_reads_the_flag_from_its_caller():
    spec = EW("int32 x, int32 s", "int32 z", "z = x * s", "bind_flag").spec
    x = ArraySpec((3,), "int32")
    assert bind(spec, (x, 2.0), None, abstract=True, cupy_rules=True).scalars["s"] == np.int32(2).tobytes()
    with pytest.raises(kspec.KspecTypeError):
        bind(spec, (x, 2.0), None, abstract=True)


# -- where the outputs of a call without arrays go -------------------------------------------------------------


class _Stream:
    pass


def _stream_of(module: str) -> object:
    cls = type("Stream", (_Stream,), {"__module__": module})
    return cls()


def test_a_call_without_arrays_allocates_in_the_library_of_its_stream_or_cupys(monkeypatch):
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    assert library_without_arrays(None, True, 0) is None  # no CuPy in the process: kspec's arrays
    assert library_without_arrays(_stream_of("torch.cuda.streams"), False, 0) == "torch"
    assert library_without_arrays(_stream_of("cupy.cuda.stream"), False, 0) == "cupy"
    assert library_without_arrays(_stream_of("kspec.runtime._stream"), True, 0) is None
    monkeypatch.setitem(sys.modules, "cupy", types.ModuleType("cupy"))
    assert library_without_arrays(None, True, 0) == "cupy"  # code written for CuPy indexes what it gets back
    assert library_without_arrays(None, False, 0) is None  # spec kernels: kspec's arrays, as before
    assert library_without_arrays(None, True, -1) is None  # the CPU device


def test_a_call_without_arrays_on_the_cpu_device_returns_a_kspec_array(on_cpu_device):
    out = EW("float64 x", "float64 y", "y = x + i", "no_arrays")(1.5, size=4)
    assert isinstance(out, kspec.DeviceArray)
    np.testing.assert_array_equal(out.get(), [1.5, 2.5, 3.5, 4.5])


def test_a_call_without_arrays_keys_the_device_and_where_outputs_go(on_cpu_device, monkeypatch):
    from kspec.kernels.callpath._signature import make_dispatcher

    for arg_types, args in (((float,), (1.5,)), ((), ())):  # scalars only; a kernel without inputs
        keys, pointers, _ = make_dispatcher(arg_types, False, [0], lambda: None).read(args, None)
        assert keys == (-1, type(None), "cupy" in sys.modules) and pointers == (0,) * len(args)  # -1: the CPU device
    monkeypatch.setitem(sys.modules, "cupy", types.ModuleType("cupy"))
    torch_stream = _stream_of("torch.cuda.streams")
    assert make_dispatcher((), False, [0], lambda: None).read((), torch_stream)[0] == (-1, type(torch_stream), True)


def test_a_call_without_arrays_is_prepared_once(on_cpu_device, monkeypatch):
    k = EW("", "float64 w", "w = 2 * i", "no_inputs")  # cupyx.scipy.signal's windows: kernel(size=M)
    np.testing.assert_array_equal(k(size=4).get(), [0, 2, 4, 6])

    def planned(*_args, **_kwargs):
        raise AssertionError("a call without arrays was planned again")

    monkeypatch.setattr("kspec.kernels._elementwise.prepare_elementwise", planned)
    np.testing.assert_array_equal(k(size=4).get(), [0, 2, 4, 6])
    np.testing.assert_array_equal(EW("", "float64 w", "w = 2 * i", "no_inputs")(size=4).get(), [0, 2, 4, 6])


# -- identical constructor calls share the state the first built ------------------------------------------------

ARGS = ("float32 x, float32 y", "float32 z", "z = (x - y) * (x - y)", "shared_state")


def test_identical_constructor_calls_share_their_state():
    a, b = EW(*ARGS), EW(*ARGS)
    assert a is not b
    assert a._calls is b._calls and a._spec is b._spec and a._key == b._key
    assert EW(*ARGS[:3], "shared_state_2")._calls is not a._calls
    assert EW(*ARGS, options=["-DX=1"])._calls is EW(*ARGS, options=("-DX=1",))._calls  # a list keys as a tuple
    a.note = "mine"
    assert not hasattr(b, "note")  # objects stay separate
    validated = b.spec  # the spec model: b's plain spec is validated on this first read
    assert b._spec is validated and a._spec is not validated and EW(*ARGS)._spec is a._spec  # b's only


def test_only_exact_arguments_share():
    def red(identity):
        return RED("T x", "T y", "x", "a + b", "y = a", identity, "identity_types")

    assert red(0)._calls is not red(0.0)._calls  # equal values of other types build other specs
    assert red(0)._calls is red(0)._calls
    assert red(0).identity == "0" and red(0.0).identity == "0.0"
    ones = [EW(*ARGS, reduce_dims=1) for _ in range(2)]
    assert ones[0]._calls is not ones[1]._calls  # a flag that is not a bool is not remembered
    assert ones[0].reduce_dims is True

    class Mine(EW):
        pass

    assert type(Mine(*ARGS)) is Mine and Mine(*ARGS)._calls is not EW(*ARGS)._calls


def test_a_failed_construction_is_not_remembered():
    size = len(SPEC_KERNELS)
    for _ in range(2):
        with pytest.raises(ValueError, match="Invalid kernel name"):
            EW("T x", "T y", "y = x", "not a name")
    assert len(SPEC_KERNELS) == size


def test_the_memo_is_bounded_oldest_first():
    memo = ConstructorMemo(max_entries=2)
    for n in range(3):
        key, found = memo.find(("k", n))
        assert found is None
        memo.put(key, n)
    assert len(memo) == 2 and memo.find(("k", 0))[1] is None and memo.find(("k", 2))[1] == 2
    assert memo.find((["unhashable"],)) == (None, None)


def test_a_new_identical_kernel_calls_without_planning(on_cpu_device, monkeypatch):
    args = ("float32 x, float32 y", "float32 z", "z = x * y", "plan_once")
    x = np.arange(1000, dtype=np.float32)
    np.testing.assert_array_equal(EW(*args)(x, x), x * x)

    def planned(*_args, **_kwargs):
        raise AssertionError("an identical kernel's signature was planned again")

    monkeypatch.setattr("kspec.kernels._elementwise.prepare_elementwise", planned)
    np.testing.assert_array_equal(EW(*args)(x, x), x * x)


# -- raw modules: one build per identical construction; attributes stay on their kernel ----------------------

SOURCE = r"""
extern "C" __global__ void double_it(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2 * x[i];
}
"""


def test_identical_raw_modules_share_one_build():
    m1, m2 = kspec.RawModule(code=SOURCE), kspec.RawModule(code=SOURCE)
    assert m1 is not m2 and m1._build is m2._build
    k1, k2 = m1.get_function("double_it"), m2.get_function("double_it")
    assert k1 is not k2 and type(k1) is type(k2) and k1._launcher is k2._launcher
    assert m1.get_function("double_it") is k1
    assert kspec.RawModule(code=SOURCE, options=("-DX=1",))._build is not m1._build
    assert kspec.RawKernel(SOURCE, "double_it")._module._build is kspec.RawKernel(SOURCE, "double_it")._module._build
    assert kspec.RawModule(code=SOURCE, enable_cooperative_groups=1)._build is not m1._build  # not a bool: not kept


def test_a_kernel_from_a_module_of_the_moment_keeps_no_cycle():
    """``RawModule(code=...).get_function(...)`` on every call: the module goes when its last reference does
    (no reference cycle left for the collector); the kernel keeps the build and answers for its module."""
    module = kspec.RawModule(code=SOURCE)
    gone = weakref.ref(module)
    kernel = module.get_function("double_it")
    del module
    assert gone() is None
    assert kernel.code == SOURCE and kernel.module._build is kernel._build
    assert kernel.module.get_function("double_it")._launcher is kernel._launcher
    assert pickle.loads(pickle.dumps(kernel))._build is kernel._build


def test_modules_from_files_are_loaded_per_construction(tmp_path):
    binary = tmp_path / "double_it.cubin"
    binary.write_bytes(kspec.RawModule(code=SOURCE)._program("sm_90").binary)
    assert kspec.RawModule(path=binary)._build is not kspec.RawModule(path=binary)._build


def test_function_attributes_stay_on_the_kernel_that_set_them(on_cpu_device):
    k1 = kspec.RawModule(code=SOURCE).get_function("double_it")
    k2 = kspec.RawModule(code=SOURCE).get_function("double_it")
    default = k2.max_dynamic_shared_size_bytes
    k1.max_dynamic_shared_size_bytes = 1024
    assert k1.max_dynamic_shared_size_bytes == 1024 and k2.max_dynamic_shared_size_bytes == default
    assert k1._launcher is not k2._launcher
    k3 = kspec.RawModule(code=SOURCE).get_function("double_it")
    k3.max_dynamic_shared_size_bytes = 1024
    assert k3._launcher is k1._launcher  # the same values: one function serves both
    x = np.arange(8, dtype=np.float32)
    for k in (k1, k2, k3):
        y = np.zeros(8, np.float32)
        k((1,), (8,), (x, y, np.int32(8)))
        np.testing.assert_array_equal(y, 2 * x)
    restored = pickle.loads(pickle.dumps(k1))
    assert restored.max_dynamic_shared_size_bytes == 1024
    assert kspec.RawModule(code=SOURCE).get_function("double_it").max_dynamic_shared_size_bytes == default
