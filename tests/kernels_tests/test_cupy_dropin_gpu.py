"""Issue 15: empty operations with size= and compile() before a call (on both devices: the ``xp`` fixture);
on a GPU only (marked ``gpu``): `with stream:`, backend='nvcc', JAX/Numba outputs, and CuPy's texture objects
(1-d, 2-d, 3-d) read in an ElementwiseKernel and a RawKernel, against NumPy."""

from __future__ import annotations

import io
import os
import shutil

import numpy as np
import pytest

import kspec


@pytest.fixture
def cp():
    """CuPy, for the GPU-only tests (each marked ``gpu``)."""
    return pytest.importorskip("cupy")


# -- 1. empty operation, size= -----------------------------------------------------------------------------


def test_empty_operation_with_size_decides_the_loop(xp):
    k = kspec.ElementwiseKernel(
        "raw int64 x", "raw int64 y", "", "loop_size",
        loop_prep="if (threadIdx.x + blockIdx.x == 0) y[0] = _ind.size() + x[0];",
    )  # fmt: skip
    x, y = xp.full(1, 5, xp.int64), xp.zeros(1, xp.int64)
    k(x, y, size=37)
    assert int(y[0]) == 42
    touch = kspec.ElementwiseKernel("raw T x", "raw T y", "y[i] = x[i] * 2", "touch")
    out = touch(xp.arange(10, dtype=xp.float32), size=6)  # raw output allocated with (size,)
    assert out.shape == (6,) and np.array_equal(xp.asnumpy(out), np.arange(6, dtype=np.float32) * 2)


# -- 6. with stream: ---------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_with_stream_runs_kspec_calls_on_it():
    sqd = kspec.ElementwiseKernel("T x, T y", "T z", "z = (x - y) * (x - y)", "sqd_stream")
    x = kspec.asarray(np.arange(1000, dtype=np.float32))
    with kspec.Stream(non_blocking=True) as s:
        assert kspec.runtime.current_stream() is s
        z = sqd(x, x)
        e = kspec.empty(4, np.float32)
        assert z._stream == s.handle and e._stream == s.handle  # allocated (and launched) in its order
        raw = kspec.RawKernel('extern "C" __global__ void fill(float* a) { a[threadIdx.x] = 7; }', "fill")
        raw((1,), (4,), (e,))
    s.synchronize()
    assert np.all(z.get() == 0) and np.all(e.get() == 7)


# -- 7. compile() on a device ------------------------------------------------------------------------------


def test_compile_loads_then_the_call_only_launches(xp):
    k = kspec.ElementwiseKernel("T x", "T y", "y = x + 1", "compiled_early")
    x = xp.arange(5, dtype=xp.float64)
    k.compile(x, log_stream=io.StringIO())
    assert "y = x + 1" in k.source(xp.asnumpy(x))
    assert np.array_equal(xp.asnumpy(k(x)), np.arange(5) + 1)


# -- 3. backend='nvcc' -------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(shutil.which("nvcc") is None and not os.environ.get("CUDA_PATH"), reason="no nvcc")
def test_nvcc_backend_launches_with_name_expressions(cp):
    code = r"""
    template<typename T> __global__ void fx3(T* a, int n) { int i = threadIdx.x; if (i < n) a[i] *= 3; }
    extern "C" __global__ void my_add(const float* x1, const float* x2, float* y) {
        int tid = blockDim.x * blockIdx.x + threadIdx.x; y[tid] = x1[tid] + x2[tid]; }
    """
    module = kspec.RawModule(code=code, backend="nvcc", name_expressions=["fx3<float>", "fx3<double>"])
    for dtype in (np.float32, np.float64):
        a = cp.arange(8, dtype=dtype)
        module.get_function(f"fx3<{np.dtype(dtype).name.replace('32', '').replace('float64', 'double')}>")((1,), (8,), (a, 8))
        assert np.array_equal(cp.asnumpy(a), np.arange(8, dtype=dtype) * 3)
    add = kspec.RawKernel(code, "my_add", backend="nvcc")
    x = cp.arange(25, dtype=cp.float32)
    y = cp.zeros(25, dtype=cp.float32)
    add((5,), (5,), (x, x, y))
    assert np.array_equal(cp.asnumpy(y), np.arange(25, dtype=np.float32) * 2)
    assert add.attributes["num_regs"] > 0


