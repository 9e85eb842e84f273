"""Code written for CuPy, run with only the import changed (issue 15), without a GPU: empty operations and
size=, CuPy's error phrases, source()/compile() of kernels, KSPEC_DUMP_SOURCE on cache hits, `with stream:`,
backend='nvcc', texture objects as arguments, the JAX/Numba output libraries."""

from __future__ import annotations

import io
import re
import shutil
import threading

import numpy as np
import pytest

import kspec
from kspec.kernels.planning._binding import bind
from kspec.kernels.planning._binding import texture_handles as _texture_handles
from kspec.kernels.planning._plan import plan_elementwise
from kspec.runtime import Stream, current_stream
from kspec.runtime._devicearray import DeviceArray
from kspec.spec import parse_spec

PTR = 0x7F0000000000


def fake(shape, dtype="float32"):
    return DeviceArray._wrap(PTR, tuple(shape), np.dtype(dtype), 0, None)


def eplan(kernel, *args, **kwargs):
    bound = bind(kernel.spec, args[: kernel.nin], args[kernel.nin :] or None)
    return plan_elementwise(kernel.spec, bound, kernel._specializer, **kwargs)


# -- 1. empty operation and size= ------------------------------------------------------------------------


def test_empty_operation_is_accepted_by_the_constructor_and_spec_files():
    k = kspec.ElementwiseKernel("raw T x", "raw T y", "", "kernel")
    assert k.operation == ""
    spec = parse_spec(dict(kind="elementwise", name="k", in_params="raw T x", out_params="raw T y", operation=""))
    assert spec.operation == ""
    body = kspec.ElementwiseKernel("raw T x", "raw T y", "", "first", loop_prep="if (threadIdx.x + blockIdx.x == 0) y[0] = x[0];")
    body.compile(np.zeros(3, np.float32), np.zeros(3, np.float32), arch="sm_90")  # NVRTC, no GPU


RAW_IO = kspec.ElementwiseKernel("raw T x", "raw T y", "", "raw_io")
MIXED = kspec.ElementwiseKernel("raw T x, T z", "T y", "", "mixed")
RAW_OUT = kspec.ElementwiseKernel("T x", "raw T y", "", "raw_out")
SCALAR_ONLY = kspec.ElementwiseKernel("float32 a", "raw float32 y", "", "scalar_only")


@pytest.mark.parametrize(
    "kernel, args, size, shape, allocated",
    [
        (RAW_IO, (fake((7,)), fake((3,))), 20, (20,), ()),  # all raw, outputs given: size decides
        (RAW_IO, (fake((7,)),), 5, (5,), ("y",)),  # all raw, raw output allocated with (size,)
        (SCALAR_ONLY, (1.5,), 4, (4,), ("y",)),  # scalars only: size decides, raw output (size,)
        (MIXED, (fake((7,)), fake((2, 3))), None, (2, 3), ("y",)),  # a non-raw input decides
        (RAW_OUT, (fake((4,)),), None, (4,), ("y",)),  # a raw output not given: the loop shape
        (SCALAR_ONLY, (1.5,), None, (), ("y",)),  # scalars only, no size: one element, as NumPy
    ],
)
def test_size_semantics(kernel, args, size, shape, allocated):
    plan = eplan(kernel, *args, size=size)
    assert plan.shape == shape
    assert tuple(name for name, _ in plan.allocate) == allocated


@pytest.mark.parametrize(
    "kernel, args, size, phrase",
    [
        (MIXED, (fake((7,)), fake((3,))), 3, "Specified 'size' can be used only if all of the ndarray are 'raw'."),
        (MIXED, (fake((7,)), fake((3,)), fake((3,))), 3, "Specified 'size' can be used only"),  # non-raw output
        (RAW_IO, (fake((7,)),), None, "Loop size is undecided."),
        (RAW_IO, (fake((7,)), fake((7,))), None, "Loop size is undecided."),
    ],
)
def test_size_errors_start_with_cupys_phrase(kernel, args, size, phrase):
    with pytest.raises(ValueError) as info:
        eplan(kernel, *args, size=size)
    assert str(info.value).startswith(phrase)


# -- 4. CuPy's phrases -------------------------------------------------------------------------------------

SQD = kspec.ElementwiseKernel("T x, T y", "T z", "z = (x - y) * (x - y)", "sqd")
SSQ = kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "ssq")
RMAX = kspec.ReductionKernel("T x", "T y", "x", "max(a, b)", "y = a", None, "rmax")
WSUM = kspec.ReductionKernel("T x, raw T w", "T y", "x * w[_J]", "a + b", "y = a", "0", "wsum")

