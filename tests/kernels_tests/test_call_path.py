"""The call path of spec kernels (kspec/kernels/callpath/_call_path.py, _signature.py, _launch_code.py), without a GPU:
the generated launch packs the bytes the planner's frames expect, dispatchers miss on anything they were not
made for, and a call is planned once per signature and launched by the same function every time."""

from __future__ import annotations

import ctypes
import os
import struct
import sys

import numpy as np
import pytest

import kspec
from kspec.kernels.callpath._signature import MISS, make_dispatcher
from kspec.kernels.callpath._call_path import CallPath
from kspec.kernels.callpath._launch_code import Output, Scalar, Step, make_launch, pointer_runs

from helpers.child_env import child_env


@pytest.fixture(autouse=True)
def python_call_path(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """These tests read the generated Python launch and dispatcher (tests/kernels_tests/test_fastcall.py: the compiled ones)."""
    from kspec.runtime import reset_call_path

    monkeypatch.setenv("KSPEC_CALL_PATH", "python")
    reset_call_path()
    yield
    monkeypatch.undo()
    reset_call_path()


def test_pointer_runs_group_adjacent_slots() -> None:
    assert pointer_runs([(0, 0), (8, 1), (16, 2)]) == [(0, [0, 1, 2])]
    assert pointer_runs([(16, 2), (0, 0), (40, 3), (8, 1)]) == [(0, [0, 1, 2]), (40, [3])]


class _Frame:
    """Stands in for kspec.kernels.callpath._frame.Frame: slot offsets by name, one buffer."""

    def __init__(self, pointers: dict[str, int], scalars: dict[str, int], size: int = 64, address: int = 4242) -> None:
        self.pointers, self.scalars = pointers, scalars
        self.buf = ctypes.create_string_buffer(size)
        self.address = address
        self.thread_local = object()  # no buf attribute: the launch asks buffer() every time

    def pointer_offset(self, name: str) -> int | None:
        return self.pointers.get(name)

    def scalar_offset(self, name: str) -> int | None:
        return self.scalars.get(name)

    def buffer(self) -> tuple[object, int]:
        return self.buf, self.address


class _Recorder:
    """Stands in for the driver and the runtime: records launches and allocations."""

    def __init__(self) -> None:
        self.launches: list[tuple] = []
        self.relaunched: list[tuple] = []
        self.allocated: list[tuple] = []

    def constants(self, **extra: object) -> dict:
        base = dict(
            DEVICE=0, LIBRARY=None, SHAPE=(4,), SEVERAL=False, EXPORT=False,
            STREAM=(lambda device: 7, ""), choose_stream=lambda stream: 1000 + stream,
            launch=self._launch, relaunch=lambda *a: self.relaunched.append(a), cu_stream=lambda h: ("stream", h),
            allocate=self._allocate, allocate_bytes=self._allocate_bytes, activate=lambda d: None,
            pointer_of=lambda o: o.ptr, export=lambda o, library: ("exported", o), EMPTY_LIKE=self._empty_like,
        )  # fmt: skip
        base.update(extra)
        return base

    def _launch(self, *args: object) -> tuple[int]:
        self.launches.append(args)
        return (0,)

    def _allocate(self, library, shape, dtype, stream, device):  # noqa: ANN001, ANN202
        self.allocated.append((library, shape, dtype, stream, device))
        return _Out(0xABC0)

    def _allocate_bytes(self, nbytes, device, handle, stream):  # noqa: ANN001, ANN202
        self.allocated.append(("bytes", nbytes, handle, stream))
        return _Out(0x5150)

    def _empty_like(self, arg: object) -> _Out:
        self.allocated.append(("like", arg))
        return _Out(0xDEF0)


class _Out:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr

    def data_ptr(self) -> int:  # a tensor's spelling (LIBRARY="torch")
        return self.ptr


def _slow_float(value: object) -> bytes:
    if isinstance(value, float) and abs(value) > 3.4e38:
        raise OverflowError("value out of range for float32 parameter 'a'")
    return struct.pack("<f", value)


def _launch(rec: _Recorder, frames: list[_Frame], *, scalars=(), outputs=(), workspace=0, result=(0, ()), nargs=1, **constants):  # noqa: ANN001, ANN202
    steps = [Step(f"fn{j}", 3 + j, 128, f"kernel 'k' (entry {j})", frame) for j, frame in enumerate(frames)]
    arrays = [(i, f"x{i}") for i in range(nargs)]
    return make_launch(steps=steps, arrays=arrays, scalars=list(scalars), outputs=list(outputs), workspace=workspace,
                       result=result, nargs=nargs, constants=rec.constants(**constants))  # fmt: skip


def test_launch_packs_pointers_scalars_and_allocations() -> None:
    rec = _Recorder()
    frame = _Frame({"x0": 0, "x2": 8, "z": 16}, {"a": 24})
    launch = _launch(rec, [frame], scalars=[Scalar(1, "a", "<f", _slow_float)], outputs=[Output("z", "float32", None, None)],
                     result=(1, (-1,)), nargs=3)  # fmt: skip
    out = launch((None, 2.5, None), None, 0x1000, 0, 0x2000)
    assert isinstance(out, _Out)
    assert struct.unpack_from("<QQQf", frame.buf.raw, 0) == (0x1000, 0x2000, 0xABC0, 2.5)
    assert rec.launches == [("fn0", 3, 1, 1, 128, 1, 1, 0, ("stream", 7), 4242, 0)]
    assert rec.allocated == [(None, (4,), "float32", 7, 0)]  # default stream handle when no stream= given
    launch((None, 1.0, None), 5, 1, 0, 2)  # an explicit stream goes through choose_stream and to allocate
    assert rec.launches[-1][8] == ("stream", 1005)
    assert rec.allocated[-1][3] == 5


def test_launch_allocates_like_an_input_on_the_current_stream_only() -> None:
    rec = _Recorder()
    frame = _Frame({"x0": 0, "z": 8}, {})
    quick = lambda: _Out(0x1111)  # noqa: E731  # what the like-allocation replaces
    launch = _launch(rec, [frame], outputs=[Output("z", "float32", quick, 0)], result=(1, (-1,)), LIBRARY="torch")
    out = launch(("tensor",), None, 0x1000)
    assert out.ptr == 0xDEF0 and rec.allocated == [("like", "tensor")]
    assert struct.unpack_from("<QQ", frame.buf.raw, 0) == (0x1000, 0xDEF0)
    launch(("tensor",), 5, 0x1000)  # a stream given: the general allocator, on that stream
    assert rec.allocated[-1] == ("torch", (4,), "float32", 5, 0)


def test_launch_falls_back_to_the_packer_that_raises() -> None:
    rec = _Recorder()
    launch = _launch(rec, [_Frame({}, {"a": 0})], scalars=[Scalar(0, "a", "<f", _slow_float)])
    with pytest.raises(OverflowError, match="parameter 'a'"):
        launch((1e300,), None, 0)
    assert rec.launches == []


def test_launch_relaunches_through_the_general_launcher_on_error() -> None:
    rec = _Recorder()
    launch = _launch(rec, [_Frame({"x0": 0}, {})], result=(1, (0,)), launch=lambda *a: (201,))
    assert launch(("x",), None, 9) == "x"
    assert rec.relaunched == [("fn0", 3, 128, 4242, 7, 0, "kernel 'k' (entry 0)")]


def test_launch_of_two_passes_shares_the_workspace_and_frees_it_after() -> None:
    """A split reduction: two launches in order, one workspace allocated on the launch stream for both."""
    rec = _Recorder()
    first = _Frame({"x0": 0, "_workspace": 8}, {"a": 16}, address=1)
    final = _Frame({"_workspace": 0, "z": 8}, {}, address=2)
    launch = _launch(rec, [first, final], scalars=[Scalar(1, "a", "<f", _slow_float)],
                     outputs=[Output("z", "float32", None, None)], workspace=256, result=(1, (-1,)), nargs=2)  # fmt: skip
    launch((None, 1.5), None, 0x1000, 0)
    assert [(fn, buf) for fn, *_, buf, _ in rec.launches] == [("fn0", 1), ("fn1", 2)]
    assert struct.unpack_from("<QQf", first.buf.raw, 0) == (0x1000, 0x5150, 1.5)
    assert struct.unpack_from("<QQ", final.buf.raw, 0) == (0x5150, 0xABC0)
    assert ("bytes", 256, 7, None) in rec.allocated


def test_launch_of_nothing_only_allocates_and_exports() -> None:
    """A zero-size call launches nothing; JAX / Numba outputs go back as the inputs' library's."""
    rec = _Recorder()
    launch = _launch(rec, [], outputs=[Output("z", "float32", None, None)], result=(1, (-1,)), EXPORT=True, LIBRARY="jax")
    out = launch((None,), None, 0)
    assert out[0] == "exported" and isinstance(out[1], _Out)
    assert rec.launches == [] and rec.allocated == [("jax", (4,), "float32", 7, 0)]


def test_launch_uses_the_thread_buffer_once_made() -> None:
    rec = _Recorder()
    frame = _Frame({"x0": 8}, {})

    class Local:
        buf = ctypes.create_string_buffer(16)
        address = 777

    frame.thread_local = Local
    launch = _launch(rec, [frame])
    launch((None,), None, 0x55)
    assert struct.unpack_from("<Q", Local.buf.raw, 8) == (0x55,)
    assert rec.launches[-1][9] == 777
    assert frame.buf.raw == b"\0" * 64  # the fallback buffer() was not needed


# -- dispatchers (kspec/kernels/callpath/_signature.py) --------------------------------------------------------------


class _Prepared:
    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.seen: list[tuple] = []

    def launch(self, args, stream, *pointers):  # noqa: ANN001, ANN201
        self.seen.append((args, stream, pointers))
        return self.tag


@pytest.fixture
def host_device():
    """Calls without arrays key the current device (kspec's CPU device here: no driver is asked)."""
    with kspec.use_device("cpu"):
        yield


def _no_array_key(stream: object = None) -> tuple:
    """What a call without arrays adds to its signature on the CPU device (kspec/kernels/callpath/_signature.py)."""
    return (-1, type(stream), "cupy" in sys.modules)


def test_dispatchers_serve_their_types_and_miss_the_rest(host_device) -> None:
    d = make_dispatcher((float, np.float32), False, [False], lambda: "current")
    prepared = d.table[(None, *_no_array_key())] = _Prepared("done")
    assert d.dispatch((3.0, np.float32(4))) == "done"
    assert prepared.seen == [((3.0, np.float32(4)), None, (0, 0))]
    assert d.dispatch((3, np.float32(4))) is MISS  # an int where a float was
    assert d.dispatch((3.0,)) is MISS  # another count
    assert d.dispatch((3.0, np.float64(4))) is MISS
    assert d.dispatch((3.0, np.float32(4)), None, ("axis", 1)) is MISS  # other keyword values
    assert d.read((1.0, np.float32(2))) == (_no_array_key(), (0, 0), [])
    assert d.dispatch((3.0, np.float32(4)), "a stream") is MISS  # where its outputs go may differ: its own


def test_dispatchers_take_the_entered_stream(host_device) -> None:
    entered = [True]
    d = make_dispatcher((int,), False, entered, lambda: "entered-stream")
    prepared = d.table[(None, *_no_array_key())] = _Prepared("x")
    d.table[(None, *_no_array_key("given"))] = prepared
    d.dispatch((1,))
    d.dispatch((1,), "given")
    assert [stream for _, stream, _ in prepared.seen] == ["entered-stream", "given"]


def test_a_kernel_without_inputs_has_a_dispatcher(host_device) -> None:
    d = make_dispatcher((), False, [False], lambda: None)
    prepared = d.table[(None, *_no_array_key())] = _Prepared("window")  # cupyx.scipy.signal: kernel(size=M)
    assert d.dispatch(()) == "window" and d.dispatch((1.0,)) is MISS
    assert prepared.seen == [((), None, ())]
    assert d.read(()) == (_no_array_key(), (), [])


def test_unknown_types_are_read_through_the_array_interface_per_call() -> None:
    d = make_dispatcher((object,), False, [False], lambda: None)
    assert d.dispatch((object(),)) is MISS and d.read((object(),)) is None


# -- the call path (kspec/kernels/callpath/_call_path.py) --------------------------------------------------------------


class _PlannedCall:
    def __init__(self) -> None:
        self.launched: list[tuple] = []

    def launch(self, args, stream, *pointers):  # noqa: ANN001, ANN201
        self.launched.append((args, stream, pointers))
        return ("result", args)

    def order_producers(self, producers, stream):  # noqa: ANN001, ANN201
        raise AssertionError("no CAI inputs here")


def test_a_call_is_planned_once_per_signature_and_launched_by_the_same_function(host_device) -> None:
    planned: list[tuple] = []

    def plan(args, stream, extra):  # noqa: ANN001, ANN202
        planned.append((args, extra))
        made = _PlannedCall()
        return made, (0,) * len(args)

    path = CallPath(plan)
    assert path.call((1.0,)) is MISS
    assert path.miss((1.0,), None, None) == ("result", (1.0,))
    assert path.call((2.0,)) == ("result", (2.0,))  # served: no plan
    assert path.call((2.0,), None, "other") is MISS  # other keyword values: another signature
    path.miss((2.0,), None, "other")
    assert [extra for _, extra in planned] == [None, "other"]
    path.miss((3,), None, None)  # other argument types: a dispatcher of their own
    assert len(path) == 3 and len(planned) == 3
    prepared = path.prepared_calls()
    assert [len(p.launched) for p in prepared] == [2, 1, 1]


def test_calls_that_cannot_be_keyed_are_planned_every_time(host_device) -> None:
    count = []

    def plan(args, stream, extra):  # noqa: ANN001, ANN202
        count.append(1)
        return _PlannedCall(), (0,)

    path = CallPath(plan)
    unknown = object()  # no reader knows it: read through the array interface per call, which it lacks
    path.miss((unknown,), None, None)
    path.miss((unknown,), None, None)
    path.once((1.0,), None, ("size", [1]))  # keyword values that are not plain
    assert len(count) == 3 and len(path) == 0 and path.call((unknown,)) is MISS


def test_a_failed_plan_keeps_nothing() -> None:
    def plan(args, stream, extra):  # noqa: ANN001, ANN202
        raise ValueError("bad call")

    path = CallPath(plan)
    with pytest.raises(ValueError, match="bad call"):
        path.miss((1.0,), None, None)
    assert len(path) == 0 and path.call((1.0,)) is MISS


def test_launch_reads_the_default_stream_where_the_library_keeps_it() -> None:
    """``kspec.runtime.default_stream_source``: CuPy's current stream is an object whose ``.ptr`` is the handle."""

    class CupyStream:
        ptr = 0x51

    rec = _Recorder()
    seen = []
    launch = _launch(rec, [_Frame({"x0": 0}, {})], STREAM=(lambda device: seen.append(device) or CupyStream(), "ptr"), DEVICE=3)
    launch((None,), None, 0x10)
    assert seen == [3] and rec.launches[-1][8] == ("stream", 0x51)


# -- generated code across processes (kspec/_generated_code.py) -------------------------------------------


def test_generated_code_is_compiled_once_and_loaded_by_the_next_process(tmp_path, monkeypatch):
    from kspec import _generated_code as _generated

    monkeypatch.setenv("KSPEC_MEMO_DIR", str(tmp_path))
    monkeypatch.setattr(_generated, "_code", {})
    source = "def f(a):\n    return a + 41\n"
    ns: dict = {}
    exec(_generated.compiled(source, "test"), ns)
    assert ns["f"](1) == 42
    files = list((tmp_path / "callpath").iterdir())
    assert len(files) == 1 and files[0].suffix == ".marshal"
    monkeypatch.setattr(_generated, "_code", {})  # a new process: its memory is empty, the file is there
    monkeypatch.setattr(_generated, "compile", lambda *a: pytest.fail("compiled again"), raising=False)
    ns = {}
    exec(_generated.compiled(source, "test"), ns)
    assert ns["f"](2) == 43


def test_a_later_process_finds_every_call_paths_code_on_disk(tmp_path):
    """The call path's generated code is the same text in every process (nothing of the process in it: a raw
    kernel's packer once held its thread's id), so a second process running the same calls writes no new code
    file: it loads each one the first process wrote (CPU device: elementwise, reduction and raw launches)."""
    import subprocess

    script = (
        "import numpy as np, kspec\n"
        "x = kspec.asarray(np.arange(8, dtype=np.float32))\n"
        "kspec.ElementwiseKernel('T x', 'T y', 'y = x + 1', 'disk_code_inc')(x)\n"
        "kspec.ReductionKernel('T x', 'T y', 'x', 'a + b', 'y = a', '0', 'disk_code_sum')(x)\n"
        "m = kspec.RawModule(code='extern \"C\" __global__ void neg(float* y) { y[threadIdx.x] *= -1; }')\n"
        "m.get_function('neg')((1,), (8,), (x,))\n"
    )
    env = child_env(KSPEC_DEVICE="cpu", KSPEC_CACHE_DIR=str(tmp_path / "cache"), KSPEC_MEMO_DIR=str(tmp_path / "memo"))
    written = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        written.append(sorted(p.name for p in (tmp_path / "memo" / "callpath").iterdir()))
    assert written[0] and written[1] == written[0]


def test_a_damaged_code_file_is_compiled_again_and_replaced(tmp_path, monkeypatch):
    from kspec import _generated_code as _generated

    monkeypatch.setenv("KSPEC_MEMO_DIR", str(tmp_path))
    monkeypatch.setattr(_generated, "_code", {})
    source = "VALUE = 7\n"
    _generated.compiled(source, "test")
    (path,) = (tmp_path / "callpath").iterdir()
    path.write_bytes(path.read_bytes()[:5])  # truncated
    monkeypatch.setattr(_generated, "_code", {})
    ns: dict = {}
    exec(_generated.compiled(source, "test"), ns)
    assert ns["VALUE"] == 7 and len(path.read_bytes()) > 5  # rewritten whole


def test_an_unwritable_memo_directory_still_compiles(tmp_path, monkeypatch):
    from kspec import _generated_code as _generated

    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("KSPEC_MEMO_DIR", str(blocker))
    monkeypatch.setattr(_generated, "_code", {})
    ns: dict = {}
    exec(_generated.compiled("X = 3\n", "test"), ns)
    assert ns["X"] == 3


def test_a_builds_code_directory_serves_the_sources_a_capture_kept(tmp_path, monkeypatch):
    """A captured directory's call-path file gives back every source byte for byte; a build compiles them into its
    code directory, where a process with an empty memo loads them: nothing compiled, nothing written to the memo."""
    from kspec import _generated_code as _generated

    sources = {"def f(a):\n    return a + 41\n": "launch", "X = 'a #> b'\n\nY = 2\n": "dispatcher",
               "no newline at the end": "launch", "#> looks like a mark\n": "launch"}
    text = _generated.format_sources(sources)
    assert _generated.parse_sources(text) == dict(list(sources.items())[:2])  # the last two cannot round-trip
    assert _generated.format_sources(_generated.parse_sources(text)) == text
    built = tmp_path / "build" / "callpath"
    assert _generated.write_code_directory(_generated.parse_sources(text), built) == 2
    (built / ("0" * 64 + ".marshal")).write_bytes(b"stale")  # a source the build no longer has
    assert _generated.write_code_directory(_generated.parse_sources(text), built) == 2
    assert len(list(built.iterdir())) == 2
    monkeypatch.setenv("KSPEC_MEMO_DIR", str(tmp_path / "memo"))
    monkeypatch.setattr(_generated, "_code", {})
    monkeypatch.setattr(_generated, "_shipped", [])
    _generated.set_code_directories(lambda: [tmp_path / "absent", built])
    monkeypatch.setattr(_generated, "compile", lambda *a: pytest.fail("compiled"), raising=False)
    looked: list[str] = []
    load = _generated._load
    monkeypatch.setattr(_generated, "_load", lambda path: looked.append(str(path)) or load(path))
    ns: dict = {}
    exec(_generated.compiled("def f(a):\n    return a + 41\n", "launch"), ns)
    assert ns["f"](1) == 42 and not (tmp_path / "memo" / "callpath").exists()
    # the stores first: a served process's memo is usually empty, and each look there would be a failed open
    assert [os.path.dirname(p) for p in looked] == [str(tmp_path / "absent"), str(built)]


def test_a_capture_is_told_the_launch_code_the_compiled_call_path_made_unneeded(monkeypatch):
    """Where the compiled call path launches a prepared call, a capture still gets the Python launch's source
    (a process the capture's build serves may lack the compiled path); without a watcher nothing is generated."""
    from kspec import _generated_code as _generated
    from kspec.kernels.callpath import _launch_code

    seen: list[tuple[str, str]] = []
    monkeypatch.setattr(_generated, "_noted", set())
    described = dict(steps=[], arrays=[], scalars=[], outputs=[], workspace=0, result=(0, ()), nargs=1,
                     constants={"STREAM": (lambda device: 0, None), "LIBRARY": None, "SEVERAL": False, "EXPORT": False})
    stop = _generated.watch_sources(lambda source, what: seen.append((what, source)))
    try:
        assert _generated.sources_watched()
        _launch_code.note_launch_source(**described)
        _launch_code.note_launch_source(**described)  # once per process
    finally:
        stop()
    assert not _generated.sources_watched()
    assert [what for what, _ in seen] == ["launch"] and seen[0][1].startswith("def launch_call(args, stream, p0):")