# -- 5. outputs in the inputs' library ----------------------------------------------------------------------


@pytest.mark.gpu
def test_jax_inputs_give_jax_outputs():
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX sees no GPU")
    sqd = kspec.ElementwiseKernel("T x, T y", "T z", "z = (x - y) * (x - y)", "sqd_jax")
    x = jnp.arange(1 << 20, dtype=jnp.float32)
    y = x * 0.5
    z = sqd(x, y)
    assert isinstance(z, jax.Array)
    np.testing.assert_allclose(np.asarray(z + 1), (np.asarray(x) * 0.5) ** 2 + 1)  # JAX reads it
    l2 = kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2_jax")
    r = l2(x.reshape(1024, 1024), axis=1)
    assert isinstance(r, jax.Array)
    np.testing.assert_allclose(np.asarray(r), np.sqrt((np.asarray(x).reshape(1024, 1024) ** 2).sum(1)), rtol=1e-5)


@pytest.mark.gpu
def test_numba_inputs_give_numba_outputs():
    numba_cuda = pytest.importorskip("numba.cuda")
    sqd = kspec.ElementwiseKernel("T x, T y", "T z", "z = (x - y) * (x - y)", "sqd_numba")
    x = numba_cuda.to_device(np.arange(100, dtype=np.float32))
    z = sqd(x, x)
    assert numba_cuda.is_cuda_array(z) and type(z).__module__.startswith("numba")
    assert np.all(z.copy_to_host() == 0)


# -- 2. texture objects --------------------------------------------------------------------------------------


def _texture(data: np.ndarray):
    from cupy.cuda import runtime, texture

    ch = texture.ChannelFormatDescriptor(32, 0, 0, 0, runtime.cudaChannelFormatKindFloat)
    dims = tuple(reversed(data.shape))  # width, height, depth
    arr = texture.CUDAarray(ch, *dims)
    arr.copy_from(data)
    res = texture.ResourceDescriptor(runtime.cudaResourceTypeArray, cuArr=arr)
    desc = texture.TextureDescriptor((runtime.cudaAddressModeClamp,) * data.ndim, runtime.cudaFilterModePoint,
                                     runtime.cudaReadModeElementType)  # fmt: skip
    return texture.TextureObject(res, desc), arr


FETCH = {
    1: "tex1D<float>(texObj, (i % w) + 0.5f)",
    2: "tex2D<float>(texObj, (i % w) + 0.5f, (i / w) % h + 0.5f)",
    3: "tex3D<float>(texObj, (i % w) + 0.5f, (i / w) % h + 0.5f, i / (w * h) + 0.5f)",
}
SHAPES = {1: (64,), 2: (12, 16), 3: (4, 6, 8)}


@pytest.mark.gpu
@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_texture_in_elementwise_kernel(cp, ndim):
    data = np.random.default_rng(ndim).random(SHAPES[ndim], dtype=np.float32)
    tex, _keep = _texture(data)
    k = kspec.ElementwiseKernel("U texObj, int32 w, int32 h", "float32 y", f"y = {FETCH[ndim]} * 2.0f", f"tex{ndim}d")
    y = cp.empty(data.shape, cp.float32)
    shape = list(reversed(data.shape)) + [1, 1]
    k(tex, shape[0], shape[1], y)
    np.testing.assert_array_equal(cp.asnumpy(y), data * 2)


@pytest.mark.gpu
@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_texture_in_raw_kernel(cp, ndim):
    data = np.random.default_rng(10 + ndim).random(SHAPES[ndim], dtype=np.float32)
    tex, _keep = _texture(data)
    code = (
        'extern "C" __global__ void read_tex(cudaTextureObject_t texObj, float* y, int w, int h, int n) {\n'
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        f"  if (i < n) y[i] = {FETCH[ndim]};\n}}\n"
    )
    k = kspec.RawKernel(code, "read_tex")
    y = cp.empty(data.shape, cp.float32)
    shape = list(reversed(data.shape)) + [1, 1]
    k(((data.size + 127) // 128,), (128,), (tex, y, np.int32(shape[0]), np.int32(shape[1]), np.int32(data.size)))
    np.testing.assert_array_equal(cp.asnumpy(y), data)
