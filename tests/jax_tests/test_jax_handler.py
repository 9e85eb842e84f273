"""kspec.jax's XLA FFI handler on JAX's CPU backend, below the kernels: descriptions, the C and Python handlers.

A hand-made launch (a raw CPU-device kernel, its parameter buffer written here) is described, registered and run
by ``jax.ffi.ffi_call`` inside ``jax.jit``: the C handler (built by the host compiler from _handler.cc) and the
Python fallback (registered here under a target of its own) give the same results; a launch of another process
(a stale index or process number) and a launch planned for the other device kind are errors from XLA, never
run; damaged descriptions are refused before anything runs. Skipped without JAX (CI has none) or without a
host compiler.
"""

from __future__ import annotations

import struct
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest


jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

import kspec  # noqa: E402
from kspec.jax import _describe, _library  # noqa: E402

N = 1000
_CODE = r"""
extern "C" __global__ void axpy2(const float* x, const float* y, float* z, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = x[i] + 2.0f * y[i];
}
"""


pytestmark = pytest.mark.usefixtures("needs_host_compiler")


@pytest.fixture(autouse=True)
def _jax_on_the_cpu():
    """JAX's CPU backend even where a GPU is its default: these launches are kspec's CPU device's."""
    with jax.default_device(jax.devices("cpu")[0]):
        yield


@pytest.fixture(scope="module")
def axpy2_function():
    with kspec.use_device("cpu"):
        kernel = kspec.RawKernel(_CODE, "axpy2")
        return int(kernel._function_here())  # the entry's address: what plan_launch gives as the function


def _plan(function: int, n: int = N, *, pointers=((0, "input", 0), (8, "input", 1), (16, "output", 0))) -> SimpleNamespace:
    params = bytearray(32)
    struct.pack_into("<i", params, 24, n)
    step = SimpleNamespace(function=function, grid=(n + 127) // 128, block=128, shared=0, params=bytes(params),
                           slot_offsets=(0, 8, 16, 24), pointers=pointers)  # fmt: skip
    out = SimpleNamespace(shape=(n,), dtype="float32", strides=None)
    return SimpleNamespace(outputs=(out,), result="single", steps=(step,), workspace=0, device_id=-1)


def _call(target: str, index: int, process: int, n: int = N):
    @jax.jit
    def f(x, y):
        call = jax.ffi.ffi_call(target, [jax.ShapeDtypeStruct((n,), jnp.float32)])
        (z,) = call(x, y, kspec_launch=np.int64(index), kspec_process=np.int64(process))
        return z * 3

    return f


def _inputs(n: int = N):
    return jnp.arange(n, dtype=jnp.float32), jnp.ones(n, jnp.float32)


def test_c_handler_runs_a_described_launch(axpy2_function):
    description = _describe.describe(_plan(axpy2_function), name="axpy2", kind=_describe.KIND_HOST, device=-1, inputs=2)
    index, process = _library.register(description)
    assert _library.register(description) == (index, process)  # the same description: the same entry
    x, y = _inputs()
    np.testing.assert_array_equal(np.asarray(_call(_library.TARGET, index, process)(x, y)), (np.arange(N) + 2) * 3)
    assert isinstance(_library.handler(), _library.CHandler)


def test_python_handler_runs_the_same_launch(axpy2_function):
    from kspec.jax._pyhandler import PythonHandler

    handler = PythonHandler()
    jax.ffi.register_ffi_target("kspec_launch_pytest_python", handler.capsule("cpu"), platform="cpu", api_version=1)
    index = handler.register(_describe.describe(_plan(axpy2_function), name="axpy2", kind=_describe.KIND_HOST,
                                                device=-1, inputs=2))  # fmt: skip
    x, y = _inputs()
    got = _call("kspec_launch_pytest_python", index, handler.process)(x, y)
    np.testing.assert_array_equal(np.asarray(got), (np.arange(N) + 2) * 3)
    with pytest.raises(Exception, match="planned by another process"):
        _call("kspec_launch_pytest_python", index, handler.process + 1)(x, y).block_until_ready()


