"""Raw parameters of the CuPy-style constructors' kernels are specialized on each array's rank and C-contiguity
(kspec::RankedView), as CuPy compiles `CArray<T, ndim, c_contiguous>`; spec files keep one module for every raw
layout (kspec::RawView). Rendering, keys and validation without a device; flat and n-d indexing of every layout
against NumPy on the CPU device, and on a GPU."""

from __future__ import annotations

import numpy as np
import pytest

import kspec
from helpers.device_arrays import host_compiler_missing
from kspec.render import render, specialize
from kspec.spec import parse_spec

GATHER = kspec.ElementwiseKernel("raw T x", "T y", "y = x[i]", "ranked_gather")
GATHER_ND = kspec.ElementwiseKernel("raw T x, int32 n", "T y", "y = x[i % n] + (T)x.ndim()", "ranked_nd")
SUM_RAW = kspec.ReductionKernel("T w, raw T x", "T y", "w * x[_J]", "a + b", "y = a", "0", "ranked_sum")

# layouts of a 24-element float32 array (C-contiguous base, then views), flat-indexed as NumPy's ravel
LAYOUTS = {
    "0-d": lambda a: a[5:6].reshape(()),
    "1-d": lambda a: a,
    "1-d strided": lambda a: a[::3],
    "1-d reversed": lambda a: a[::-1],
    "2-d": lambda a: a.reshape(4, 6),
    "2-d transposed": lambda a: a.reshape(4, 6).T,
    "2-d sliced": lambda a: a.reshape(4, 6)[:, 1:5],
    "3-d": lambda a: a.reshape(2, 3, 4),
    "3-d permuted": lambda a: a.reshape(2, 3, 4).transpose(2, 0, 1),
    "4-d sliced": lambda a: a.reshape(2, 3, 2, 2)[:, ::2, :, ::-1],
}


def _layout_ok(view: np.ndarray) -> tuple[int, bool]:
    return view.ndim, bool(view.flags.c_contiguous)


# -- rendering and keys (no device) --------------------------------------------------------------------------


@pytest.mark.parametrize("name", LAYOUTS)
def test_a_constructor_kernel_specializes_each_raw_array_on_rank_and_contiguity(name):
    view = LAYOUTS[name](np.arange(24, dtype=np.float32))
    source = GATHER.source(view, np.zeros(3, np.float32))
    ndim, contiguous = _layout_ok(view)
    assert f"kspec::RankedView<T, {ndim}, {'true' if contiguous else 'false'}> x" in source


def test_layouts_that_differ_get_different_modules_and_equal_ones_share():
    base = np.arange(24, dtype=np.float32)
    out = np.zeros(3, np.float32)
    keys = {name: GATHER.specialization(make(base), out).key for name, make in LAYOUTS.items()}
    assert keys["2-d"] != keys["3-d"] != keys["1-d"]
    assert keys["2-d"] != keys["2-d transposed"]
    assert keys["2-d transposed"] == keys["2-d sliced"]  # both 2-d, not C-contiguous
    assert GATHER.specialization(base.reshape(6, 4), out).key == keys["2-d"]


def test_a_reduction_constructor_kernel_specializes_its_raw_arrays_too():
    x = np.zeros((4, 6), np.float32)
    assert "kspec::RankedView<T, 2, true> x" in SUM_RAW.source(np.zeros((24, 3), np.float32), x, np.zeros(3, np.float32))


def test_spec_file_kernels_keep_one_module_for_every_raw_layout():
    spec = parse_spec(dict(kind="elementwise", name="g", in_params="raw T x", out_params="T y", operation="y = x[i]"))
    kernel = kspec.ElementwiseKernel.from_spec(spec)
    s = specialize(spec, {"T": "float32"})
    assert "kspec::RawView<T> x" in render(s).source
    base = np.arange(24, dtype=np.float32)
    keys = {kernel.specialization(make(base), np.zeros(3, np.float32)).key for make in LAYOUTS.values()}
    assert keys == {s.key}


