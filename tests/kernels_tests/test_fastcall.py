"""The compiled call path (kspec/_fastcall_c/, kspec/kernels/callpath/_launch_native.py), without a GPU.

Each launch test runs the same description through the generated Python launch (the reference) and the
compiled one, with a recorder standing in for the driver: the recorder reads the parameter bytes the launch
passes, so both paths must write the same bytes, allocate the same outputs on the same streams and return the
same objects. On the CPU device the compiled path launches through the host driver (the GPU only changes the
final call: tests/kernels_tests/test_fastcall_gpu.py), so every CPU-device kernel test in CI runs it too.
"""

from __future__ import annotations

import ctypes
import os
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import kspec
from kspec.kernels.callpath._signature import MISS
from kspec.kernels.callpath._launch_code import Output, Scalar, Step, make_launch
from kspec.kernels.callpath._launch_native import native_launch
from kspec.kernels.callpath._prepared import scalar_packer
from kspec.runtime import fastcall_module, reset_call_path


@pytest.fixture(scope="module")
def fastcall() -> Any:
    module = fastcall_module(wait=True)
    assert module is not None, "the compiled call path was not built: CI must run it (a host compiler and Python.h)"
    return module


class _Frame:
    """A parameter frame with a real buffer and ``void*`` array (what cuLaunchKernel reads)."""

    def __init__(self, pointers: dict[str, int], scalars: dict[str, int], size: int = 64, slots: tuple[int, ...] = (0,)) -> None:
        self.pointers, self.scalars, self.size = pointers, scalars, size
        self.static = bytes(range(size))  # static values: a launch must keep what it does not write
        self.slot_offsets = slots
        self.thread_local = object()

    def pointer_offset(self, name: str) -> int | None:
        return self.pointers.get(name)

    def scalar_offset(self, name: str) -> int | None:
        return self.scalars.get(name)

    def buffer(self) -> tuple[Any, int]:
        buf = ctypes.create_string_buffer(self.static, self.size)
        self._keep = buf, (ctypes.c_void_p * len(self.slot_offsets))(*(ctypes.addressof(buf) + o for o in self.slot_offsets))
        return buf, ctypes.addressof(self._keep[1])


class _Out:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr

    def data_ptr(self) -> int:
        return self.ptr


def _bytes_at(address: int, frame: _Frame) -> bytes:
    """The parameter bytes behind a ``void**`` (slot 0 points ``slot_offsets[0]`` into the buffer)."""
    first = ctypes.c_void_p.from_address(address).value or 0
    return ctypes.string_at(first - frame.slot_offsets[0], frame.size)


class _Recorder:
    def __init__(self, frames: list[_Frame]) -> None:
        self.frames = frames
        self.launches: list[tuple] = []
        self.params: list[bytes] = []
        self.relaunched: list[tuple] = []
        self.allocated: list[tuple] = []
        self.fail = 0

    def constants(self, **extra: object) -> dict:
        base = dict(
            DEVICE=0, LIBRARY=None, SHAPE=(4,), SEVERAL=False, EXPORT=False,
            STREAM=(lambda device: 7, ""), choose_stream=lambda stream: 1000 + stream,
            launch=self._launch, relaunch=self._relaunch, cu_stream=lambda h: ("stream", h),
            allocate=self._allocate, allocate_bytes=self._allocate_bytes, activate=lambda d: None,
            pointer_of=lambda o: o.ptr, export=lambda o, library: ("exported", o), EMPTY_LIKE=self._empty_like,
            launch_dependent=self._dependent,
        )  # fmt: skip
        base.update(extra)
        return base

    def _record(self, fn: str, address: int) -> None:
        self.params.append(_bytes_at(address, self.frames[int(fn[2:])]))

    def _launch(self, fn, *args):  # noqa: ANN001, ANN002, ANN202
        self._record(fn, args[8])
        self.launches.append((fn, *args[:8], *args[9:]))  # the address differs between the paths
        return (self.fail,)

    def _dependent(self, fn, grid, block, hs, address):  # noqa: ANN001, ANN202
        self._record(fn, address)
        self.launches.append(("dependent", fn, grid, block, hs))
        return (0,)

    def _relaunch(self, fn, grid, block, address, stream, device, what):  # noqa: ANN001, ANN202
        self.relaunched.append((fn, grid, block, stream, device, what))

    def _allocate(self, library, shape, dtype, stream, device):  # noqa: ANN001, ANN202
        self.allocated.append((library, shape, dtype, stream, device))
        return _Out(0xABC0 + len(self.allocated))

    def _allocate_bytes(self, nbytes, device, handle, stream):  # noqa: ANN001, ANN202
        self.allocated.append(("bytes", nbytes, handle, stream))
        return _Out(0x5150)

    def _empty_like(self, arg: object) -> _Out:
        self.allocated.append(("like", arg))
        return _Out(0xDEF0)


