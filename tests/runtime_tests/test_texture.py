"""Texture memory without a GPU: channel formats and their driver mapping, the descriptors' validation and
messages, the copy layouts of CUDA arrays, the driver structs the descriptors become, kspec's texture objects
as kernel arguments, and NoDeviceError when an object is made on a machine without a device."""

from __future__ import annotations

import types

import numpy as np
import pytest

import kspec
from kspec.kernels.planning._binding import texture_handles
from kspec.runtime import (
    CUDAArray,
    ChannelFormatDescriptor,
    ResourceDescriptor,
    SurfaceObject,
    TextureDescriptor,
    TextureObject,
    is_texture_type,
)
from kspec.runtime._cudaarray import check_data_shape, memcpy3d, row_layout
from kspec.runtime._devicearray import DeviceArray

NAMES = ["CUDAArray", "ChannelFormatDescriptor", "ResourceDescriptor", "SurfaceObject", "TextureDescriptor", "TextureObject"]


def _no_device() -> None:
    if kspec.runtime.why_no_device() is None:
        pytest.skip("a CUDA device is present: the object would be made (tests/runtime_tests/test_texture_gpu.py covers it)")


def _device_array(shape, dtype, ptr: int = 1 << 20, strides=None) -> DeviceArray:
    """A DeviceArray description over an address nobody reads (descriptors only read ptr, shape, strides)."""
    return DeviceArray._wrap(ptr, tuple(shape), np.dtype(dtype), 0, None, 0, strides)


@pytest.fixture
def handle_object():
    """Makes texture/surface objects as the driver would have (no driver here); their made-up handles are
    dropped after the test, so no finalizer hands them to a driver (where another object may own them)."""
    made = []

    def make(cls, handle: int = 42):
        obj = cls.__new__(cls)
        obj._handle, obj._device_id = handle, 0
        made.append(obj)
        return obj

    yield make
    for obj in made:
        obj._handle = None


# -- exports ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_names_are_exported_from_kspec_and_runtime(name):
    assert getattr(kspec, name) is getattr(kspec.runtime, name)
    assert name in kspec.__all__ and name in kspec.runtime.__all__


def test_kernels_recognise_kspec_texture_and_surface_objects(handle_object):
    assert is_texture_type(TextureObject) and is_texture_type(SurfaceObject)
    assert not is_texture_type(TextureDescriptor) and not is_texture_type(CUDAArray)
    k = kspec.ElementwiseKernel("U texObj, T x", "T y", "y = tex1D<T>(texObj, float(i) + 0.5f) + x", "kspec_texk")
    x = np.zeros(3, np.float32)
    tex = handle_object(TextureObject, 42)
    args, textures = texture_handles((tex, x), k.spec)
    assert textures == {"texObj"} and args[0] == np.uint64(42) and args[1] is x
    k.compile(tex, x, arch="sm_90")  # tex1D<float>(texObj, ...) with kspec's own object compiles


def test_a_closed_object_refuses_to_give_its_handle(handle_object):
    tex = handle_object(TextureObject)
    assert tex.ptr == 42 and not tex.closed
    tex._handle = None
    assert tex.closed
    with pytest.raises(kspec.KspecValueError, match="TextureObject is closed"):
        _ = tex.ptr
    tex.close()  # closing a closed object does nothing (and needs no driver)


# -- channel formats ----------------------------------------------------------------------------------------

FORMATS = [
    ("signed", 8, "CU_AD_FORMAT_SIGNED_INT8", np.int8),
    ("signed", 16, "CU_AD_FORMAT_SIGNED_INT16", np.int16),
    ("signed", 32, "CU_AD_FORMAT_SIGNED_INT32", np.int32),
    ("unsigned", 8, "CU_AD_FORMAT_UNSIGNED_INT8", np.uint8),
    ("unsigned", 16, "CU_AD_FORMAT_UNSIGNED_INT16", np.uint16),
    ("unsigned", 32, "CU_AD_FORMAT_UNSIGNED_INT32", np.uint32),
    ("float", 16, "CU_AD_FORMAT_HALF", np.float16),
    ("float", 32, "CU_AD_FORMAT_FLOAT", np.float32),
]


