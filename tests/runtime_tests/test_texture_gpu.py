"""Texture memory on a GPU with kspec alone (no CuPy): CUDA arrays filled from NumPy and device arrays, read
through texture objects in ElementwiseKernels and RawKernels (1-, 2-, 3-d; point and linear filtering;
normalised coordinates and the address modes; normalised-float reads; 2- and 4-channel formats; linear and
pitched memory), written through a surface object, and copied back; every result against NumPy."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import kspec
from kspec.runtime import device_array_from_pointer

pytestmark = pytest.mark.gpu

rng = np.random.default_rng(15)
SHAPES = {1: (64,), 2: (12, 16), 3: (4, 6, 8)}
FETCH = {
    1: "tex1D<float>(texObj, (i % w) + 0.5f)",
    2: "tex2D<float>(texObj, (i % w) + 0.5f, (i / w) % h + 0.5f)",
    3: "tex3D<float>(texObj, (i % w) + 0.5f, (i / w) % h + 0.5f, i / (w * h) + 0.5f)",
}


def _texture(data: np.ndarray, channels: int = 1, *, address="clamp", filter_mode="point", read="element_type",
             normalized=False, border=None):  # fmt: skip
    """A texture over a new CUDA array holding ``data`` (channels as its last axis when several)."""
    desc = kspec.ChannelFormatDescriptor.from_dtype(data.dtype, channels)
    extents = data.shape[:-1] if channels > 1 else data.shape
    arr = kspec.CUDAArray(desc, *reversed(extents))  # width, height, depth
    arr.copy_from(data)
    res = kspec.ResourceDescriptor("array", cuArr=arr)
    tex = kspec.TextureDescriptor((address,) * len(extents), filter_mode, read, borderColors=border,
                                  normalizedCoords=normalized)  # fmt: skip
    return kspec.TextureObject(res, tex)


def _whd(shape: tuple[int, ...]) -> tuple[int, int]:
    dims = list(reversed(shape)) + [1, 1]
    return dims[0], dims[1]


def _aligned_empty(shape, dtype, alignment: int = 512):
    """A device array starting at a multiple of ``alignment`` bytes (textures over linear memory need it)."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    block = kspec.empty(nbytes + alignment, np.uint8)
    start = block.ptr + (-block.ptr) % alignment
    return device_array_from_pointer(start, nbytes, dtype, shape, block.device.id, block)


class Strided:
    """A view of a device array with strides of its own, through ``__cuda_array_interface__`` (padded rows)."""

    def __init__(self, base, shape, strides) -> None:
        self.base = base
        self.__cuda_array_interface__ = {
            "shape": shape, "typestr": base.dtype.str, "data": (base.ptr, False), "strides": strides, "version": 3,
        }  # fmt: skip


def _raw(body: str, params: str = "cudaTextureObject_t texObj, float* y, int w, int h, int n"):
    code = f'extern "C" __global__ void k({params}) {{\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n{body}\n}}\n'
    return kspec.RawKernel(code, "k")