Build = Callable[..., Callable[..., Any]]


@pytest.fixture(params=["python", "c"])
def build(request: pytest.FixtureRequest, fastcall: Any) -> Build:
    """Makes a launch on one path from the test's frames and description."""

    def make(rec: _Recorder, *, scalars=(), outputs=(), workspace=0, result=(0, ()), nargs=1, dependent=False, **constants):  # noqa: ANN001, ANN202
        steps = [Step(f"fn{j}", 3 + j, 128, f"kernel 'k' (entry {j})", frame, dependent) for j, frame in enumerate(rec.frames)]  # type: ignore[arg-type]
        arrays = [(i, f"x{i}") for i in range(nargs)]
        described = dict(steps=steps, arrays=arrays, scalars=list(scalars), outputs=list(outputs), workspace=workspace,
                         result=result, nargs=nargs, constants=rec.constants(**constants))  # fmt: skip
        if request.param == "python":
            return make_launch(**described)  # type: ignore[arg-type]
        launch = native_launch(**described)  # type: ignore[arg-type]
        assert type(launch) is fastcall.FastLaunch
        return launch

    return make


def _slow_float(value: object) -> bytes:
    if isinstance(value, float) and abs(value) > 3.4e38:
        raise OverflowError("value out of range for float32 parameter 'a'")
    return struct.pack("<f", value)


def test_launch_packs_pointers_scalars_and_allocations(build: Build) -> None:
    frame = _Frame({"x0": 0, "x2": 8, "z": 16}, {"a": 24}, slots=(0, 8, 16, 24))
    rec = _Recorder([frame])
    launch = build(rec, scalars=[Scalar(1, "a", "<f", _slow_float)], outputs=[Output("z", "float32", None, None)],
                   result=(1, (-1,)), nargs=3)  # fmt: skip
    out = launch((None, 2.5, None), None, 0x1000, 0, 0x2000)
    assert isinstance(out, _Out) and out.ptr == 0xABC1
    assert struct.unpack_from("<QQQf", rec.params[0], 0) == (0x1000, 0x2000, 0xABC1, 2.5)
    assert rec.params[0][28:] == frame.static[28:]  # what the call does not write stays static
    assert rec.launches == [("fn0", 3, 1, 1, 128, 1, 1, 0, ("stream", 7), 0)]
    assert rec.allocated == [(None, (4,), "float32", 7, 0)]  # the default stream's handle when no stream= given
    launch((None, 1.0, None), 5, 1, 0, 2)  # an explicit stream goes through choose_stream and to allocate
    assert rec.launches[-1][8] == ("stream", 1005)
    assert rec.allocated[-1][3] == 5


def test_launch_allocates_like_an_input_on_the_current_stream_only(build: Build) -> None:
    rec = _Recorder([_Frame({"x0": 0, "z": 8}, {})])
    quick = lambda: _Out(0x1111)  # noqa: E731
    launch = build(rec, outputs=[Output("z", "float32", quick, 0)], result=(1, (-1,)), LIBRARY="torch")
    out = launch(("tensor",), None, 0x1000)
    assert out.ptr == 0xDEF0 and rec.allocated == [("like", "tensor")]
    assert struct.unpack_from("<QQ", rec.params[0], 0) == (0x1000, 0xDEF0)
    launch(("tensor",), 5, 0x1000)  # a stream given: the general allocator, on that stream
    assert rec.allocated[-1] == ("torch", (4,), "float32", 5, 0)
    quick_only = build(_Recorder([_Frame({"z": 0}, {})]), outputs=[Output("z", "float32", quick, None)], result=(1, (-1,)))
    assert quick_only((None,), None, 0).ptr == 0x1111