@pytest.mark.parametrize("channels", [1, 2, 4])
@pytest.mark.parametrize(("kind", "bits", "format_name", "dtype"), FORMATS)
def test_every_cuda_format_maps_to_the_driver_and_numpy(kind, bits, format_name, dtype, channels):
    widths = [bits] * channels + [0] * (4 - channels)
    desc = ChannelFormatDescriptor(*widths, kind)
    assert (desc.kind, desc.bits, desc.num_channels, desc.format_name) == (kind, bits, channels, format_name)
    assert desc.dtype == np.dtype(dtype) and desc.itemsize == bits // 8 * channels
    assert desc.get_channel_format() == {"x": widths[0], "y": widths[1], "z": widths[2], "w": widths[3],
                                         "f": {"signed": 0, "unsigned": 1, "float": 2}[kind]}  # fmt: skip
    assert ChannelFormatDescriptor.from_dtype(dtype, channels) == desc
    assert ChannelFormatDescriptor(*widths, desc.get_channel_format()["f"]) == desc  # CUDA's number for the kind
    cu = pytest.importorskip("cuda.bindings.driver")
    assert hasattr(cu.CUarray_format, format_name)


def test_cupys_constants_are_accepted_as_numbers():
    runtime = pytest.importorskip("cupy.cuda.runtime")
    assert ChannelFormatDescriptor(32, 0, 0, 0, runtime.cudaChannelFormatKindFloat).kind == "float"
    assert ChannelFormatDescriptor(8, 0, 0, 0, runtime.cudaChannelFormatKindUnsigned).kind == "unsigned"
    tex = TextureDescriptor((runtime.cudaAddressModeBorder, runtime.cudaAddressModeMirror), runtime.cudaFilterModeLinear,
                            runtime.cudaReadModeNormalizedFloat)  # fmt: skip
    assert tex.get_texture_desc()["addressMode"] == (3, 2, 0)
    assert (tex.filterMode, tex.readMode) == (1, 1)
    assert runtime.cudaArraySurfaceLoadStore == CUDAArray.SURFACE_LOAD_STORE
    assert (runtime.cudaResourceTypeArray, runtime.cudaResourceTypeLinear, runtime.cudaResourceTypePitch2D) == (0, 2, 3)


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((32, 32, 32, 0, "float"), ValueError, r"1, 2 or 4 channels, not 3"),
        ((32, 0, 32, 0, "float"), ValueError, r"given from x on, all of one width"),
        ((32, 16, 0, 0, "float"), ValueError, r"all of one width"),
        ((0, 0, 0, 0, "float"), ValueError, r"at least one channel"),
        ((8, 0, 0, 0, "float"), ValueError, r"no 8-bit float channel format; float channels are 16, 32 bits"),
        ((64, 0, 0, 0, "signed"), ValueError, r"no 64-bit signed channel format; signed channels are 8, 16, 32"),
        ((24, 0, 0, 0, "unsigned"), ValueError, r"no 24-bit unsigned"),
        ((32, 0, 0, 0, 3), ValueError, r"kind: expected one of 'signed' \(0\), 'unsigned' \(1\), 'float' \(2\), got 3"),
        ((32, 0, 0, 0, "double"), ValueError, r"kind: expected one of .* got 'double'"),
        ((32, 0, 0, 0, None), TypeError, r"kind: expected one of"),
        ((-8, 0, 0, 0, "float"), ValueError, r"x: expected an int >= 0, got -8"),
        ((32.0, 0, 0, 0, "float"), TypeError, r"x: expected an int >= 0, got float"),
        ((True, 0, 0, 0, "float"), ValueError, r"x: expected an int >= 0, got True"),
    ],
)
def test_channel_formats_cuda_lacks_are_value_errors(args, error, message):
    with pytest.raises(error, match=message) as info:
        ChannelFormatDescriptor(*args)
    assert isinstance(info.value, kspec.KspecError)


def test_from_dtype_refuses_what_has_no_format():
    with pytest.raises(kspec.KspecValueError, match=r"dtype: CUDA arrays and textures hold int8, .*float32; got float64"):
        ChannelFormatDescriptor.from_dtype(np.float64)
    with pytest.raises(kspec.KspecTypeError, match="dtype: 'pixel' is not a dtype"):
        ChannelFormatDescriptor.from_dtype("pixel")
    with pytest.raises(kspec.KspecValueError, match="num_channels: CUDA has 1, 2 or 4 channels, got 3"):
        ChannelFormatDescriptor.from_dtype(np.float32, 3)
    assert repr(ChannelFormatDescriptor.from_dtype(np.uint8, 4)) == "ChannelFormatDescriptor(8, 8, 8, 8, 'unsigned')"


# -- CUDA arrays --------------------------------------------------------------------------------------------