@pytest.mark.parametrize("change", ["process", "index"])
def test_launch_of_another_process_is_refused_not_run(axpy2_function, change):
    description = _describe.describe(_plan(axpy2_function, 999), name="axpy2", kind=_describe.KIND_HOST, device=-1,
                                     inputs=2)  # fmt: skip
    index, process = _library.register(description)
    if change == "process":
        process += 1
    else:
        index += 1_000_000
    x, y = _inputs(999)
    with pytest.raises(Exception, match="planned by another process.*trace and compile it again here") as info:
        _call(_library.TARGET, index, process, 999)(x, y).block_until_ready()
    assert "FAILED_PRECONDITION" in str(info.value)


def test_launch_planned_for_a_gpu_is_refused_on_the_cpu(axpy2_function):
    description = _describe.describe(_plan(axpy2_function, 998), name="axpy2", kind=_describe.KIND_CUDA, device=0,
                                     inputs=2)  # fmt: skip
    handler = _library.handler()
    index = handler.register(description)  # directly: register() would look for the CUDA driver
    x, y = _inputs(998)
    with pytest.raises(Exception, match="planned for a CUDA GPU, XLA runs it on the CPU"):
        _call(_library.TARGET, index, handler.process, 998)(x, y).block_until_ready()


def test_wrong_operand_count_is_an_error(axpy2_function):
    description = _describe.describe(_plan(axpy2_function, 997), name="axpy2", kind=_describe.KIND_HOST, device=-1,
                                     inputs=3)  # fmt: skip
    index, process = _library.register(description)
    x, y = _inputs(997)
    with pytest.raises(Exception, match=r"planned for 3 array argument\(s\) and 1 result\(s\), XLA passed 2 and 1"):
        _call(_library.TARGET, index, process, 997)(x, y).block_until_ready()


# -- descriptions: what the handler would trust is checked first ---------------------------------------------


def test_blob_layout():
    plan = _plan(0x1234, 16)
    description = _describe.describe(plan, name="k", kind=_describe.KIND_HOST, device=-1, inputs=2, threads=3)
    blob = description.blob()
    magic, version, kind, device, inputs, outputs, workspace, threads, steps, name_len, _ = struct.unpack_from(
        "<IIiiiiQiiII", blob)  # fmt: skip
    assert (magic, version) == (_describe.BLOB_MAGIC, _describe.BLOB_VERSION)
    assert (kind, device, inputs, outputs, workspace, threads, steps, name_len) == (1, -1, 2, 1, 0, 3, 1, 1)
    assert len(blob) % 8 == 0


@pytest.mark.parametrize(
    ("pointers", "slots", "message"),
    [
        (((28, "input", 0),), (0,), "writes a pointer at byte 28 of its 32-byte parameter buffer"),
        (((0, "input", 2),), (0,), r"points at input 2, and the call has 2 input array\(s\)"),
        (((0, "output", 1),), (0,), r"points at output 1, and the call has 1 output array\(s\)"),
        (((0, "workspace", 0),), (0,), "points at workspace 0, and the call has 0 bytes of workspace"),
        (((0, "scratch", 0),), (0,), "has a pointer of role 'scratch'"),
        ((), (40,), "puts a parameter outside its 32-byte parameter buffer"),
    ],
)
def test_describe_refuses_an_inconsistent_plan(pointers, slots, message):
    plan = _plan(0x1234, 16, pointers=pointers)
    plan.steps[0].slot_offsets = slots
    with pytest.raises(kspec.LaunchError, match=f"kernel 'k': launch step 1 of its plan {message}"):
        _describe.describe(plan, name="k", kind=_describe.KIND_HOST, device=-1, inputs=2)


def test_describe_refuses_no_function_and_bad_shape():
    with pytest.raises(kspec.LaunchError, match="has no function"):
        _describe.describe(_plan(0), name="k", kind=_describe.KIND_HOST, device=-1, inputs=2)
    plan = _plan(0x1234)
    plan.steps[0].block = 0
    with pytest.raises(kspec.LaunchError, match="has grid 8, block 0"):
        _describe.describe(plan, name="k", kind=_describe.KIND_HOST, device=-1, inputs=2)