def test_launch_falls_back_to_the_packer_that_raises(build: Build) -> None:
    rec = _Recorder([_Frame({}, {"a": 0})])
    launch = build(rec, scalars=[Scalar(0, "a", "<f", _slow_float)], outputs=[Output("z", "float32", None, None)])
    with pytest.raises(OverflowError, match="parameter 'a'"):
        launch((1e300,), None, 0)
    assert rec.launches == [] and rec.allocated == []  # nothing allocated or launched for a bad value


def test_launch_relaunches_through_the_general_launcher_on_error(build: Build) -> None:
    rec = _Recorder([_Frame({"x0": 0}, {})])
    rec.fail = 201
    launch = build(rec, result=(1, (0,)))
    assert launch(("x",), None, 9) == "x"
    assert rec.relaunched == [("fn0", 3, 128, 7, 0, "kernel 'k' (entry 0)")]


def test_launch_of_two_passes_shares_the_workspace(build: Build) -> None:
    first = _Frame({"x0": 0, "_workspace": 8}, {"a": 16}, slots=(0, 8, 16))
    final = _Frame({"_workspace": 0, "z": 8}, {}, slots=(0, 8))
    rec = _Recorder([first, final])
    launch = build(rec, scalars=[Scalar(1, "a", "<f", _slow_float)], outputs=[Output("z", "float32", None, None)],
                   workspace=256, result=(2, (-1, 0)), nargs=2, dependent=True)  # fmt: skip
    out = launch(("x", 1.5), None, 0x1000, 0)
    assert out[1] == "x" and out[0].ptr == 0xABC1
    assert rec.launches[0][0] == "fn0" and rec.launches[1][:2] == ("dependent", "fn1")  # the second may overlap
    assert struct.unpack_from("<QQf", rec.params[0], 0) == (0x1000, 0x5150, 1.5)
    assert struct.unpack_from("<QQ", rec.params[1], 0) == (0x5150, 0xABC1)
    assert ("bytes", 256, 7, None) in rec.allocated


def test_launch_results(build: Build) -> None:
    rec = _Recorder([_Frame({"x0": 0}, {})])
    assert build(rec, result=(0, ()))(("a",), None, 1) is None
    assert build(rec, result=(2, (0,)))(("a",), None, 1) == ("a",)
    assert build(rec, result=(2, (0, 0)))(("a",), None, 1) == ("a", "a")


_INT_CASES = {"int8": [127, -128, 128, -129], "uint8": [255, 0, 256, -1], "int16": [2**15 - 1, -(2**15) - 1],
              "uint16": [2**16 - 1, 2**16], "int32": [2**31 - 1, -(2**31), 2**31], "uint32": [2**32 - 1, 2**32, -5],
              "int64": [2**63 - 1, -(2**63), 2**63, 10**30], "uint64": [2**64 - 1, 0, 2**64, -1]}  # fmt: skip
_FLOAT_CASES = {"float32": [2.5, 3.4e38, 3.5e38, -1e39, float("inf"), float("nan"), 3, 10**40, 10**400],
                "float64": [2.5, 1e308, float("-inf"), 7, 10**400]}  # fmt: skip


def _outcome(launch: Callable[..., Any], rec: _Recorder, value: object) -> object:
    try:
        launch((value,), None, 0)
    except Exception as exc:  # the packer's error for a value the parameter cannot take
        return (type(exc).__name__, str(exc))
    return rec.params[-1][:8]


@pytest.mark.parametrize("dtype", [*_INT_CASES, *_FLOAT_CASES])
def test_scalars_pack_as_the_python_launch_packs_them(dtype: str, fastcall: Any) -> None:
    """Every fast scalar format, in range, at the edges and past them (where the kernels layer's packer,
    with CuPy's rules or kspec's, decides): the same bytes or the same error on both paths."""
    for value in (_INT_CASES | _FLOAT_CASES)[dtype]:
        outcomes = []
        for path in ("python", "c"):
            rec = _Recorder([_Frame({}, {"a": 0})])
            from kspec.kernels.callpath._prepared import fast_format

            value_type = type(value)
            scalars = [Scalar(0, "a", fast_format(dtype, value_type), scalar_packer("k", "a", dtype, value_type))]
            steps = [Step("fn0", 3, 128, "k", rec.frames[0])]  # type: ignore[arg-type]
            described = dict(steps=steps, arrays=[], scalars=scalars, outputs=[], workspace=0, result=(0, ()), nargs=1,
                             constants=rec.constants())  # fmt: skip
            launch = make_launch(**described) if path == "python" else native_launch(**described)  # type: ignore[arg-type]
            outcomes.append(_outcome(launch, rec, value))
        assert outcomes[0] == outcomes[1], (dtype, value, outcomes)


