"""Idioms of kernels written for CuPy that its own library builds through the constructors, on both devices
(``xp``: kspec's CPU device in CI, CuPy on a GPU), against NumPy:

- ``a.ndim`` of a raw parameter and ``_ind.ndim`` of the loop are data members in CuPy's CArray / CIndexer
  (``for (int d = a.ndim - 1; ...)``, ``int idx[a.ndim]``), and ``a.ndim()`` still reads for kspec's own code;
  CuPy's ``cupy.nonzero`` builds its incomplete-scan kernel this way (a block scan with warp shuffles, an
  index array into a 2-d raw output: on a GPU only, as a warp-synchronous body);
- ``-DCUPY_JIT_MODE`` (``cupy.vectorize``'s option): ``STD::tuple`` / ``STD::get`` and ``cupy::as_tuple``.
"""

from __future__ import annotations

import numpy as np
import pytest

import kspec

rng = np.random.default_rng(7000)

# The structure of CuPy's cupy_nonzero_kernel_incomplete_scan (cupy/_core/_routines_indexing.pyx), written for
# this test: each block scans its chunk of the flags with shuffles, adds the totals of the blocks before it
# (``b``, precomputed) and writes each nonzero element's coordinates, innermost last, into row x0 of ``dst``.
CHUNK, WARP = 256, 32
SCAN_PREP = f"""
    __shared__ S smem[{WARP}];
    const int n_warp = {CHUNK} / {WARP};
    const int warp_id = threadIdx.x / {WARP};
    const int lane_id = threadIdx.x % {WARP};
"""
SCAN_BODY = f"""
    S x = 0;
    if (i < a.size()) x = a[i] != 0;
    for (int j = 1; j < {WARP}; j *= 2) {{
        S tmp = __shfl_up_sync(0xffffffff, x, j, {WARP});
        if (lane_id - j >= 0) x += tmp;
    }}
    if (lane_id == {WARP} - 1) smem[warp_id] = x;
    __syncthreads();
    if (warp_id == 0) {{
        S y = 0;
        if (lane_id < n_warp) y = smem[lane_id];
        for (int j = 1; j < n_warp; j *= 2) {{
            S tmp = __shfl_up_sync(0xffffffff, y, j, {WARP});
            if (lane_id - j >= 0) y += tmp;
        }}
        int block_id = i / {CHUNK};
        S base = 0;
        if (block_id > 0) base = b[block_id - 1];
        if (lane_id == {WARP} - 1) y = 0;
        smem[(lane_id + 1) % {WARP}] = y + base;
    }}
    __syncthreads();
    x += smem[warp_id];
    S x0 = __shfl_up_sync(0xffffffff, x, 1, {WARP});
    if (lane_id == 0) x0 = smem[warp_id];
    if (x0 < x && i < a.size()) {{
        O j = i;
        for (int d = a.ndim - 1; d >= 0; d--) {{
            ptrdiff_t ind[] = {{x0, d}};
            O j_next = j / a.shape()[d];
            dst[ind] = j - j_next * a.shape()[d];
            j = j_next;
        }}
    }}
"""


@pytest.mark.gpu
def test_nonzero_scan_reads_rank_as_a_member():
    """On a GPU only: the body is warp-synchronous and expects thread i of the launch to own element i, as CuPy
    launches it; kspec's CPU device runs an elementwise body's elements in its own order."""
    xp = pytest.importorskip("cupy")
    scan = kspec.ElementwiseKernel("raw T a, raw S b", "raw O dst", SCAN_BODY, "incomplete_scan", loop_prep=SCAN_PREP)
    host = rng.random((37, 29)) < 0.4
    flags = host.ravel().astype(np.int64)
    blocks = -(-flags.size // CHUNK)
    totals = np.cumsum([flags[k * CHUNK:(k + 1) * CHUNK].sum() for k in range(blocks)]).astype(np.int64)
    dst = xp.asarray(np.full((int(flags.sum()), 2), -1, np.int64))
    scan(xp.asarray(host.astype(np.float32)), xp.asarray(totals), dst, size=blocks * CHUNK, block_size=CHUNK)
    np.testing.assert_array_equal(dst.get(), np.argwhere(host))


def test_ranked_view_rank_is_a_constant_expression():
    """``int idx[a.ndim]`` (CuPy's static member makes it a constant), and ``a.ndim()`` for kspec's own code."""
    kernel = kspec.ElementwiseKernel(
        "raw T a", "raw T b",
        "ptrdiff_t at[a.ndim]; at[0] = i / a.shape()[1]; at[1] = i % a.shape()[1]; b[at] = a[at] + a.ndim();", "at_rank",
    )  # fmt: skip
    kernel.compile(np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32), arch="sm_90")


def test_loop_rank_as_a_member(xp):
    coords = kspec.ElementwiseKernel(
        "T x", "raw int64 out",
        "for (int d = 0; d < _ind.ndim; d++) { ptrdiff_t at[] = {i, d}; out[at] = _ind.get()[d] + 10 * _ind.ndim(); }",
        "coords", reduce_dims=False,
    )  # fmt: skip
    x = np.zeros((3, 4, 5), np.float32)
    out = xp.asarray(np.full((60, 3), -1, np.int64))
    coords(xp.asarray(x), out)
    np.testing.assert_array_equal(xp.asnumpy(out), np.argwhere(np.ones_like(x, bool)) + 30)


VECTORIZE_PREAMBLE = """
__device__ STD::tuple<long long, double> pair_of(long long x, long long y) {
  return STD::make_tuple(x + y, (double)x / (double)y);
}
__device__ long long first_of_index(const long long* ints) {
  return STD::get<1>(cupy::as_tuple<2, long long>::call(ints));
}
"""


def test_cupy_jit_mode_names(xp):
    body = ("auto out = pair_of(in0, in1);\nout0 = STD::get<0>(out);\nout1 = STD::get<1>(out);\n"
            "long long ints[2] = {in0, in1};\nout0 += 0 * first_of_index(ints);")  # fmt: skip
    kernel = kspec.ElementwiseKernel("int64 in0, int64 in1", "int64 out0, float64 out1", body, "cupy_vectorize",
                                     preamble=VECTORIZE_PREAMBLE, options=("-DCUPY_JIT_MODE", "--std=c++17"))  # fmt: skip
    a, b = np.arange(5, dtype=np.int64), np.arange(5, 10, dtype=np.int64)
    s, q = kernel(xp.asarray(a), xp.asarray(b))
    np.testing.assert_array_equal(xp.asnumpy(s), a + b)
    np.testing.assert_allclose(xp.asnumpy(q), a / b)


def test_without_jit_mode_std_is_not_aliased():
    kernel = kspec.ElementwiseKernel("int64 x", "int64 y", "y = STD::get<0>(STD::make_tuple(x));", "no_jit_mode")
    with pytest.raises(kspec.CompileError, match="STD"):
        kernel.compile(np.zeros(2, np.int64), arch="sm_90")
