"""kspec.cupy under the real CuPy, on a GPU: code written for CuPy (CuPy's own Python routines and cupyx) runs
unchanged with kspec's constructors, and gives CuPy's own results.

- the switch: inside ``kspec.cupy.enabled()`` cupyx.scipy.ndimage builds its kernels through kspec (kspec's compile
  log names them; CuPy's memo of kernels built before is cleared), with CuPy's results; after the block CuPy's
  constructors are back;
- ``cupy.nonzero`` on an array longer than one scan chunk (CuPy builds ``cupy_nonzero_kernel_incomplete_scan``
  through ``cupy.ElementwiseKernel``: a raw view's ``a.ndim`` read as CuPy's CArray data member);
- ``RandomState.choice(replace=False)`` (CuPy passes its Feistel parameters as a struct by value: a CPointer);
- cupyx.signal's channelizer (a RawModule that includes ``<cupy/cuda_workaround.h>`` and polyfills
  ``std::is_same_v`` itself, as code written for CuPy's environment must)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import kspec
import kspec.cupy

pytestmark = pytest.mark.gpu


@pytest.fixture
def cp() -> Iterator[Any]:
    import cupy

    yield cupy
    kspec.cupy.disable()


def _kspec_kernels_built() -> set[str]:
    return {event.kernel for event in kspec.compile_log()}


def test_enabled_block_serves_cupyx_from_kspec_and_restores(cp: Any) -> None:
    import cupyx.scipy.ndimage as ndi

    original = cp.ElementwiseKernel
    rng = np.random.default_rng(3)
    x = cp.asarray(rng.standard_normal((40, 50)).astype(np.float32))
    expected = ndi.uniform_filter(x, size=5, mode="reflect")  # CuPy's own kernels
    before = _kspec_kernels_built()
    with kspec.cupy.enabled():
        assert cp.ElementwiseKernel is kspec.ElementwiseKernel and cp._core.RawKernel is kspec.RawKernel
        got = ndi.uniform_filter(x, size=5, mode="reflect")
    built = _kspec_kernels_built() - before
    assert any("uniform" in name or "correlate" in name for name in built), built
    assert cp.ElementwiseKernel is original and not kspec.cupy.is_enabled()
    cp.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_nonzero_past_one_scan_chunk(cp: Any) -> None:
    rng = np.random.default_rng(4)
    host = rng.random((300, 700)) < 0.3  # 210k elements: several chunks, so the incomplete-scan kernel runs
    kspec.cupy.enable()
    rows, cols = cp.nonzero(cp.asarray(host))
    want_rows, want_cols = np.nonzero(host)
    np.testing.assert_array_equal(rows.get(), want_rows)
    np.testing.assert_array_equal(cols.get(), want_cols)
    assert any("nonzero" in name for name in _kspec_kernels_built())


def test_choice_without_replacement_passes_a_struct_by_value(cp: Any) -> None:
    kspec.cupy.enable()
    state = cp.random.RandomState(7)
    picked = state.choice(1000, size=500, replace=False).get()
    assert len(np.unique(picked)) == 500 and picked.min() >= 0 and picked.max() < 1000
    assert "feistel_bijection_choice" in _kspec_kernels_built()


def test_channelizer_polyfills_beside_cuda_workaround(cp: Any) -> None:
    import cupyx.signal

    rng = np.random.default_rng(5)
    x = cp.asarray(rng.standard_normal(4096).astype(np.float32))
    h = cp.asarray(rng.standard_normal(64).astype(np.float32))
    expected = cupyx.signal.channelize_poly(x, h, 8)
    kspec.cupy.enable()
    got = cupyx.signal.channelize_poly(x, h, 8)
    cp.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_raw_modules_kept_where_a_program_points_cupys_cache(cp: Any, tmp_path: Any) -> None:
    """A program that points CuPy's kernel cache at a directory of its own finds kspec's raw modules there, in
    CuPy's entry format (the mangled names first): built once, loaded from it after ``cupy._util.clear_memo()``,
    rebuilt and saved again where an entry is only a bare binary."""
    import os

    from cupy import _util
    from cupy.cuda import _compiler_cache, compiler

    class Counting(_compiler_cache.DiskKernelCacheBackend):
        saves = 0

        def save(self, name: str, cubin: bytes, source: str) -> None:
            self.saves += 1
            super().save(name, cubin, source)

    code = "template <typename T> __global__ void fill_with(T* y, T v) { y[threadIdx.x] = v; }"
    names = ["fill_with<float>", "fill_with<double>"]
    original = compiler._kernel_cache_backend
    backend = compiler._kernel_cache_backend = Counting(str(tmp_path))
    try:
        kspec.cupy.enable()
        for round in range(3):
            mod = cp.RawModule(code=code, name_expressions=names, options=("-DKSPEC_CACHE_BRIDGE_TEST",))
            y = cp.zeros(32, dtype=np.float64)
            mod.get_function("fill_with<double>")((1,), (32,), (y, np.float64(round + 0.5)))
            assert (y.get() == round + 0.5).all()
            assert backend.saves == (1 if round < 2 else 2), (round, backend.saves)
            (entry,) = [f for f in os.listdir(tmp_path) if f.endswith(".cubin")]
            stored = (tmp_path / entry).read_bytes()[_compiler_cache._hash_length :]
            mangled, binary = compiler._decode_cache_payload(stored, 2)
            assert all(m.startswith("_Z") for m in mangled)
            if round == 1:  # an entry as a CuPy predating name-expression entries wrote it: a bare binary
                (tmp_path / entry).write_bytes(_compiler_cache._hash_hexdigest(binary).encode("ascii") + binary)
            _util.clear_memo()
    finally:
        compiler._kernel_cache_backend = original