# -- the compiled dispatcher ---------------------------------------------------------------------------------


class _Array:
    """Read as a kspec DeviceArray is (its slots)."""

    def __init__(self, shape: tuple[int, ...], ptr: int) -> None:
        self._shape, self._strides, self._dtype, self._ptr = shape, (4,), "float32", ptr


class _Prepared:
    def __init__(self) -> None:
        self.seen: list[tuple] = []

    def launch(self, args: tuple, stream: object, *pointers: int) -> str:
        self.seen.append((args, stream, pointers))
        return "launched"


def test_dispatcher_keys_reads_pointers_and_misses(fastcall: Any) -> None:
    table: dict = {}
    entered = [0]
    dispatch = fastcall.dispatcher((_Array, float), (3, 0), table, entered, lambda: "block stream", lambda k: True, "host", MISS)
    a = _Array((4,), 0x77)
    assert dispatch((a, 1.0)) is MISS  # nothing prepared yet
    prepared = table[(None, (4,), (4,), "float32")] = _Prepared()
    assert dispatch((a, 1.0)) == "launched"
    assert prepared.seen[-1][1:] == (None, (0x77, 0))
    assert dispatch((a, 1.0), 5) == "launched" and prepared.seen[-1][1] == 5
    assert dispatch((a, 1.0), extra="e") is MISS and dispatch((a, 1.0), None, "e") is MISS
    table[("e", (4,), (4,), "float32")] = prepared
    assert dispatch((a, 1.0), stream=3, extra="e") == "launched" and prepared.seen[-1][1] == 3
    assert dispatch((a, 1)) is MISS and dispatch((a,)) is MISS and dispatch([a, 1.0]) is MISS  # other types, arity
    assert dispatch((_Array((5,), 1), 1.0)) is MISS  # another shape
    entered[0] = 1  # inside `with kspec.Stream(...)`: that block's stream when none is given
    assert dispatch((a, 1.0)) == "launched" and prepared.seen[-1][1] == "block stream"
    with pytest.raises(TypeError, match="unexpected keyword"):
        dispatch((a, 1.0), other=1)


def test_dispatcher_of_host_arrays_asks_whether_the_cpu_device_is_active(fastcall: Any) -> None:
    table: dict = {}
    active = [True]
    dispatch = fastcall.dispatcher((np.ndarray,), (4,), table, [0], lambda: None, lambda kind: active[0], "host", MISS)
    x = np.zeros(3, np.float32)
    prepared = table[(None, x.shape, x.strides, x.dtype, True)] = _Prepared()
    assert dispatch((x,)) == "launched" and prepared.seen[-1][2] == (x.ctypes.data,)
    active[0] = False
    assert dispatch((x,)) is MISS


class _Interface:
    """An array known only by its ``__cuda_array_interface__`` (an instance attribute, as simple wrappers have)."""

    def __init__(self, **cai: object) -> None:
        if cai:
            self.__cuda_array_interface__ = cai


class _Ordered(_Prepared):
    def order_producers(self, producers: list, stream: object) -> None:
        self.seen.append(("ordered", producers, stream))