FLOAT = ChannelFormatDescriptor(32, 0, 0, 0, "float")


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        ((FLOAT, 0), {}, ValueError, "width: a CUDA array needs width >= 1"),
        ((FLOAT, 8, 0, 4), {}, ValueError, r"height: a 3-d CUDA array \(depth=4\) needs height >= 1"),
        ((FLOAT, 8, 8, 0, CUDAArray.LAYERED), {}, ValueError, "depth: a layered CUDA array gives its number of layers"),
        ((FLOAT, 8), {"flags": 0x40}, ValueError, r"flags: expected a combination of CUDAArray.LAYERED .* got 0x40"),
        ((FLOAT, 8, 4, 6, CUDAArray.CUBEMAP), {}, ValueError, "a cubemap is width x width x 6"),
        ((FLOAT, 8, -1), {}, ValueError, "height: expected an int >= 0"),
        (((32, 0, 0, 0, "float"), 8), {}, TypeError, "desc: expected a kspec ChannelFormatDescriptor, got tuple"),
    ],
)
def test_cuda_array_arguments_are_checked_before_the_driver(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        CUDAArray(*args, **kwargs)


@pytest.mark.parametrize(
    "args", [(FLOAT, 16), (FLOAT, 16, 8), (FLOAT, 16, 8, 4), (FLOAT, 16, 0, 3, CUDAArray.LAYERED)]
)
def test_a_valid_cuda_array_needs_a_device(args):
    _no_device()
    with pytest.raises(kspec.NoDeviceError, match="no CUDA device"):
        CUDAArray(*args)


def test_data_shapes_name_what_was_expected():
    check_data_shape((3, 16), (3, 16), 2, "in_arr")
    check_data_shape((3, 8, 2), (3, 16), 2, "in_arr")  # the channels as a last axis
    with pytest.raises(kspec.KspecValueError, match=r"in_arr: expected shape \(3, 16\) \(or \(3, 8, 2\), the channels"):
        check_data_shape((3, 8), (3, 16), 2, "in_arr")
    with pytest.raises(kspec.KspecValueError, match=r"out_arr: expected shape \(4, 5, 6\), got \(6, 5, 4\)$"):
        check_data_shape((6, 5, 4), (4, 5, 6), 1, "out_arr")


def test_row_layouts_of_contiguous_pitched_and_layered_memory():
    # (shape, strides, itemsize, channels, (depth, height)) -> (pitch, rows per slice)
    assert row_layout((64,), (4,), 4, 1, (0, 0), "a") == (256, 1)
    assert row_layout((5, 16), (64, 4), 4, 1, (0, 5), "a") == (64, 5)
    assert row_layout((5, 16), (128, 4), 4, 1, (0, 5), "a") == (128, 5)  # padded rows
    assert row_layout((3, 5, 16), (1024, 128, 4), 4, 1, (3, 5), "a") == (128, 8)  # padded rows and slices
    assert row_layout((4, 9), (18, 2), 2, 1, (4, 0), "a") == (18, 1)  # 1-d layered: a row per layer
    assert row_layout((5, 8, 2), (64, 8, 4), 4, 2, (0, 5), "a") == (64, 5)  # float2 with a channel axis
    assert row_layout((1, 16), (4, 4), 4, 1, (0, 1), "a") == (64, 1)  # an axis of 1 has any stride
    with pytest.raises(kspec.KspecValueError, match=r"a: its rows must be contiguous \(strides \(64, 8\)\)"):
        row_layout((5, 8), (64, 8), 4, 1, (0, 5), "a")
    with pytest.raises(kspec.KspecValueError, match="rows overlap or are out of order"):
        row_layout((5, 16), (32, 4), 4, 1, (0, 5), "a")
    with pytest.raises(kspec.KspecValueError, match="slices overlap or are out of order"):
        row_layout((3, 5, 16), (200, 64, 4), 4, 1, (3, 5), "a")


def test_copies_become_one_memcpy3d():
    cu = pytest.importorskip("cuda.bindings.driver")
    array = types.SimpleNamespace(width=7, height=5, depth=0, desc=ChannelFormatDescriptor.from_dtype(np.float32, 4),
                                  _handle=cu.CUarray(0x1234))  # fmt: skip
    into = memcpy3d(cu, array, 0x5000, False, 128, 5, True)
    assert (into.WidthInBytes, into.Height, into.Depth) == (7 * 16, 5, 1)
    assert into.dstMemoryType == cu.CUmemorytype.CU_MEMORYTYPE_ARRAY and int(into.dstArray) == 0x1234
    assert into.srcMemoryType == cu.CUmemorytype.CU_MEMORYTYPE_DEVICE and int(into.srcDevice) == 0x5000
    assert (into.srcPitch, into.srcHeight) == (128, 5)
    out = memcpy3d(cu, array, 0x9000, True, 112, 5, False)
    assert out.srcMemoryType == cu.CUmemorytype.CU_MEMORYTYPE_ARRAY and int(out.srcArray) == 0x1234
    assert out.dstMemoryType == cu.CUmemorytype.CU_MEMORYTYPE_HOST and int(out.dstHost) == 0x9000


# -- texture descriptors ------------------------------------------------------------------------------------


def test_texture_descriptor_defaults_are_cupys():
    assert TextureDescriptor().get_texture_desc() == {
        "addressMode": (0, 0, 0), "filterMode": 0, "readMode": 0, "sRGB": 0, "borderColor": (0.0,) * 4,
        "normalizedCoords": 0, "maxAnisotropy": 0,
    }  # fmt: skip
    tex = TextureDescriptor(("clamp", "Border"), "linear", "normalized_float", borderColors=(1, 0.5),
                            normalizedCoords=True, maxAnisotropy=4)  # fmt: skip
    assert tex.get_texture_desc() == {
        "addressMode": (1, 3, 0), "filterMode": 1, "readMode": 1, "sRGB": 0, "borderColor": (1.0, 0.5, 0.0, 0.0),
        "normalizedCoords": 1, "maxAnisotropy": 4,
    }  # fmt: skip
    assert "addressModes=('clamp', 'border', 'wrap')" in repr(tex)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"addressModes": ("clamp", "repeat")}, ValueError, r"addressModes: expected one of 'wrap' \(0\), 'clamp' \(1\), "
                                                            r"'mirror' \(2\), 'border' \(3\), got 'repeat'"),
        ({"addressModes": (0, 0, 0, 0)}, ValueError, "addressModes: expected at most 3 values, got 4"),
        ({"filterMode": 2}, ValueError, r"filterMode: expected one of 'point' \(0\), 'linear' \(1\), got 2"),
        ({"readMode": "float"}, ValueError, r"readMode: expected one of 'element_type' \(0\), 'normalized_float'"),
        ({"filterMode": 1.0}, TypeError, "filterMode: expected one of .* got float"),
        ({"borderColors": (1, 2, 3, 4, 5)}, ValueError, "borderColors: expected at most 4 values, got 5"),
        ({"borderColors": ("red",)}, TypeError, "borderColors: expected up to 4 numbers"),
        ({"maxAnisotropy": -1}, ValueError, "maxAnisotropy: expected an int >= 0"),
    ],
)
def test_texture_descriptor_mistakes_name_the_argument(kwargs, error, message):
    with pytest.raises(error, match=message):
        TextureDescriptor(**kwargs)