def test_a_specialization_without_raw_layouts_keeps_its_key():
    spec = parse_spec(dict(kind="elementwise", name="g", in_params="raw T x", out_params="T y", operation="y = x[i]"))
    plain = specialize(spec, {"T": "float32"})
    assert specialize(spec, {"T": "float32"}, raw_layouts={}).key == plain.key
    ranked = specialize(spec, {"T": "float32"}, raw_layouts={"x": (2, True)})
    assert ranked.key != plain.key
    assert "kspec::RankedView<T, 2, true> x" in render(ranked).source


@pytest.mark.parametrize(
    "layouts, match",
    [
        ({"y": (1, True)}, r"raw_layouts: 'y' is not a raw array parameter \(those: x\)"),
        ({"x": (17, True)}, r"raw_layouts\['x'\]: expected \(ndim, c_contiguous\) with 0 <= ndim <= 16, got \(17, True\)"),
        ({"x": (-1, True)}, r"raw_layouts\['x'\]"),
        ({"x": (2, 1)}, r"raw_layouts\['x'\]: expected \(ndim, c_contiguous\)"),
        ({"x": [2, True]}, r"raw_layouts\['x'\]"),
    ],
)
def test_bad_raw_layouts_are_refused_naming_the_entry(layouts, match):
    spec = parse_spec(dict(kind="elementwise", name="g", in_params="raw T x", out_params="T y", operation="y = x[i]"))
    with pytest.raises(kspec.KspecValueError, match=match):
        specialize(spec, {"T": "float32"}, raw_layouts=layouts)


def test_raw_layouts_must_be_a_mapping():
    spec = parse_spec(dict(kind="elementwise", name="g", in_params="raw T x", out_params="T y", operation="y = x[i]"))
    with pytest.raises(kspec.KspecTypeError, match="raw_layouts: expected a mapping"):
        specialize(spec, {"T": "float32"}, raw_layouts=[("x", (1, True))])  # type: ignore[arg-type]


def test_every_layout_compiles_with_nvrtc():
    base = np.arange(24, dtype=np.float32)
    for make in LAYOUTS.values():
        GATHER_ND.compile(make(base), 1, np.zeros(3, np.float32), arch="sm_90")


# -- results: the CPU device and a GPU -----------------------------------------------------------------------


def _check_results(put, get):
    base = np.arange(24, dtype=np.float32) * 1.5 - 7
    for name, make in LAYOUTS.items():
        view = make(base)
        flat = np.ravel(view)  # C order, whatever the strides
        n = flat.size
        got = get(GATHER(make(put(base)), size=n))
        np.testing.assert_array_equal(got, flat, err_msg=name)
        got = get(GATHER_ND(make(put(base)), np.int32(n), size=2 * n))
        np.testing.assert_array_equal(got, np.concatenate([flat, flat]) + view.ndim, err_msg=name)
    # a transposed raw input of a reduction, read in C order along each row
    weights = np.linspace(1, 2, 72, dtype=np.float32).reshape(24, 3)
    got = get(SUM_RAW(put(weights), put(base).reshape(4, 6).T, axis=0))  # CuPy's rule: raw needs leading axes
    np.testing.assert_allclose(got, (weights * np.ravel(base.reshape(4, 6).T)[:, None]).sum(axis=0), rtol=1e-5)


def test_every_layout_gives_numpys_elements_on_the_cpu_device():
    reason = host_compiler_missing()
    if reason is not None:
        pytest.skip(reason)
    with kspec.use_device("cpu"):
        _check_results(lambda a: np.array(a, copy=True), np.asarray)


@pytest.mark.gpu
def test_every_layout_gives_numpys_elements_on_a_gpu():
    cupy = pytest.importorskip("cupy")
    _check_results(cupy.asarray, cupy.asnumpy)