def test_dispatcher_of_interface_arrays_keys_as_cai_entry(fastcall: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from kspec.kernels.callpath import _signature
    from kspec.kernels.callpath._signature import cai_entry

    monkeypatch.setattr(_signature, "initialized_device_count", lambda: 1)  # cai_entry keys in a one-device process

    table: dict = {}
    dispatch = fastcall.dispatcher((_Interface,), (7,), table, [0], lambda: None, lambda k: True, "host", MISS)
    good = _Interface(shape=[4], typestr="<f4", data=(0x90, False), version=3, strides=None)
    key = (_Interface, (4,), "<f4", None, False)
    prepared = table[(None, key)] = _Ordered()
    assert dispatch((good,)) == "launched" and prepared.seen == [((good,), None, (0x90,))]
    assert (None, cai_entry(good)[0]) in table  # the key the Python reader (the miss path) stores under
    streamed = _Interface(shape=(4,), typestr="<f4", data=(0x91, False), version=3, stream=5)
    assert dispatch((streamed,), 8) == "launched"
    assert prepared.seen[-2:] == [("ordered", [5], 8), ((streamed,), 8, (0x91,))]  # the producer first
    table[(None, (_Interface, (2, 2), "<f4", (8, 4), True))] = prepared
    assert dispatch((_Interface(shape=(2, 2), typestr="<f4", data=(1, True), version=2, strides=[8, 4]),)) == "launched"
    for bad in (_Interface(), _Interface(shape=(4,), typestr="<f4", data=(1, False), version=1),
                _Interface(shape=(4,), typestr="<f4", data=(1, False), version=3, mask=object()),
                _Interface(shape=(4,), typestr="<f4", version=3), _Interface(shape=([1],), typestr="<f4", data=(1, False), version=3),
                _Interface(shape=(4,), typestr="<f4", data=("x", False), version=3)):  # fmt: skip
        assert dispatch((bad,)) is MISS  # the planner explains or refuses it
        assert cai_entry(bad) is None or (None, cai_entry(bad)[0]) not in table


# -- kernels on the CPU device -----------------------------------------------------------------------------


@pytest.fixture
def cpu_device() -> Iterator[None]:
    previous = kspec.device_kind()
    kspec.use_device("cpu")
    yield
    kspec.use_device(previous)


def _kernels(path: str) -> list[Any]:
    """Kernels of their own per path (the same constructor call gives the same kernel object back)."""
    return [kspec.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = (x - y) * (x - y)", f"sqd_{path}"),
            kspec.ElementwiseKernel("T x, T a, int32 b", "T z, T w", "z = a * x + b; w = z - x", f"axpb_{path}"),
            kspec.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", f"sum_{path}")]  # fmt: skip


def _run_kernels(path: str) -> list[Any]:
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((2, 64, 33)).astype(np.float32)
    sqd, axpb, total = _kernels(path)
    z = np.empty_like(x)
    results = [sqd(x, y, z).copy(), sqd(x, y), *axpb(x, 2.0, 3), *axpb(x.T, 0.5, -7), total(x), total(x, axis=0),
               total(x[:, ::2], axis=1), total(np.ones((512, 4096), np.float32))]  # fmt: skip
    for _ in range(3):  # repeated: the prepared calls' path
        results.append(sqd(x, y, z).copy())
        results.append(total(x, axis=1))
    with pytest.raises(Exception, match="b"):
        axpb(x, 1.0, 2**40)  # out of int32's range: the packer's error names the parameter
    return results


def test_kernels_compute_the_same_on_both_paths(cpu_device: None, fastcall: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = _run_kernels("c")
    assert type(_kernels("c")[0]._calls.call) is fastcall.Dispatch
    assert type(kspec.ElementwiseKernel.__dict__["__call__"]) is fastcall.KernelCall  # k(*args) in C too
    for kernel in _kernels("c"):
        assert {type(p.launch) for p in kernel._calls.prepared_calls()} == {fastcall.FastLaunch}
    monkeypatch.setenv("KSPEC_CALL_PATH", "python")
    reset_call_path()
    try:
        reference = _run_kernels("python")
    finally:
        monkeypatch.undo()
        reset_call_path()
    for kernel in _kernels("python"):
        assert not {type(p.launch) for p in kernel._calls.prepared_calls()} & {fastcall.FastLaunch}
    assert len(compiled) == len(reference)
    for got, want in zip(compiled, reference):
        np.testing.assert_array_equal(got, want)


def _in_process(code: str, cache: str, **env: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "KSPEC_CACHE_DIR": cache, **env},
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_cold_cache_builds_the_call_path_in_a_child_process(tmp_path: Any) -> None:
    """The first process asks a child to build it (importing none of the host compiler's modules itself) and
    loads it once built; the next one loads it from the cache at once. Under KSPEC_COMPILE=never nothing is
    built: calls take the Python path."""
    cache = str(tmp_path / "cache")
    never = "from kspec.runtime import fastcall_module as f; print(f(wait=True))"
    assert _in_process(never, cache, KSPEC_COMPILE="never") == "None"
    assert not list((tmp_path / "cache").glob("*.kbin"))
    first = ("import sys; from kspec.runtime import fastcall_module as f; m = f(wait=True); "
             "print(m is not None, 'kspec.compiler.host._compiler' in sys.modules)")  # fmt: skip
    assert _in_process(first, cache) == "True False"
    assert _in_process("from kspec.runtime import fastcall_module as f; print(f() is not None)", cache,
                       KSPEC_COMPILE="never") == "True"  # fmt: skip


def test_loading_ahead_never_builds_it(tmp_path: Any) -> None:
    """What kspec.cupy's enable() does at a program's start (kspec/kernels/_preload.py): from a cold cache it
    starts no thread and no child process (the program may fork next) and leaves the choice to the first call,
    which builds it as before; from a warm cache it loads it."""
    cache = str(tmp_path / "cache")
    ahead = ("import threading; from kspec.kernels import preload_call_path; from kspec.runtime import _fastcall; "
             "preload_call_path(); print(threading.active_count(), sorted(_fastcall._state))")  # fmt: skip
    assert _in_process(ahead, cache) == "1 []"
    # under KSPEC_COMPILE=never (a served process) nothing could build it later: decided at the start, so the
    # first call does not look in the cache again
    decided = ahead.replace("print(", "print(_fastcall._state.get('module'), ")
    assert _in_process(decided, cache, KSPEC_COMPILE="never") == "None 1 ['module']"
    first = "from kspec.runtime import fastcall_module as f; print(f(wait=True) is not None)"
    assert _in_process(first, cache) == "True"  # the first call built it
    assert _in_process(ahead, cache) == "1 ['module']"


def test_call_path_choice_is_checked() -> None:
    code = "import kspec.runtime as r; r.fastcall_module()"
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "KSPEC_CALL_PATH": "fast"},
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode != 0 and "KSPEC_CALL_PATH: expected 'c' or 'python', got 'fast'" in done.stderr


# -- launches from C through the driver's cuLaunchKernel, a recorder standing in for it -------------------

_DRIVER_LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p,
                                  ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p))  # fmt: skip