def _grid(n: int) -> tuple[tuple[int], tuple[int]]:
    return ((n + 127) // 128,), (128,)


# -- reading textures in kernels ------------------------------------------------------------------------------


@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_texture_in_elementwise_kernel(ndim):
    data = rng.random(SHAPES[ndim], dtype=np.float32)
    tex = _texture(data)
    k = kspec.ElementwiseKernel("U texObj, int32 w, int32 h", "float32 y", f"y = {FETCH[ndim]} * 2.0f", f"ktex{ndim}")
    y = kspec.empty(data.shape, np.float32)
    k(tex, *_whd(data.shape), y)
    np.testing.assert_array_equal(y.get(), data * 2)


@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_texture_in_raw_kernel(ndim):
    data = rng.random(SHAPES[ndim], dtype=np.float32)
    tex = _texture(data)
    y = kspec.empty(data.shape, np.float32)
    w, h = _whd(data.shape)
    _raw(f"  if (i < n) y[i] = {FETCH[ndim]};")(*_grid(data.size), (tex, y, np.int32(w), np.int32(h), np.int32(data.size)))
    np.testing.assert_array_equal(y.get(), data)


def test_linear_filtering_interpolates_between_texels():
    data = rng.random((8, 16), dtype=np.float32)
    tex = _texture(data, filter_mode="linear")
    # at (x + 1, y + 1), between four texel centres: their mean (weights of 1/2 are exact in the 8-bit weights)
    k = kspec.ElementwiseKernel("U texObj, int32 w", "float32 y",
                                "y = tex2D<float>(texObj, (i % w) + 1.0f, (i / w) + 1.0f)", "klinear")  # fmt: skip
    y = kspec.empty((7, 15), np.float32)
    k(tex, 15, y)
    expected = (data[:-1, :-1] + data[1:, :-1] + data[:-1, 1:] + data[1:, 1:]) / 4
    np.testing.assert_allclose(y.get(), expected, rtol=1e-5, atol=1e-6)
    point = _texture(data)  # the same spot, point-sampled: the texel below and left of it
    k(point, 15, y)
    np.testing.assert_array_equal(y.get(), data[1:, 1:])


@pytest.mark.parametrize("mode", ["clamp", "wrap", "mirror", "border"])
def test_normalized_coordinates_and_address_modes(mode):
    w = 32
    data = rng.random(w, dtype=np.float32) + 1  # never 0, the border value
    tex = _texture(data, address=mode, normalized=True)
    k = kspec.ElementwiseKernel("U texObj, int32 w", "float32 y",
                                "y = tex1D<float>(texObj, ((float)((int)i - w) + 0.5f) / w)", f"kaddr_{mode}")  # fmt: skip
    y = kspec.empty(3 * w, np.float32)
    k(tex, w, y)
    index = np.arange(3 * w) - w  # texels -w .. 2w-1
    if mode == "clamp":
        expected = data[np.clip(index, 0, w - 1)]
    elif mode == "wrap":
        expected = data[index % w]
    elif mode == "mirror":
        m = index % (2 * w)
        expected = data[np.where(m < w, m, 2 * w - 1 - m)]
    else:
        expected = np.where((index >= 0) & (index < w), data[np.clip(index, 0, w - 1)], 0).astype(np.float32)
    np.testing.assert_array_equal(y.get(), expected)


def test_border_colour_with_unnormalized_coordinates():
    data = rng.random(16, dtype=np.float32)
    tex = _texture(data, address="border", border=(7.5,))
    y = kspec.empty(32, np.float32)
    read = _raw("  if (i < n) y[i] = tex1D<float>(texObj, i - 8 + 0.5f);")
    read(*_grid(32), (tex, y, np.int32(16), np.int32(1), np.int32(32)))
    index = np.arange(32) - 8
    expected = np.where((index >= 0) & (index < 16), data[np.clip(index, 0, 15)], 7.5)
    np.testing.assert_array_equal(y.get(), expected.astype(np.float32))


def test_read_mode_normalized_float_on_uint8():
    data = rng.integers(0, 256, (6, 20), dtype=np.uint8)
    tex = _texture(data, read="normalized_float")
    k = kspec.ElementwiseKernel("U texObj, int32 w, int32 h", "float32 y", f"y = {FETCH[2]}", "knormf")
    y = kspec.empty(data.shape, np.float32)
    k(tex, 20, 6, y)
    np.testing.assert_allclose(y.get(), data / np.float32(255), rtol=1e-6)
    as_int = _texture(data)  # element type: the integers themselves
    k2 = kspec.ElementwiseKernel("U texObj, int32 w, int32 h", "int32 y",
                                 "y = tex2D<unsigned char>(texObj, (i % w) + 0.5f, (i / w) + 0.5f)", "kuchar")  # fmt: skip
    z = kspec.empty(data.shape, np.int32)
    k2(as_int, 20, 6, z)
    np.testing.assert_array_equal(z.get(), data)


def test_two_and_four_channel_formats():
    pairs = rng.random((40, 2), dtype=np.float32)  # 40 float2 texels, channels as the last axis
    tex2 = _texture(pairs, 2)
    y = kspec.empty(80, np.float32)
    body = "  if (i < n) { float2 v = tex1D<float2>(texObj, i + 0.5f); y[2 * i] = v.x; y[2 * i + 1] = v.y; }"
    _raw(body)(*_grid(40), (tex2, y, np.int32(40), np.int32(1), np.int32(40)))
    np.testing.assert_array_equal(y.get(), pairs.reshape(-1))
    quads = rng.random((5, 4 * 7), dtype=np.float32)  # 5 rows of 7 float4 texels, CuPy's layout
    desc = kspec.ChannelFormatDescriptor(32, 32, 32, 32, "float")
    arr = kspec.CUDAArray(desc, 7, 5)
    arr.copy_from(kspec.asarray(quads))
    tex4 = kspec.TextureObject(kspec.ResourceDescriptor("array", cuArr=arr), kspec.TextureDescriptor())
    out = kspec.empty(quads.shape, np.float32)
    body = (
        "  if (i < n) { float4 v = tex2D<float4>(texObj, (i % w) + 0.5f, (i / w) + 0.5f);\n"
        "    y[4 * i] = v.x; y[4 * i + 1] = v.y; y[4 * i + 2] = v.z; y[4 * i + 3] = v.w; }"
    )
    _raw(body)(*_grid(35), (tex4, out, np.int32(7), np.int32(5), np.int32(35)))
    np.testing.assert_array_equal(out.get(), quads)
    back = np.empty((5, 7, 4), np.float32)
    arr.copy_to(back)
    np.testing.assert_array_equal(back.reshape(5, -1), quads)


def test_linear_memory_fetched_with_tex1Dfetch():
    data = rng.random(1000, dtype=np.float32)
    x = _aligned_empty(1000, np.float32)
    x.set(data)
    tex = kspec.TextureObject(kspec.ResourceDescriptor("linear", arr=x), kspec.TextureDescriptor())
    k = kspec.ElementwiseKernel("U texObj", "float32 y", "y = tex1Dfetch<float>(texObj, i) + 1.0f", "kfetch")
    y = kspec.empty(1000, np.float32)
    k(tex, y)
    np.testing.assert_array_equal(y.get(), data + 1)
    misaligned = device_array_from_pointer(x.ptr + 4, 400, np.float32, None, 0, x)
    with pytest.raises(kspec.KspecValueError, match="multiple of"):
        kspec.TextureObject(kspec.ResourceDescriptor("linear", arr=misaligned), kspec.TextureDescriptor())


def test_pitched_memory_read_as_a_2d_texture():
    data = rng.random((10, 24), dtype=np.float32)
    padded = _aligned_empty((10, 32), np.float32)  # rows of 128 bytes: a multiple of the pitch alignment
    full = np.zeros((10, 32), np.float32)
    full[:, :24] = data
    padded.set(full)
    res = kspec.ResourceDescriptor("pitch2d", arr=padded, width=24)
    assert (res.width, res.height, res.pitchInBytes) == (24, 10, 128)
    tex = kspec.TextureObject(res, kspec.TextureDescriptor(("clamp", "clamp")))
    k = kspec.ElementwiseKernel("U texObj, int32 w, int32 h", "float32 y", f"y = {FETCH[2]}", "kpitch")
    y = kspec.empty(data.shape, np.float32)
    k(tex, 24, 10, y)
    np.testing.assert_array_equal(y.get(), data)


# -- surfaces, copies, lifetimes ------------------------------------------------------------------------------


def test_surface_write_then_copy_to_host():
    w, h = 20, 9
    desc = kspec.ChannelFormatDescriptor(32, 0, 0, 0, "float")
    arr = kspec.CUDAArray(desc, w, h, flags=kspec.CUDAArray.SURFACE_LOAD_STORE)
    surf = kspec.SurfaceObject(kspec.ResourceDescriptor("array", cuArr=arr))
    code = (
        'extern "C" __global__ void write_surf(cudaSurfaceObject_t surf, int w, int h) {\n'
        "  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;\n"
        "  if (x < w && y < h) surf2Dwrite(float(y * 1000 + x), surf, x * (int)sizeof(float), y);\n}\n"
    )
    kspec.RawKernel(code, "write_surf")(((w + 31) // 32, h), (32,), (surf, np.int32(w), np.int32(h)))
    out = np.empty((h, w), np.float32)
    arr.copy_to(out)
    yy, xx = np.mgrid[:h, :w]
    np.testing.assert_array_equal(out, (yy * 1000 + xx).astype(np.float32))
    tex = kspec.TextureObject(kspec.ResourceDescriptor("array", cuArr=arr), kspec.TextureDescriptor())
    y = kspec.empty((h, w), np.float32)  # what the surface wrote, read through a texture on the same array
    kspec.ElementwiseKernel("U texObj, int32 w, int32 h", "float32 y", f"y = {FETCH[2]}", "ksurfread")(tex, w, h, y)
    np.testing.assert_array_equal(y.get(), out)


@pytest.mark.parametrize("extents", [(50,), (7, 13), (3, 5, 11)])
def test_copy_round_trips_numpy_and_device_arrays(extents):
    data = rng.standard_normal(extents).astype(np.float32)
    arr = kspec.CUDAArray(kspec.ChannelFormatDescriptor.from_dtype(np.float32), *reversed(extents))
    assert arr.shape == extents and arr.ndim == len(extents) and arr.ptr
    arr.copy_from(data)
    back = np.zeros_like(data)
    arr.copy_to(back)
    np.testing.assert_array_equal(back, data)
    dev = kspec.zeros(extents, np.float32)
    arr.copy_to(dev)
    np.testing.assert_array_equal(dev.get(), data)
    other = kspec.CUDAArray(arr.desc, *reversed(extents))
    stream = kspec.Stream()
    other.copy_from(dev, stream=stream)
    stream.synchronize()
    host = np.zeros_like(data)
    other.copy_to(host)
    np.testing.assert_array_equal(host, data)
    # device memory with padded rows (and slices): copied in place, the padding left alone
    padded_shape = tuple(e + 3 for e in extents)
    base = kspec.zeros(padded_shape, np.float32)
    strides = tuple(int(s) for s in np.empty(padded_shape, np.float32).strides)
    view = Strided(base, extents, strides)
    arr.copy_to(view)
    expected = np.zeros(padded_shape, np.float32)
    expected[tuple(slice(e) for e in extents)] = data
    np.testing.assert_array_equal(base.get(), expected)
    arr.copy_from(np.zeros_like(data))
    arr.copy_from(view)
    arr.copy_to(back)
    np.testing.assert_array_equal(back, data)


@pytest.mark.parametrize("height", [0, 6])
def test_layered_arrays_copy_as_layers(height):
    layers, width = 4, 9
    shape = (layers, height, width) if height else (layers, width)
    data = rng.integers(-1000, 1000, shape, dtype=np.int16)
    arr = kspec.CUDAArray(kspec.ChannelFormatDescriptor(16, 0, 0, 0, "signed"), width, height, layers,
                          kspec.CUDAArray.LAYERED)  # fmt: skip
    assert arr.shape == shape
    arr.copy_from(kspec.asarray(data))
    back = np.empty(shape, np.int16)
    arr.copy_to(back)
    np.testing.assert_array_equal(back, data)


def test_bad_shapes_and_dtypes_raise_typed_errors():
    arr = kspec.CUDAArray(kspec.ChannelFormatDescriptor(32, 32, 0, 0, "float"), 8, 3)
    with pytest.raises(kspec.KspecValueError, match=r"in_arr: expected shape \(3, 16\) \(or \(3, 8, 2\)"):
        arr.copy_from(np.zeros((3, 8), np.float32))
    with pytest.raises(kspec.KspecValueError, match=r"out_arr: expected shape \(3, 16\)"):
        arr.copy_to(kspec.empty((16, 3), np.float32))
    with pytest.raises(kspec.KspecValueError, match="expected dtype float32"):
        arr.copy_from(np.zeros((3, 16), np.float64))
    with pytest.raises(kspec.KspecValueError, match="C-contiguous and writable"):
        arr.copy_to(np.zeros((16, 3), np.float32).T)
    with pytest.raises(kspec.KspecTypeError, match="in_arr: expected a NumPy array or a device array"):
        arr.copy_from([[0.0] * 16] * 3)
    with pytest.raises(kspec.KspecValueError, match="SURFACE_LOAD_STORE"):
        kspec.SurfaceObject(kspec.ResourceDescriptor("array", cuArr=arr))


def test_objects_keep_their_memory_and_close():
    data = rng.random(64, dtype=np.float32)
    tex = _texture(data)  # the CUDAArray is referenced only by the texture now
    gc.collect()
    y = kspec.empty(64, np.float32)
    k = kspec.ElementwiseKernel("U texObj, int32 w, int32 h", "float32 y", f"y = {FETCH[1]}", "kkeep")
    k(tex, 64, 1, y)
    np.testing.assert_array_equal(y.get(), data)
    arr = tex.ResDesc.cuArr
    with pytest.raises(kspec.KspecValueError, match="close them first"):
        arr.close()
    with tex:
        assert tex.ptr and not tex.closed
    assert tex.closed
    with pytest.raises(kspec.KspecValueError, match="closed"):
        k(tex, 64, 1, y)  # a closed handle never reaches a kernel
    arr.close()
    arr.close()  # twice: nothing happens
    assert arr.closed and arr.ptr == 0
    with pytest.raises(kspec.KspecValueError, match="closed"):
        arr.copy_from(data)


def test_matches_cupy_where_available():
    cp = pytest.importorskip("cupy")
    from cupy.cuda import runtime, texture

    data = rng.random((9, 14), dtype=np.float32)
    ch = texture.ChannelFormatDescriptor(32, 0, 0, 0, runtime.cudaChannelFormatKindFloat)
    cu_arr = texture.CUDAarray(ch, 14, 9)
    cu_arr.copy_from(data)
    desc = (runtime.cudaAddressModeClamp,) * 2, runtime.cudaFilterModeLinear, runtime.cudaReadModeElementType
    theirs = texture.TextureObject(texture.ResourceDescriptor(runtime.cudaResourceTypeArray, cuArr=cu_arr),
                                   texture.TextureDescriptor(*desc))  # fmt: skip
    arr = kspec.CUDAArray(kspec.ChannelFormatDescriptor(32, 0, 0, 0, runtime.cudaChannelFormatKindFloat), 14, 9)
    arr.copy_from(cp.asarray(data))
    ours = kspec.TextureObject(kspec.ResourceDescriptor(runtime.cudaResourceTypeArray, cuArr=arr),
                               kspec.TextureDescriptor(*desc))  # fmt: skip
    k = kspec.ElementwiseKernel("U texObj, int32 w", "float32 y",
                                "y = tex2D<float>(texObj, (i % w) * 0.37f, (i / w) * 0.61f)", "kcupycmp")  # fmt: skip
    a, b = cp.empty((12, 16), cp.float32), cp.empty((12, 16), cp.float32)
    k(theirs, 16, a)
    k(ours, 16, b)
    np.testing.assert_array_equal(cp.asnumpy(a), cp.asnumpy(b))