PHRASES = [
    (lambda: kspec.ElementwiseKernel("T x", "T y", "y = x", "1bad"), ValueError, 'Invalid kernel name: "1bad"'),
    (lambda: kspec.ReductionKernel("T x", "T y", "x", "a+b", "y=a", "0", "a b"), ValueError, 'Invalid kernel name: "a b"'),
    (lambda: kspec.ElementwiseKernel("T i", "T y", "y = i"), ValueError, "Can not use 'i' as a parameter name"),
    (lambda: SQD(fake((3,))), TypeError, "Wrong number of arguments for 'sqd'. It must be either 2 or 3 (with outputs), but given 1."),
    (lambda: SSQ(), TypeError, "Wrong number of arguments for ssq"),
    (lambda: SQD(fake((3,)), fake((3,)), bogus=1), TypeError, "Wrong arguments {'bogus': 1}"),
    (lambda: SQD(fake((2, 3)), fake((3,)), fake((3,))), ValueError, "Out shape is mismatched"),
    (lambda: SQD(fake((3,)), fake((4,))), ValueError, "operands could not be broadcast together"),
    (lambda: SQD(fake((3,)), fake((3,)), 1.0), TypeError, "Output arguments type must be cupy.ndarray"),
    (lambda: SQD(fake((3,)), fake((3,), "float64")), TypeError, "Type is mismatched."),
    (lambda: SQD(fake((3,)), fake((3,)), block_size=0), ValueError, "block_size must be greater than zero"),
    (lambda: SSQ(fake((2, 3)), axis=(1, 1)), ValueError, "duplicate value in 'axis'"),
    (lambda: SSQ(fake((2, 3)), axis=2), ValueError, "axis 2 is out of bounds for array of dimension 2"),
    (lambda: SSQ(fake((2, 3)), fake(()), out=fake(())), ValueError, "cannot specify 'out' as both a positional and keyword argument"),
    (lambda: RMAX(fake((0,))), ValueError, "zero-size array to reduction operation rmax which has no identity"),
    (lambda: WSUM(fake((2, 5)), fake((5,)), axis=1), NotImplementedError, "Illegal conditions"),
    (lambda: kspec.RawModule(), TypeError, "Exactly one of `code` and `path` keyword arguments must be given."),
]


@pytest.mark.parametrize("call, exc_type, phrase", PHRASES, ids=[p[2][:40] for p in PHRASES])
def test_messages_start_with_cupys_phrase(call, exc_type, phrase):
    with pytest.raises(exc_type, match=re.escape(phrase)) as info:
        call()
    assert str(info.value).startswith(phrase), str(info.value)


def test_the_phrases_are_documented():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "errors.md").read_text()
    for _, _, phrase in PHRASES:
        head = re.split(r"[{\"]", " ".join(phrase.split()[:3]))[0].strip().rstrip(".:")
        assert head in doc, head


# -- 7. source(), compile(), KSPEC_DUMP_SOURCE -------------------------------------------------------------


def test_source_takes_numpy_stand_ins_and_needs_no_gpu():
    x = np.zeros((2, 3), np.float32)
    source = SQD.source(x, x)
    assert "sqd" in source and "(x - y) * (x - y)" in source
    assert SQD.source(x, 2.0) != source  # a scalar is its own specialization
    assert "a + b" in SSQ.source(x)


def test_compile_with_arch_writes_the_log(tmp_path, monkeypatch):
    monkeypatch.setenv("KSPEC_CACHE_DIR", str(tmp_path / "cache"))
    k = kspec.ElementwiseKernel("T x", "T y", "int unused = 1; y = x", "warns")
    log = io.StringIO()
    k.compile(np.zeros(3, np.float32), log_stream=log, arch="sm_90")
    assert "unused" in log.getvalue()  # NVRTC's warning about the variable


def test_dump_source_on_cache_hits(tmp_path, monkeypatch):
    from kspec.compiler import CompileOptions, compile_cached

    monkeypatch.setenv("KSPEC_CACHE_DIR", str(tmp_path / "cache"))
    source = 'extern "C" __global__ void dumped(float* a) { a[0] = 1; }\n'
    compile_cached(source, name="dumped", options=CompileOptions(arch="sm_90"))
    monkeypatch.setenv("KSPEC_DUMP_SOURCE", "1")
    monkeypatch.setenv("KSPEC_DUMP_DIR", str(tmp_path / "dump"))
    _, hit = compile_cached(source, name="dumped", options=CompileOptions(arch="sm_90"))
    assert hit
    (dumped,) = (tmp_path / "dump").glob("dumped-*.cu")
    assert dumped.read_text() == source


def test_every_kspec_variable_is_documented():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    used = set()
    for path in (root / "kspec").rglob("*.py"):
        used |= set(re.findall(r'"(KSPEC_[A-Z_]+)"', path.read_text()))
    readme = (root / "README.md").read_text()
    assert used and not [v for v in sorted(used) if f"`{v}`" not in readme]


# -- 6. with stream: ---------------------------------------------------------------------------------------