class _DriverLaunch:
    """A C function with cuLaunchKernel's signature (a ctypes callback) that records each launch: function,
    dims, shared bytes, stream and ``size`` parameter bytes read through the ``void**`` (slot 0 = the buffer)."""

    def __init__(self, size: int) -> None:
        self.size, self.status, self.calls = size, 0, []  # type: ignore[var-annotated]
        self.callback = _DRIVER_LAUNCH(self._launch)
        self.address = ctypes.cast(self.callback, ctypes.c_void_p).value

    def _launch(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):  # noqa: ANN001, ANN202
        self.calls.append((fn, (gx, gy, gz), (bx, by, bz), shared, stream or 0, ctypes.string_at(params[0], self.size)))
        return self.status


def test_prepared_launch_from_c_writes_what_the_driver_reads(monkeypatch: pytest.MonkeyPatch, fastcall: Any) -> None:
    """A GPU's launch (the CUfunction and stream as ints, cuLaunchKernel called from C) on the same description
    as test_launch_packs_pointers_scalars_and_allocations."""
    import kspec.kernels.callpath._launch_native as native

    driver = _DriverLaunch(64)
    monkeypatch.setattr(native, "direct_launch_address", lambda launch: driver.address)
    frame = _Frame({"x0": 0, "x2": 8, "z": 16}, {"a": 24}, slots=(0, 8, 16, 24))
    rec = _Recorder([frame])
    steps = [Step(0x4000, 3, 128, "kernel 'k'", frame)]  # type: ignore[arg-type]
    launch = native.native_launch(steps=steps, arrays=[(0, "x0"), (2, "x2")], scalars=[Scalar(1, "a", "<f", _slow_float)],
                                  outputs=[Output("z", "float32", None, None)], workspace=0, result=(1, (-1,)), nargs=3,
                                  constants=rec.constants())  # fmt: skip
    out = launch((None, 2.5, None), None, 0x1000, 0, 0x2000)
    fn, grid, block, shared, stream, params = driver.calls[-1]
    assert (fn, grid, block, shared, stream) == (0x4000, (3, 1, 1), (128, 1, 1), 0, 7)
    assert struct.unpack_from("<QQQf", params, 0) == (0x1000, 0x2000, out.ptr, 2.5) and params[28:] == frame.static[28:]
    driver.status = 1  # a refused launch goes to the general launcher's error branch
    launch((None, 2.5, None), 5, 0x1000, 0, 0x2000)
    assert rec.relaunched == [(0x4000, 3, 128, 1005, 0, "kernel 'k'")] and rec.launches == []