@pytest.mark.parametrize(
    ("read", "kind", "normalized", "flags"),
    [
        ("element_type", "unsigned", False, {"CU_TRSF_READ_AS_INTEGER"}),
        ("element_type", "float", False, set()),
        ("normalized_float", "unsigned", False, set()),  # the driver's default: 8/16-bit integers promoted
        ("element_type", "signed", True, {"CU_TRSF_READ_AS_INTEGER", "CU_TRSF_NORMALIZED_COORDINATES"}),
    ],
)
def test_read_mode_becomes_the_drivers_flags(read, kind, normalized, flags):
    cu = pytest.importorskip("cuda.bindings.driver")
    fmt = ChannelFormatDescriptor(16, 0, 0, 0, kind)
    desc = TextureDescriptor(("clamp", "wrap", "mirror"), "point", read, normalizedCoords=normalized, borderColors=(2,))
    driver_desc = desc._to_driver(cu, fmt)
    expected = 0
    for name in flags:
        expected |= getattr(cu, name)
    assert driver_desc.flags == expected
    assert [int(m) for m in driver_desc.addressMode] == [1, 0, 2]
    assert driver_desc.borderColor == [2.0, 0.0, 0.0, 0.0] and int(driver_desc.filterMode) == 0


# -- resource descriptors and objects -----------------------------------------------------------------------


