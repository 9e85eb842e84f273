"""ElementwiseKernel / ReductionKernel bad calls, without a GPU.

Every call is validated before the CUDA driver or NVRTC is touched, so fake device arrays (a
``DeviceArray`` over a made-up pointer) are enough: each case asserts the exception class and the words a
person needs to fix the call (the kernel's name, the parameter, the dtypes or shapes involved). The
``_no_driver`` fixture makes any driver or NVRTC use during these tests an assertion failure, so the
contract "validate first" holds on a GPU machine too.

Successful calls need a GPU and live elsewhere; here only construction (attributes, spec, pickling) is
checked on the good path.
"""

from __future__ import annotations

import pickle
import re

import numpy as np
import pytest

import kspec
from kspec.runtime._devicearray import DeviceArray

PTR = 0x7F0000000000


# -- helpers -------------------------------------------------------------------------------------------


def fake(shape=(4,), dtype="float32", device=0, strides=None):
    """A device array that is never dereferenced: validation only reads its description."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return DeviceArray._wrap(PTR, shape, np.dtype(dtype), device, None, strides=strides)


def error_class(name: str) -> type[BaseException]:
    # Resolved when the test runs, so the module is collected even before a class (AxisError) exists.
    return getattr(kspec, name)


class N:
    """A name (parameter, placeholder, dtype) that must appear as a whole word, case-sensitively."""

    def __init__(self, name: str) -> None:
        self.pattern = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])")
        self.text = name

    def search(self, message: str) -> bool:
        return self.pattern.search(message) is not None


class Any_:
    """One of several words (case-insensitive)."""

    def __init__(self, *words: str) -> None:
        self.words = words
        self.text = " | ".join(words)

    def search(self, message: str) -> bool:
        return any(re.search(re.escape(w), message, re.IGNORECASE) for w in self.words)


def _matches(word: object, message: str) -> bool:
    if isinstance(word, (N, Any_)):
        return word.search(message)
    return re.search(re.escape(str(word)), message, re.IGNORECASE) is not None


def check_message(exc: BaseException, kernel_name: str | None, words) -> None:
    message = str(exc)
    if kernel_name is not None:
        assert f"kernel '{kernel_name}'" in message, f"the message does not name kernel '{kernel_name}': {message!r}"
    missing = [getattr(w, "text", w) for w in words if not _matches(w, message)]
    assert not missing, f"the message lacks {missing}: {message!r}"


@pytest.fixture(autouse=True)
def _no_driver(monkeypatch):
    """Validation must come before the CUDA driver and NVRTC: any use of them here fails the test."""
    from kspec.compiler import _nvrtc
    from kspec.runtime import _driver

    def touched(*args, **kwargs):
        raise AssertionError("the CUDA driver or NVRTC was used before the call was validated")

    monkeypatch.setattr(_driver, "driver", touched)
    monkeypatch.setattr(_nvrtc, "load_nvrtc", touched)


# -- kernels -------------------------------------------------------------------------------------------


def _ew(in_params, out_params, operation, name, **kwargs):
    return kspec.ElementwiseKernel(in_params, out_params, operation, name, **kwargs)


def _red(in_params, out_params, map_expr, reduce_expr, post_map_expr, identity, name, **kwargs):
    return kspec.ReductionKernel(in_params, out_params, map_expr, reduce_expr, post_map_expr, identity, name, **kwargs)


def _typed(kernel):
    """The same kernel from its spec: the typed path (spec files, generated modules), stricter about scalars
    than the CuPy-style constructors, which convert a float for an integer and pass a scalar for a raw
    parameter by value as CuPy does (tests/kernels_tests/test_cupy_surface.py)."""
    return type(kernel).from_spec(kernel.spec)


def _scalar_kernel(type_name):
    return lambda: _ew(f"T x, {type_name} coef", "T z", "z = x * coef", f"scale_{type_name}")


# key -> (kernel name, factory)
KERNELS = {
    # elementwise
    "add": ("add", lambda: _ew("float32 x, float32 y", "float32 z", "z = x + y", "add")),
    "tadd": ("tadd", lambda: _ew("T x, T y", "T z", "z = x + y", "tadd")),
    "tcopy": ("tcopy", lambda: _ew("T x", "T z", "z = x", "tcopy")),
    "xyz": ("xyz", lambda: _ew("X x, Y y", "Z z", "z = x + y", "xyz")),
    "scale_int8": ("scale_int8", _scalar_kernel("int8")),
    "scale_uint32": ("scale_uint32", _scalar_kernel("uint32")),
    "scale_int64": ("scale_int64", _scalar_kernel("int64")),
    "scale_int32": ("scale_int32", lambda: _typed(_scalar_kernel("int32")())),
    "scale_float32": ("scale_float32", _scalar_kernel("float32")),
    "rawin": ("rawin", lambda: _typed(_ew("raw T w, T x", "T z", "z = x * w[i]", "rawin"))),
    "gather": ("gather", lambda: _ew("raw T src, int64 idx", "T dst", "dst = src[idx]", "gather")),
    "rawcopy": ("rawcopy", lambda: _ew("raw T src", "raw T dst", "dst[i] = src[i]", "rawcopy")),
    # reductions
    "sumsq": ("sumsq", lambda: _red("T x", "T y", "x * x", "a + b", "y = a", "0", "sumsq")),
    "rmax": ("rmax", lambda: _red("T x", "T y", "x", "max(a, b)", "y = a", None, "rmax")),
    "wsum": ("wsum", lambda: _typed(_red("T x, raw T w", "T y", "x * w[_J]", "a + b", "y = a", "0", "wsum"))),
    "rdot": ("rdot", lambda: _red("T x, T y", "T z", "x * y", "a + b", "z = a", "0", "rdot")),
}


@pytest.fixture
def make_kernel():
    """``make_kernel(key)`` -> (kernel, its name)."""

    def make(key):
        name, factory = KERNELS[key]
        return factory(), name

    return make


@pytest.fixture
def arr():
    """``arr(shape, dtype='float32', device=0, strides=None)`` -> a fake device array."""
    return fake


# -- elementwise: bad calls ----------------------------------------------------------------------------
# (kernel key, call(k, arr), error class name, words the message must hold)

ELEMENTWISE_CASES = [
    # argument count
    pytest.param("add", lambda k, a: k(a(), a(), a(), a()), "KspecTypeError", [N("2"), N("3"), N("4")], id="count-too-many"),
    pytest.param("add", lambda k, a: k(a()), "KspecTypeError", [N("2"), N("3"), N("1")], id="count-one"),
    pytest.param("add", lambda k, a: k(), "KspecTypeError", [N("2"), N("3"), N("0")], id="count-none"),
    pytest.param("tcopy", lambda k, a: k(a(), a(), a()), "KspecTypeError", [N("1"), N("2"), N("3")], id="count-tcopy-three"),
    # dtypes of arrays
    pytest.param("add", lambda k, a: k(a(dtype="float64"), a()), "KspecTypeError", [N("x"), "float64", "float32"], id="dtype-explicit-input"),
    pytest.param("add", lambda k, a: k(a(), a(dtype="int32")), "KspecTypeError", [N("y"), "int32", "float32"], id="dtype-explicit-second-input"),
    pytest.param("add", lambda k, a: k(a(), a(), a(dtype="float64")), "KspecTypeError", [N("z"), "float64", "float32"], id="dtype-explicit-output"),
    pytest.param("tadd", lambda k, a: k(a(), a(dtype="float64")), "KspecTypeError", [N("y"), "float64", "float32", N("T")], id="placeholder-conflict"),
    pytest.param("tcopy", lambda k, a: k(a(), a(dtype="float64")), "KspecTypeError", [N("x"), "float32", "float64", N("T")], id="placeholder-bound-by-output-first"),
    pytest.param("tadd", lambda k, a: k(a(dtype="int32"), a(dtype="int32"), a(dtype="int64")), "KspecTypeError", [N("int32"), N("int64"), N("T")], id="placeholder-output-vs-inputs"),
    pytest.param("xyz", lambda k, a: k(a(), a()), "KspecTypeError", ["'Z'", N("z"), "bound"], id="placeholder-unbound-output"),
    pytest.param("tadd", lambda k, a: k(1.0, 2.0), "KspecTypeError", ["'T'", "scalar"], id="placeholder-scalars-only"),
    pytest.param("tcopy", lambda k, a: k(a(dtype="M8[s]")), "KspecTypeError", [N("x")], id="unsupported-dtype-datetime"),
    pytest.param("tcopy", lambda k, a: k(a(dtype="U3")), "KspecTypeError", [N("x")], id="unsupported-dtype-str"),
    # Python scalars
    pytest.param("scale_int8", lambda k, a: k(a(), 300), "KspecOverflowError", [N("coef"), "int8"], id="scalar-overflow-int8"),
    pytest.param("scale_int8", lambda k, a: k(a(), -129), "KspecOverflowError", [N("coef"), "int8"], id="scalar-underflow-int8"),
    pytest.param("scale_uint32", lambda k, a: k(a(), -1), "KspecOverflowError", [N("coef"), "uint32"], id="scalar-negative-uint32"),
    pytest.param("scale_int64", lambda k, a: k(a(), 2**70), "KspecOverflowError", [N("coef"), "int64"], id="scalar-overflow-int64"),
    pytest.param("scale_int32", lambda k, a: k(a(), 1.5), "KspecTypeError", [N("coef"), "int32"], id="scalar-float-to-int"),
    pytest.param("scale_float32", lambda k, a: k(a(), 1j), "KspecTypeError", [N("coef"), "float32"], id="scalar-complex-to-float"),
    pytest.param("rawin", lambda k, a: k(1.0, a()), "KspecTypeError", [N("w"), "raw"], id="raw-param-scalar"),
    # what is not a device array
    pytest.param("add", lambda k, a: k(a(), a(), 3.0), "KspecTypeError", [N("z"), "device array"], id="output-python-scalar"),
    pytest.param("add", lambda k, a: k(a(), a(), [0.0] * 4), "KspecTypeError", [N("z"), "device array"], id="output-list"),
    pytest.param("add", lambda k, a: k(a(), a(), np.zeros(4, np.float32)), "KspecTypeError", [N("z"), "host memory"], id="output-numpy"),
    pytest.param("add", lambda k, a: k(np.zeros(4, np.float32), a()), "KspecTypeError", [N("x"), "host memory"], id="input-numpy"),
    pytest.param("add", lambda k, a: k(a(), object()), "KspecTypeError", [N("y")], id="input-object"),
    pytest.param("add", lambda k, a: k("abc", a()), "KspecTypeError", [N("x")], id="input-str"),
    # shapes
    pytest.param("add", lambda k, a: k(a((2, 5)), a((3,))), "KspecValueError", ["broadcast", "(2, 5)", "(3,)"], id="broadcast-failure"),
    pytest.param("add", lambda k, a: k(a((2, 5)), a((5,)), a((5,))), "KspecValueError", [N("z"), "(2, 5)", "(5,)"], id="output-shape-too-small"),
    pytest.param("add", lambda k, a: k(a((2, 5)), a((2, 5)), a((3, 5))), "KspecValueError", [N("z"), "(2, 5)", "(3, 5)"], id="output-shape-mismatch"),
    # size=
    pytest.param("gather", lambda k, a: k(a(10), a(5, "int64"), size=5), "KspecValueError", ["size"], id="size-with-nonraw-array"),
    pytest.param("rawcopy", lambda k, a: k(a(10), a(10)), "KspecValueError", ["size"], id="all-raw-without-size"),
    pytest.param("rawcopy", lambda k, a: k(a(10), a(10), size=-1), "KspecValueError", ["size"], id="size-negative"),
    pytest.param("rawcopy", lambda k, a: k(a(10), a(10), size=1.5), "KspecTypeError", ["size"], id="size-float"),
    pytest.param("rawcopy", lambda k, a: k(a(10), a(10), size="3"), "KspecTypeError", ["size"], id="size-str"),
    # block_size=
    pytest.param("add", lambda k, a: k(a(), a(), block_size=0), "KspecValueError", ["block_size"], id="block-size-zero"),
    pytest.param("add", lambda k, a: k(a(), a(), block_size=-32), "KspecValueError", ["block_size"], id="block-size-negative"),
    pytest.param("add", lambda k, a: k(a(), a(), block_size=2048), "KspecValueError", ["block_size"], id="block-size-too-large"),
    pytest.param("add", lambda k, a: k(a(), a(), block_size=1.5), "KspecTypeError", ["block_size"], id="block-size-float"),
    # keywords, devices, streams
    pytest.param("add", lambda k, a: k(a(), a(), axis=0), "KspecTypeError", [N("axis")], id="kwarg-axis-on-elementwise"),
    pytest.param("tcopy", lambda k, a: k(a(), bogus=1), "KspecTypeError", [N("bogus")], id="kwarg-unknown"),
    pytest.param("add", lambda k, a: k(a(device=0), a(device=1)), "KspecValueError", [N("x"), N("y"), "device"], id="devices-differ"),
    pytest.param("add", lambda k, a: k(a(device=0), a(device=0), a(device=1)), "KspecValueError", [N("x"), N("z"), "device"], id="devices-differ-output"),
    pytest.param("add", lambda k, a: k(a(), a(), stream="abc"), "KspecTypeError", ["stream"], id="stream-str"),
]


@pytest.mark.parametrize(("key", "call", "error", "words"), ELEMENTWISE_CASES)
def test_elementwise_bad_call(make_kernel, arr, key, call, error, words):
    k, name = make_kernel(key)
    with pytest.raises(error_class(error)) as info:
        call(k, arr)
    check_message(info.value, name, words)


# -- reduction: bad calls ------------------------------------------------------------------------------

REDUCTION_CASES = [
    # argument count
    pytest.param("sumsq", lambda k, a: k(), "KspecTypeError", [N("1"), N("2"), N("0")], id="count-none"),
    pytest.param("sumsq", lambda k, a: k(a(), a(), a()), "KspecTypeError", [N("1"), N("2"), N("3")], id="count-too-many"),
    pytest.param("rdot", lambda k, a: k(a()), "KspecTypeError", [N("2"), N("3"), N("1")], id="count-rdot-one"),
    # axis
    pytest.param("sumsq", lambda k, a: k(a((2, 5)), axis=2), "AxisError", ["axis", N("2"), "dimension"], id="axis-too-large"),
    pytest.param("sumsq", lambda k, a: k(a((2, 5)), axis=-3), "AxisError", ["axis", "-3", "dimension"], id="axis-too-negative"),
    pytest.param("sumsq", lambda k, a: k(a((2, 5)), axis=(0, 5)), "AxisError", ["axis", N("5"), "dimension"], id="axis-tuple-out-of-range"),
    pytest.param("sumsq", lambda k, a: k(a(4), axis=1), "AxisError", ["axis", N("1"), "dimension"], id="axis-1d"),
    pytest.param("sumsq", lambda k, a: k(a((2, 5)), axis=(0, 0)), "KspecValueError", ["axis", Any_("duplicate", "repeated")], id="axis-duplicate"),
    pytest.param("sumsq", lambda k, a: k(a((2, 5)), axis=(1, -1)), "KspecValueError", ["axis", Any_("duplicate", "repeated")], id="axis-duplicate-negative"),
    pytest.param("sumsq", lambda k, a: k(a((2, 5)), axis=1.5), "KspecTypeError", ["axis"], id="axis-float"),
    pytest.param("sumsq", lambda k, a: k(a((2, 5)), axis="0"), "KspecTypeError", ["axis"], id="axis-str"),
    pytest.param("sumsq", lambda k, a: k(a((2, 5)), axis=[0, 1.0]), "KspecTypeError", ["axis"], id="axis-list-with-float"),
    # out
    pytest.param("sumsq", lambda k, a: k(a((2, 5)), a(()), out=a(())), "KspecValueError", ["out"], id="out-twice"),
    pytest.param("sumsq", lambda k, a: k(a((2, 5)), axis=1, out=a((3,))), "KspecValueError", [Any_("out", "'y'"), "(2,)", "(3,)"], id="out-shape-kw"),
    pytest.param("sumsq", lambda k, a: k(a((2, 5)), a((3,)), axis=1), "KspecValueError", [Any_("out", "'y'"), "(2,)", "(3,)"], id="out-shape-positional"),
    pytest.param("sumsq", lambda k, a: k(a((2, 5)), axis=1, keepdims=True, out=a((2,))), "KspecValueError", [Any_("out", "'y'"), "(2, 1)", "(2,)"], id="out-shape-keepdims"),
    pytest.param("sumsq", lambda k, a: k(a((2, 5)), axis=1, out=a((2, 1))), "KspecValueError", [Any_("out", "'y'"), "(2,)", "(2, 1)"], id="out-shape-no-keepdims"),
    pytest.param("sumsq", lambda k, a: k(a((2, 5)), axis=None, out=a((2,))), "KspecValueError", [Any_("out", "'y'"), "()", "(2,)"], id="out-shape-full-reduction"),
    pytest.param("sumsq", lambda k, a: k(a((2, 5)), axis=1, out=a((2,), "float64")), "KspecTypeError", ["float32", "float64"], id="out-dtype"),
    pytest.param("sumsq", lambda k, a: k(a((2, 5)), axis=1, out=np.zeros(2, np.float32)), "KspecTypeError", ["host memory"], id="out-numpy"),
    pytest.param("sumsq", lambda k, a: k(a((2, 5)), np.zeros((), np.float32)), "KspecTypeError", ["host memory"], id="out-numpy-positional"),
    pytest.param("sumsq", lambda k, a: k(a((2, 5)), out=0.0), "KspecTypeError", ["device array"], id="out-scalar"),
    # zero-size without identity
    pytest.param("rmax", lambda k, a: k(a(0)), "KspecValueError", ["identity"], id="empty-no-identity"),
    pytest.param("rmax", lambda k, a: k(a((0, 3)), axis=0), "KspecValueError", ["identity"], id="empty-axis-no-identity"),
    # raw inputs
    pytest.param("wsum", lambda k, a: k(a((2, 5)), a(5), axis=1), "KspecNotImplementedError", ["raw", Any_("leading", "axis")], id="raw-nonleading-axis"),
    pytest.param("wsum", lambda k, a: k(a((2, 3, 4)), a(12), axis=(1, 2)), "KspecNotImplementedError", ["raw", Any_("leading", "axis")], id="raw-nonleading-axes-3d"),
    pytest.param("wsum", lambda k, a: k(a((2, 5)), 1.0), "KspecTypeError", [N("w"), "raw"], id="raw-input-scalar"),
    # inputs together
    pytest.param("rdot", lambda k, a: k(a((2, 5)), a((3,))), "KspecValueError", ["broadcast", "(2, 5)", "(3,)"], id="broadcast-failure"),
    pytest.param("rdot", lambda k, a: k(a(), a(dtype="float64")), "KspecTypeError", [N("y"), "float64", "float32", N("T")], id="placeholder-conflict"),
    pytest.param("sumsq", lambda k, a: k(a(dtype="M8[s]")), "KspecTypeError", [N("x")], id="unsupported-dtype"),
    pytest.param("sumsq", lambda k, a: k(np.zeros(4, np.float32)), "KspecTypeError", [N("x"), "host memory"], id="input-numpy"),
    pytest.param("rdot", lambda k, a: k(a(device=0), a(device=1)), "KspecValueError", [N("x"), N("y"), "device"], id="devices-differ"),
    pytest.param("sumsq", lambda k, a: k(a(), bogus=1), "KspecTypeError", [N("bogus")], id="kwarg-unknown"),
    pytest.param("sumsq", lambda k, a: k(a(), size=4), "KspecTypeError", [N("size")], id="kwarg-size-on-reduction"),
    pytest.param("sumsq", lambda k, a: k(a(), stream="abc"), "KspecTypeError", ["stream"], id="stream-str"),
]


@pytest.mark.parametrize(("key", "call", "error", "words"), REDUCTION_CASES)
def test_reduction_bad_call(make_kernel, arr, key, call, error, words):
    k, name = make_kernel(key)
    with pytest.raises(error_class(error)) as info:
        call(k, arr)
    check_message(info.value, name, words)


def test_axis_error_is_value_and_index_error():
    assert issubclass(kspec.AxisError, kspec.KspecValueError)
    assert issubclass(kspec.AxisError, ValueError)
    assert issubclass(kspec.AxisError, IndexError)


def test_a_failed_call_leaves_the_kernel_as_it_was(make_kernel, arr):
    # Nothing was compiled or cached by the first failure: the same bad call fails the same way again.
    k, name = make_kernel("add")
    for _ in range(2):
        with pytest.raises(kspec.KspecTypeError) as info:
            k(arr(dtype="float64"), arr())
        check_message(info.value, name, [N("x"), "float64"])


# -- constructor errors --------------------------------------------------------------------------------
# (factory, error class name, the offending name the message must hold)

CONSTRUCTOR_CASES = [
    pytest.param(lambda: _ew("T i", "T z", "z = i", "k"), "ReservedNameError", "'i'", id="ew-reserved-i"),
    pytest.param(lambda: _ew("T x", "T _z", "_z = x", "k"), "ReservedNameError", "_z", id="ew-reserved-underscore"),
    pytest.param(lambda: _ew("float32 int", "float32 z", "z = 1", "k"), "InvalidNameError", "int", id="ew-keyword-param"),
    pytest.param(lambda: _ew("float33 x", "float32 z", "z = x", "k"), "UnknownDtypeError", "float33", id="ew-unknown-dtype"),
    pytest.param(lambda: _ew("T x, T x", "T z", "z = x", "k"), "DuplicateNameError", "'x'", id="ew-duplicate-inputs"),
    pytest.param(lambda: _ew("T x", "T x", "x = x", "k"), "DuplicateNameError", "'x'", id="ew-duplicate-in-out"),
    pytest.param(lambda: _ew("T x", "T z", "z = x", "my-kernel"), "InvalidNameError", "my-kernel", id="ew-kernel-name-not-identifier"),
    pytest.param(lambda: _ew("T x", "T z", 3, "k"), "KspecTypeError", "operation", id="ew-operation-not-str"),
    pytest.param(lambda: _red("T i", "T y", "i", "a + b", "y = a", "0", "r"), "ReservedNameError", "'i'", id="red-reserved-i"),
    pytest.param(lambda: _red("T x", "flaot32 y", "x", "a + b", "y = a", "0", "r"), "UnknownDtypeError", "flaot32", id="red-unknown-dtype"),
    pytest.param(lambda: _red("T x", "T y", "x", "a + b", "y = a", "0", "class"), "InvalidNameError", "class", id="red-kernel-name-keyword"),
    pytest.param(lambda: _red("T x, T x", "T y", "x", "a + b", "y = a", "0", "r"), "DuplicateNameError", "'x'", id="red-duplicate"),
    pytest.param(lambda: _red("T x", "T y", 3, "a + b", "y = a", "0", "r"), "KspecTypeError", "map_expr", id="red-map-expr-not-str"),
]


@pytest.mark.parametrize(("factory", "error", "word"), CONSTRUCTOR_CASES)
def test_constructor_error(factory, error, word):
    with pytest.raises(error_class(error)) as info:
        factory()
    assert word in str(info.value), f"{word!r} not in {str(info.value)!r}"


def test_spec_errors_are_value_errors():
    for name in ("ReservedNameError", "InvalidNameError", "UnknownDtypeError", "DuplicateNameError"):
        cls = error_class(name)
        assert issubclass(cls, kspec.SpecError) and issubclass(cls, ValueError)


# -- construction succeeds (no GPU, no compile) --------------------------------------------------------

GOOD_CASES = [
    pytest.param("add", "ElementwiseSpec", 2, 1, id="add"),
    pytest.param("tadd", "ElementwiseSpec", 2, 1, id="tadd"),
    pytest.param("rawcopy", "ElementwiseSpec", 1, 1, id="rawcopy"),
    pytest.param("xyz", "ElementwiseSpec", 2, 1, id="xyz"),
    pytest.param("sumsq", "ReductionSpec", 1, 1, id="sumsq"),
    pytest.param("rmax", "ReductionSpec", 1, 1, id="rmax"),
    pytest.param("wsum", "ReductionSpec", 2, 1, id="wsum"),
    pytest.param("rdot", "ReductionSpec", 2, 1, id="rdot"),
]


@pytest.mark.parametrize(("key", "spec_class", "nin", "nout"), GOOD_CASES)
def test_construction_exposes_cupy_attributes(make_kernel, key, spec_class, nin, nout):
    import kspec.spec

    k, name = make_kernel(key)
    assert k.name == name
    assert (k.nin, k.nout, k.nargs) == (nin, nout, nin + nout)
    assert isinstance(k.spec, getattr(kspec.spec, spec_class))
    assert k.spec.name == name


@pytest.mark.parametrize(("key", "spec_class", "nin", "nout"), GOOD_CASES)
def test_pickle_round_trip(make_kernel, key, spec_class, nin, nout):
    k, name = make_kernel(key)
    clone = pickle.loads(pickle.dumps(k))
    assert type(clone) is type(k)
    assert clone.spec == k.spec
    assert (clone.name, clone.nin, clone.nout, clone.nargs) == (k.name, k.nin, k.nout, k.nargs)


@pytest.mark.parametrize("key", ["tadd", "rmax"])
def test_a_kernel_unpickled_again_adopts_what_the_first_built(make_kernel, monkeypatch, key):
    # a Dask worker unpickles the same kernel with every task: the spec's pickle is read once per process, and
    # every later copy shares the first one's state (its prepared calls); another class of rules is its own
    import kspec.kernels.records as records

    k, _ = make_kernel(key)
    records.clear_constructor_memos()
    data = pickle.dumps(k)
    assert pickle.dumps(k) == data  # the spec pickled once per object
    first = pickle.loads(data)
    monkeypatch.setattr(type(k), "from_spec", classmethod(lambda *a, **kw: pytest.fail("rebuilt from the spec")))
    again = pickle.loads(data)
    assert again is not first and again._calls is first._calls and again.spec == k.spec
    monkeypatch.setattr(k, "_cupy_rules", not k._cupy_rules)  # what the copy must not adopt: other rules
    with pytest.raises(pytest.fail.Exception, match="rebuilt"):
        pickle.loads(pickle.dumps(k))


def test_reduction_identity_none_is_kept(make_kernel):
    k, _ = make_kernel("rmax")
    assert k.spec.identity is None