class _Device:
    """Read as a kspec DeviceArray is (its pointer slot)."""

    def __init__(self, ptr: int) -> None:
        self._ptr = ptr


def test_raw_call_from_c(fastcall: Any) -> None:
    """A raw kernel's __call__ in C: pointers and scalars in 8-byte slots as the Python packer writes them, dims,
    shared memory and streams; whatever it does not cover goes to the Python packer (``body``) or the launcher's
    general launch (``miss``) with the call as given."""
    import threading
    from types import SimpleNamespace

    driver = _DriverLaunch(40)
    before = fastcall.set_raw_launch(driver.address)
    went: list[tuple] = []
    entered = [0]
    kind = SimpleNamespace(host_active=False)
    try:
        call = fastcall.raw_call(
            (_Device, int, float, np.float32, type(None)), (3, 0, 0, 0, 4), "PqdfP",
            lambda *a: went.append(("miss", *a)), lambda *a: went.append(("body", *a)), lambda dev, s: 0x1234,
            entered, lambda: "block", None, None, lambda s: {"block": 77}.get(s, 1000 + s if isinstance(s, int) else s),
            kind, False)  # fmt: skip

        class Kernel:
            __call__ = call

        assert type(call) is fastcall.RawCall
        k = Kernel()
        args = (_Device(0x9000), 5, 2.5, np.float32(1.5), None)
        assert k((2,), (32,), args) is None
        fn, grid, block, shared, stream, params = driver.calls[-1]
        assert (fn, grid, block, shared, stream) == (0x1234, (2, 1, 1), (32, 1, 1), 0, 0)
        assert struct.unpack("<QqdfxxxxQ", params) == (0x9000, 5, 2.5, 1.5, 0)
        k(3, (1, 2, 3), args, shared_mem=64, stream=7)
        assert driver.calls[-1][1:5] == ((3, 1, 1), (1, 2, 3), 64, 1007)
        entered[0] = 1
        k(1, 1, args)
        assert driver.calls[-1][4] == 77  # the open `with kspec.Stream` block's
        entered[0] = 0
        launched = len(driver.calls)
        for grid, block, a, kw in (((1.5,), 1, args, {}), ((1, 2, 3, 4), 1, args, {}), (1, -1, args, {}),
                                   (1, 1, (_Device(1), 2**70, 2.5, np.float32(1), None), {}),
                                   (1, 1, args, {"shared_mem": 1.0})):  # fmt: skip
            went.clear()
            k(grid, block, a, **kw)
            assert went == [("body", grid, block, a, kw.get("shared_mem", 0), None)]
        assert len(driver.calls) == launched
        for a in ((_Device(1), 1.0, 2.5, np.float32(1), None), args[:4], [*args]):
            went.clear()
            k(1, 1, a)
            assert went == [("miss", 1, 1, a, 0, None)]
        went.clear()
        thread = threading.Thread(target=k, args=(1, 1, args))
        thread.start()
        thread.join()
        assert went == [("miss", 1, 1, args, 0, None)]  # another thread: its own packer
        kind.host_active = True
        went.clear()
        k(1, 1, args)
        assert went == [("miss", 1, 1, args, 0, None)]  # the CPU device now: the launcher decides again
        kind.host_active = False
        driver.status = 1
        went.clear()
        k(1, 1, args)
        assert went == [("body", 1, 1, args, 0, None)]  # a refused launch: the packer's error branch
    finally:
        fastcall.set_raw_launch(before)