def test_linear_and_pitch2d_resources_read_device_arrays():
    x = _device_array((256,), np.float32)
    linear = ResourceDescriptor("linear", arr=x)
    assert linear.chDesc == FLOAT and linear.sizeInBytes == 1024
    assert linear.get_resource_desc()["linear"]["sizeInBytes"] == 1024
    assert ResourceDescriptor(2, arr=x, sizeInBytes=512).sizeInBytes == 512
    grid = _device_array((10, 32), np.float32)
    pitched = ResourceDescriptor("pitch2d", arr=grid, width=24)
    assert (pitched.width, pitched.height, pitched.pitchInBytes) == (24, 10, 128)
    pairs = ResourceDescriptor("Pitch2D", arr=grid, chDesc=ChannelFormatDescriptor.from_dtype(np.float32, 2))
    assert pairs.width == 16  # 32 floats a row are 16 float2 elements
    cu = pytest.importorskip("cuda.bindings.driver")
    struct = pitched._to_driver(cu)
    assert struct.resType == cu.CUresourcetype.CU_RESOURCE_TYPE_PITCH2D and int(struct.res.pitch2D.devPtr) == 1 << 20
    assert (struct.res.pitch2D.width, struct.res.pitch2D.height, struct.res.pitch2D.pitchInBytes) == (24, 10, 128)
    assert struct.res.pitch2D.format == cu.CUarray_format.CU_AD_FORMAT_FLOAT and struct.res.pitch2D.numChannels == 1
    struct = linear._to_driver(cu)
    assert struct.resType == cu.CUresourcetype.CU_RESOURCE_TYPE_LINEAR and struct.res.linear.sizeInBytes == 1024


VECTOR, GRID = "a (256,) float32 device array", "a (10, 32) float32 device array"  # stand-ins, made per test


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        (("array",), {}, TypeError, "cuArr: restype 'array' needs a kspec CUDAArray, got NoneType"),
        ((1,), {}, NotImplementedError, "restype: mipmapped arrays are not supported"),
        (("texture",), {}, ValueError, r"restype: expected one of 'array' \(0\), 'mipmapped_array' \(1\), 'linear'"),
        (("linear",), {}, TypeError, "arr: restype 'linear' needs a device array"),
        (("linear",), {"arr": np.zeros(4, np.float32)}, TypeError, "arr: a numpy.ndarray lives in host memory"),
        (("linear",), {"arr": VECTOR, "sizeInBytes": 2048}, ValueError,
         r"sizeInBytes: expected a multiple of 4 .* up to arr's 1024"),
        (("linear",), {"arr": VECTOR, "sizeInBytes": 6}, ValueError, "sizeInBytes: expected a multiple of 4"),
        (("linear",), {"arr": VECTOR, "chDesc": ChannelFormatDescriptor(16, 0, 0, 0, "float")}, ValueError,
         r"chDesc: .* reads float16 channels but arr is float32"),
        (("linear",), {"arr": VECTOR, "chDesc": (32, 0, 0, 0, "float")}, TypeError,
         "chDesc: expected a kspec ChannelFormatDescriptor"),
        (("linear",), {"arr": VECTOR, "cuArr": object()}, ValueError, "cuArr: restype 'linear' reads a device array"),
        (("pitch2d",), {"arr": VECTOR}, ValueError, r"arr: restype 'pitch2d' reads rows .* got shape \(256,\)"),
        (("pitch2d",), {"arr": GRID, "pitchInBytes": 64}, ValueError, r"pitchInBytes: 64 is less than a row \(128 bytes\)"),
        (("pitch2d",), {"arr": GRID, "height": 11}, ValueError, r"11 rows of 32 elements, 128 bytes apart, reach past"),
    ],
)  # fmt: skip
def test_resource_descriptor_mistakes_name_the_argument(args, kwargs, error, message):
    stand_ins = {VECTOR: (256,), GRID: (10, 32)}
    arr = kwargs.get("arr")
    if isinstance(arr, str):
        kwargs = {**kwargs, "arr": _device_array(stand_ins[arr], np.float32)}
    with pytest.raises(error, match=message) as info:
        ResourceDescriptor(*args, **kwargs)
    assert isinstance(info.value, kspec.KspecError)


def test_texture_over_integers_refuses_linear_filtering_before_the_driver():
    res = ResourceDescriptor("pitch2d", arr=_device_array((8, 64), np.uint8))
    with pytest.raises(kspec.KspecValueError, match=r"filterMode: linear filtering returns floats; .* uint8 as itself"):
        TextureObject(res, TextureDescriptor(filterMode="linear"))
    with pytest.raises(kspec.KspecTypeError, match="TexDesc: expected a kspec TextureDescriptor, got dict"):
        TextureObject(res, {})
    with pytest.raises(kspec.KspecTypeError, match="ResDesc: expected a kspec ResourceDescriptor, got str"):
        TextureObject("linear", TextureDescriptor())
    with pytest.raises(kspec.KspecValueError, match=r"ResDesc: a surface reads and writes a CUDAArray"):
        SurfaceObject(res)


def test_valid_objects_need_a_device():
    _no_device()
    res = ResourceDescriptor("pitch2d", arr=_device_array((8, 64), np.uint8))
    with pytest.raises(kspec.NoDeviceError, match="no CUDA device"):
        TextureObject(res, TextureDescriptor(filterMode="linear", readMode="normalized_float"))