def test_with_stream_is_current_nested_and_per_thread():
    a, b = Stream.from_handle(5), Stream.from_handle(7)
    assert current_stream() is None
    with a as entered:
        assert entered is a and current_stream() is a
        with b:
            assert current_stream() is b
            seen = []
            thread = threading.Thread(target=lambda: seen.append(current_stream()))
            thread.start()
            thread.join()
            assert seen == [None]
        assert current_stream() is a
    assert current_stream() is None
    with pytest.raises(RuntimeError):
        with a:
            raise RuntimeError("left through an exception")
    assert current_stream() is None


# -- 3. backend='nvcc' -------------------------------------------------------------------------------------

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on PATH")
TEMPLATE = r"""
template<typename T> __global__ void fx3(T* a, int n) { if (threadIdx.x < n) a[threadIdx.x] *= 3; }
extern "C" __global__ void plain(float* a) { a[0] = 1; }
"""


@needs_nvcc
def test_nvcc_backend_compiles_with_name_expressions_and_the_cache(tmp_path, monkeypatch):
    from kspec.compiler import CompileOptions, compile_cached

    monkeypatch.setenv("KSPEC_CACHE_DIR", str(tmp_path / "cache"))
    options = CompileOptions(arch="sm_90", extra=("-DSCALE=3",))
    program, hit = compile_cached(TEMPLATE, name="m", options=options, name_expressions=["fx3<float>", "plain"], backend="nvcc")
    assert not hit and program.format == "cubin" and program.binary[:4] == b"\x7fELF"
    assert dict(program.lowered_names) == {"fx3<float>": "_Z3fx3IfEvPT_i", "plain": "plain"}
    again, hit = compile_cached(TEMPLATE, name="m", options=options, name_expressions=["fx3<float>", "plain"], backend="nvcc")
    assert hit and again.binary == program.binary
    nvrtc, hit = compile_cached(TEMPLATE, name="m", options=options, name_expressions=["fx3<float>", "plain"])
    assert not hit  # another backend is another cache entry


@needs_nvcc
def test_nvcc_backend_raw_module_compile_log_and_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("KSPEC_CACHE_DIR", str(tmp_path / "cache"))
    module = kspec.RawModule(code=TEMPLATE + "__global__ void w() { int unused = 1; }\n", backend="nvcc",
                             name_expressions=["fx3<float>"])  # fmt: skip
    assert module.backend == "nvcc"
    log = io.StringIO()
    module.compile(log_stream=log, arch="sm_90")
    assert "unused" in log.getvalue()
    with pytest.raises(kspec.CompileError, match="nvcc .* failed to compile"):
        kspec.RawModule(code="not cuda", backend="nvcc").compile(arch="sm_90")
    assert kspec.RawKernel(TEMPLATE, "plain", backend="nvcc").backend == "nvcc"


# -- 2. texture objects as arguments -------------------------------------------------------------------------


class TextureObject:  # stands for cupy.cuda.texture.TextureObject (only .ptr is read)
    __module__ = "cupy.cuda.texture"

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


def test_texture_objects_bind_as_handles_and_their_placeholder_to_no_array():
    k = kspec.ElementwiseKernel("U texObj, T x", "T y", "y = tex1D<T>(texObj, float(i) + 0.5f) + x", "texk")
    x = np.zeros(3, np.float32)
    args, textures = _texture_handles((TextureObject(42), x), k.spec)
    assert textures == {"texObj"} and args[0] == np.uint64(42) and args[1] is x
    bound = bind(k.spec, [args[0], fake((3,))], None, textures)
    assert bound.types == {"U": "uint64", "T": "float32"}
    assert bound.scalars["texObj"] == (42).to_bytes(8, "little")
    k.compile(TextureObject(42), x, arch="sm_90")  # tex1D<float>(texObj, ...) compiles


def test_texture_object_for_a_typed_parameter_is_refused():
    k = kspec.ElementwiseKernel("float32 texObj", "float32 y", "y = texObj", "typed")
    with pytest.raises(TypeError, match="placeholder of its own"):
        bind(k.spec, [np.uint64(1)], None, frozenset({"texObj"}))


def test_raw_kernel_packs_a_texture_object_as_its_handle():
    from kspec.runtime._launch_args import _classify_arg

    arg = _classify_arg(TextureObject(7))
    assert (arg.kind, arg.size) == ("handle", 8)


# -- 5. outputs in the inputs' library ----------------------------------------------------------------------


def test_jax_and_numba_inputs_allocate_device_arrays_that_are_exported_later():
    from kspec.runtime import EXPORTED, export_outputs
    from kspec.runtime._interop import JAX, NUMBA

    assert EXPORTED == {JAX, NUMBA}
    sentinel = object()
    assert export_outputs({"y": sentinel}, None) == {"y": sentinel}
    assert export_outputs({"y": sentinel}, "cupy")["y"] is sentinel