def test_c_handler_refuses_damaged_blobs():
    handler = _library.handler()
    assert isinstance(handler, _library.CHandler)
    good = _describe.describe(_plan(0x1234), name="k", kind=_describe.KIND_HOST, device=-1, inputs=2)
    blob = good.blob()
    for damaged, reason in ((blob[:-8], "damaged launch step"), (blob + b"\0" * 8, "trailing bytes"),
                            (b"XXXX" + blob[4:], "not a kspec launch description")):  # fmt: skip
        bad = SimpleNamespace(blob=lambda damaged=damaged: damaged, name="k")
        with pytest.raises(kspec.LaunchError, match=f"kernel 'k': the FFI handler refused its launch: .*{reason}"):
            handler.register(bad)  # type: ignore[arg-type]


def test_handler_choice_from_the_environment(monkeypatch):
    monkeypatch.setenv(_library.HANDLER_ENV, "python")
    assert _library.handler_choice() == "python"
    monkeypatch.setenv(_library.HANDLER_ENV, "rust")
    with pytest.raises(kspec.KspecValueError, match="KSPEC_JAX_HANDLER: expected 'c' or 'python', got 'rust'"):
        _library.handler_choice()


# -- XLA's metadata query: the API version and the traits (command buffers) --------------------------------


def _ask_metadata(call) -> tuple[tuple[int, int], int]:
    import ctypes as C

    from kspec.jax._pyhandler import _CallFrame, _ExtBase, _Metadata, _MetadataExt

    metadata = _Metadata(struct_size=C.sizeof(_Metadata))
    ext = _MetadataExt(metadata=C.pointer(metadata))
    ext.extension_base.struct_size, ext.extension_base.type = C.sizeof(_MetadataExt), 1
    frame = _CallFrame(struct_size=C.sizeof(_CallFrame), extension_start=C.cast(C.pointer(ext), C.POINTER(_ExtBase)))
    assert not call(C.pointer(frame))  # no error
    return (metadata.api_version.major_version, metadata.api_version.minor_version), metadata.traits


@pytest.mark.parametrize("kind", ["c", "python"])
def test_metadata_answers_version_and_command_buffer_traits(kind):
    import ctypes as C

    if kind == "c":
        handler = _library.handler()
        calls = {}
        for platform, symbol in (("CUDA", "kspec_xla_cuda"), ("cpu", "kspec_xla_host")):
            fn = getattr(handler.lib, symbol)
            fn.restype, fn.argtypes = C.c_void_p, [C.c_void_p]
            calls[platform] = lambda frame, fn=fn: fn(C.cast(frame, C.c_void_p))
        header = (Path(jax.ffi.include_dir()) / "xla" / "ffi" / "api" / "c_api.h").read_text()
        minor = int(header.split("#define XLA_FFI_API_MINOR ")[1].split()[0])
        version = (0, minor)
    else:
        from kspec.jax._pyhandler import PythonHandler

        handler = PythonHandler()
        calls = {platform: handler._callbacks[platform] for platform in ("CUDA", "cpu")}
        version = (0, 1)
    try:
        handler.set_cuda_traits(0)
        assert _ask_metadata(calls["CUDA"]) == (version, 0)
        handler.set_cuda_traits(_library.COMMAND_BUFFER_COMPATIBLE)
        assert _ask_metadata(calls["CUDA"]) == (version, 1)
        assert _ask_metadata(calls["cpu"]) == (version, 0)  # XLA:CPU has no command buffers
    finally:  # as the process-wide handler was made (KSPEC_JAX_COMMAND_BUFFER)
        handler.set_cuda_traits(_library.COMMAND_BUFFER_COMPATIBLE if _library.command_buffers() else 0)


def test_command_buffer_choice_from_the_environment(monkeypatch):
    monkeypatch.delenv(_library.COMMAND_BUFFER_ENV, raising=False)
    assert _library.command_buffers() is True
    monkeypatch.setenv(_library.COMMAND_BUFFER_ENV, "0")
    assert _library.command_buffers() is False
    monkeypatch.setenv(_library.COMMAND_BUFFER_ENV, "1")
    assert _library.command_buffers() is True
    monkeypatch.setenv(_library.COMMAND_BUFFER_ENV, "yes")
    with pytest.raises(kspec.KspecValueError, match="KSPEC_JAX_COMMAND_BUFFER: expected '0' or '1', got 'yes'"):
        _library.command_buffers()
