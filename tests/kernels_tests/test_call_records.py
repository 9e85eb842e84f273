"""Call records (kspec/kernels/records/_call_store.py, _call_restore.py): a planned call kept on disk, so that a kernel's
first call in a later process binds and plans nothing. On the CPU device (the same layers as a GPU's); a process
is a fresh interpreter in the first test and, elsewhere, this one with its per-process tables emptied. The GPU's
own: tests/kernels_tests/test_call_records_gpu.py."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kspec
from kspec.kernels.records import _call_store, _call_restore
from kspec.kernels.binaries import _loaded
from kspec.kernels.planning import _planner, _reduction_planner
from kspec.kernels.records._constructor_memo import clear_constructor_memos

from helpers.child_env import child_env


@pytest.fixture
def memo(tmp_path, monkeypatch, on_cpu_device):
    """A memo directory of the test's own (the records live there) and a process with no record read yet."""
    monkeypatch.setenv("KSPEC_MEMO_DIR", str(tmp_path / "memo"))
    monkeypatch.delenv("KSPEC_CALL_RECORDS", raising=False)
    monkeypatch.delenv("KSPEC_TUNING", raising=False)
    _new_process(monkeypatch)
    return tmp_path / "memo" / "calls"


def _new_process(monkeypatch):
    """What a new process starts without: records read, modules loaded, constructor calls remembered."""
    monkeypatch.setattr(_call_store, "_files", {})
    monkeypatch.setattr(_call_store, "_listed", {})
    monkeypatch.setattr(_loaded, "_loaded", {})
    monkeypatch.setattr(_loaded, "_by_cache_key", {})
    clear_constructor_memos()


def _no_planning(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("planned a call its record holds")

    monkeypatch.setattr(_planner, "prepare_elementwise", refuse)
    monkeypatch.setattr(_reduction_planner, "prepare_reduction", refuse)


def _axpy():
    return kspec.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = 2 * x + y", "records_axpy")


def _arrays(n=1000):
    rng = np.random.default_rng(n)
    return rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)


def test_a_recorded_call_is_served_in_the_next_process_without_binding_or_planning(tmp_path):
    """Two real processes on the CPU device: the first plans and records, the second finds the constructor call
    and the signature recorded, builds no spec and plans nothing, and computes the same."""
    script = textwrap.dedent('''
        import sys
        import numpy as np
        import kspec
        from kspec.kernels.planning import _planner, _reduction_planner
        x = kspec.asarray(np.arange(1000, dtype=np.float32)); y = kspec.asarray(np.ones(1000, np.float32))
        first = sys.argv[1] == "first"
        if not first:
            def refuse(*a, **k):
                raise AssertionError("planned")
            _planner.prepare_elementwise = _reduction_planner.prepare_reduction = refuse
        k = kspec.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = 2 * x + y", "records_sub")
        r = kspec.ReductionKernel("float32 x", "float32 y", "x * x", "a + b", "y = a", "0", "records_sub_sq")
        lazy = "_spec" not in k.__dict__ and "_spec" not in r.__dict__
        assert lazy != first, (lazy, first)
        z, s = k(x, y).get(), r(x).get()
        assert np.array_equal(z, 2 * np.arange(1000, dtype=np.float32) + 1)
        assert np.isclose(s, (np.arange(1000, dtype=np.float64) ** 2).sum(), rtol=1e-5)
        assert len(k._cached_codes) == 1 and k.name == "records_sub"  # the spec, made on first need
        print("ok", sys.argv[1])
    ''')
    env = child_env(unset=("KSPEC_CALL_RECORDS",), KSPEC_DEVICE="cpu", KSPEC_MEMO_DIR=str(tmp_path / "memo"))
    for which in ("first", "second"):
        done = subprocess.run([sys.executable, "-c", script, which], env=env, capture_output=True, text=True,
                              timeout=300, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.split() == ["ok", which]
    assert len(list((tmp_path / "memo" / "calls").rglob("*.kcr"))) == 2


def test_a_record_serves_the_call_it_holds_and_a_new_signature_plans_and_is_added(memo, monkeypatch):
    x, y = _arrays()
    expected = _axpy()(kspec.asarray(x), kspec.asarray(y)).get()
    assert len(list(memo.rglob("*.kcr"))) == 1
    _new_process(monkeypatch)
    with monkeypatch.context() as patched:
        _no_planning(patched)
        k = _axpy()
        assert "_spec" not in k.__dict__  # recorded: checked in the earlier "process"
        assert np.array_equal(k(kspec.asarray(x), kspec.asarray(y)).get(), expected)
    x2, y2 = _arrays(77)  # another shape: planned here, and recorded beside the first
    assert np.allclose(k(kspec.asarray(x2), kspec.asarray(y2)).get(), 2 * x2 + y2)
    (path,) = memo.rglob("*.kcr")
    assert len(_call_store._decoded(path.read_bytes(), -1)["signatures"]) == 2


def test_outputs_given_scalars_and_reductions_are_restored_as_planned(memo, monkeypatch):
    scale = kspec.ElementwiseKernel("float32 x, float64 a", "float32 z", "z = x * a", "records_scale")
    total = kspec.ReductionKernel("float32 x", "float32 y", "x", "a + b", "y = a", "0", "records_total")
    x = np.arange(24, dtype=np.float32).reshape(4, 6)

    def run():
        out = kspec.asarray(np.zeros((4, 6), np.float32))
        scale(kspec.asarray(x), 2.5, out)
        return out.get(), total(kspec.asarray(x), axis=1).get(), total(kspec.asarray(x)).get()

    planned = run()
    _new_process(monkeypatch)
    _no_planning(monkeypatch)
    scale = kspec.ElementwiseKernel("float32 x, float64 a", "float32 z", "z = x * a", "records_scale")
    total = kspec.ReductionKernel("float32 x", "float32 y", "x", "a + b", "y = a", "0", "records_total")
    restored = run()
    for a, b in zip(planned, restored):
        assert np.array_equal(a, b)
    with pytest.raises(OverflowError):  # a value the fast packer refuses still gets the planned path's error
        scale(kspec.asarray(x), 10**400)


def test_a_description_rebuilds_the_same_launch(memo):
    k = _axpy()
    x, y = _arrays()
    k(kspec.asarray(x), kspec.asarray(y))
    (prepared,) = k._calls.prepared_calls()
    described = _call_restore.describe(prepared, None)
    types = (kspec.DeviceArray, kspec.DeviceArray)
    again = _call_restore.restore(described, types, None, lambda key: None)
    assert again is not None
    layout, steps, shape, workspace, result = prepared.parts
    layout2, steps2, shape2, workspace2, result2 = again.parts
    assert (layout2, shape2, workspace2, result2) == (layout, shape, workspace, result)
    for a, b in zip(steps, steps2):
        assert (a.grid, a.block, a.what, a.dependent, a.binary, a.frame.describe()) == \
               (b.grid, b.block, b.what, b.dependent, b.binary, b.frame.describe())
    assert _call_restore.restore(described[:5], types, None, lambda key: None) is None  # not a description
    assert _call_restore.restore(described, types[:1], None, lambda key: None) is None  # another arity


def _reads(monkeypatch):
    """The record files the process opens, in order."""
    opened = []
    read = _call_store._read

    def counted(path, device_id):
        opened.append(os.path.basename(path))
        return read(path, device_id)

    monkeypatch.setattr(_call_store, "_read", counted)
    return opened


def _scale(k):
    return kspec.ElementwiseKernel("float32 x", "float32 z", f"z = {k} * x", f"records_scale_{k}")


@pytest.mark.parametrize("read_ahead", [64, 2])
def test_the_first_lookup_reads_a_few_files_ahead_and_later_kernels_open_none(memo, monkeypatch, read_ahead):
    x = kspec.asarray(np.arange(10, dtype=np.float32))
    for k in (2, 3, 4):
        _scale(k)(x)
    files = sorted(p.name for p in memo.rglob("*.kcr"))
    assert len(files) == 3 and len({p.parent for p in memo.rglob("*.kcr")}) == 1  # one environment's directory
    _new_process(monkeypatch)
    monkeypatch.setattr(_call_store, "READ_AHEAD", read_ahead)
    opened = _reads(monkeypatch)
    with monkeypatch.context() as patched:
        _no_planning(patched)
        first = _scale(2)
        assert "_spec" not in first.__dict__ and sorted(opened) == (files if read_ahead >= 3 else opened)
        seen = len(opened)
        results = [_scale(k)(x).get() for k in (3, 4)]  # found in memory where the directory was read ahead
        assert len(opened) == (seen if read_ahead >= 3 else seen + 2)
    assert [r.tolist() for r in results] == [(k * np.arange(10)).tolist() for k in (3, 4)]
    # a kernel without a record there: no file is opened for it after a read-ahead, and it plans and records
    _scale(5)(x)
    assert len(opened) == (seen if read_ahead >= 3 else seen + 3)
    assert len(list(memo.rglob("*.kcr"))) == 4


def test_a_damaged_or_foreign_record_file_is_a_miss_and_planning_rewrites_it(memo, monkeypatch):
    x, y = _arrays()
    _axpy()(kspec.asarray(x), kspec.asarray(y))
    (path,) = memo.rglob("*.kcr")
    good = path.read_bytes()
    for bad in (good[:-7], good[:4] + b"\0\0\0\0" + good[8:], b"{}", b"", good[:20] + bytes([good[20] ^ 0xFF]) + good[21:]):
        path.write_bytes(bad)
        _new_process(monkeypatch)
        k = _axpy()
        assert "_spec" in k.__dict__  # no record: built and checked now
        assert np.array_equal(k(kspec.asarray(x), kspec.asarray(y)).get(), 2 * x + y)
        assert _call_store._decoded(path.read_bytes(), -1) is not None  # planning wrote it whole again


def test_records_off_tuned_kernels_and_bad_arguments(memo, monkeypatch, tmp_path):
    x, y = _arrays()
    monkeypatch.setenv("KSPEC_CALL_RECORDS", "0")
    _axpy()(kspec.asarray(x), kspec.asarray(y))
    assert not memo.exists()
    monkeypatch.delenv("KSPEC_CALL_RECORDS")
    clear_constructor_memos()
    assert _axpy()._call_records() is not None
    assert _axpy().with_knobs({})._call_records() is None  # fixed knobs: plans a record must not keep
    monkeypatch.setenv("KSPEC_TUNING", str(tmp_path / "tuning.json"))
    clear_constructor_memos()
    assert _axpy()._call_records() is None  # a tuning record may change its plans
    monkeypatch.delenv("KSPEC_TUNING")
    clear_constructor_memos()
    with pytest.raises(kspec.SpecError):  # never recorded, so checked at construction as ever
        kspec.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = x +", "records_bad name")


def test_a_first_load_from_a_record_inside_a_capture_raises(memo, monkeypatch):
    x, y = _arrays()
    _axpy()(kspec.asarray(x), kspec.asarray(y))
    _new_process(monkeypatch)
    _no_planning(monkeypatch)
    k = _axpy()
    xs, ys = kspec.asarray(x), kspec.asarray(y)
    stream = kspec.Stream(non_blocking=True)
    with pytest.raises(kspec.CaptureError, match=r"kernel 'records_axpy'.*call it once before capturing"):
        with kspec.capture(stream):
            k(xs, ys, stream=stream)


def test_signature_text_spells_what_means_the_same_in_every_process():
    types = (np.ndarray, int)
    text = _call_store.signature_text(types, (None, (4, 5), (20, 4), np.dtype("float32"), np.dtype(">f4")))
    assert text == ("numpy.ndarray,builtins.int|None|(4, 5)|(20, 4)|numpy:<f4:[('', '<f4')]|"
                    "numpy:>f4:[('', '>f4')]")
    assert _call_store.signature_text(types, ((1, 2), object())) is None  # no spelling: not recorded
    assert _call_store.signature_text(types, ((kspec.DeviceArray, "x"),)) == (
        "numpy.ndarray,builtins.int|(kspec.runtime._devicearray.DeviceArray,'x')")


def test_without_nvrtc_or_its_memo_records_are_off_and_calls_run(memo, monkeypatch):
    """A process served by binaries alone, NVRTC absent and its version not memoized (a fresh container): the
    records' directory cannot be named, so the process keeps none, and its kernels are constructed and called."""
    from kspec import NvrtcNotFoundError

    def no_nvrtc(device_id):
        raise NvrtcNotFoundError("kspec needs cuda.bindings.nvrtc to compile kernels")

    monkeypatch.setattr(_call_store, "_environment", no_nvrtc)
    monkeypatch.setitem(_call_store._state, "unavailable", False)
    x, y = _arrays()
    k = _axpy()
    assert np.array_equal(k(kspec.asarray(x), kspec.asarray(y)).get(), 2 * x + y)
    assert _call_store._state["unavailable"] and not list(memo.rglob("*.kcr"))


def test_the_preload_settles_whether_records_can_be_kept(monkeypatch):
    """kspec.cupy's enable() asks for NVRTC's version once (kspec/kernels/_preload.py): where it is missing (a
    served process on a fresh machine) records are off from the start, not found out in the first kernel call;
    where it is there they stay on."""
    from kspec import NvrtcNotFoundError, compiler

    def no_nvrtc():
        raise NvrtcNotFoundError("kspec needs cuda.bindings.nvrtc to compile kernels")

    monkeypatch.setitem(_call_store._state, "unavailable", False)
    monkeypatch.setattr(compiler, "nvrtc_version", lambda: (13, 0))
    _call_store.settle_availability()
    assert _call_store._state["unavailable"] is False
    monkeypatch.setattr(compiler, "nvrtc_version", no_nvrtc)
    _call_store.settle_availability()
    assert _call_store._state["unavailable"] is True


def test_without_nvrtc_the_environment_hashes_no_source_tree(memo, monkeypatch):
    """The records' environment asks for the compiler's key before digesting kspec's own trees: a served process
    without NVRTC gives up at once instead of reading and hashing the planner's and the spec layer's files first
    (a few ms of its first call on a fresh machine)."""
    from kspec import NvrtcNotFoundError, compiler
    from kspec import _memo

    def no_nvrtc(arch):
        raise NvrtcNotFoundError("kspec needs cuda.bindings.nvrtc to compile kernels")

    def hashed(root):
        raise AssertionError(f"hashed {root} although the environment cannot be named")

    monkeypatch.setattr(compiler, "environment_key", no_nvrtc)
    monkeypatch.setattr(_memo, "tree_digest", hashed)
    _call_store._environment.cache_clear()
    try:
        with pytest.raises(NvrtcNotFoundError):
            _call_store._environment(kspec.runtime.current_device_id())
    finally:
        _call_store._environment.cache_clear()


def test_the_environment_digests_the_planner_and_the_spec_layer(memo, monkeypatch):
    """A record's environment covers the code a plan reads: kspec/kernels (binding, planning, the call path) and
    kspec/spec, both real directories, so that a checkout whose planner changed plans again instead of serving
    what its records hold."""
    import os

    from kspec import _memo, _resources, compiler, spec
    from kspec.kernels import planning

    _resources.renderer_digest()  # the renderer's digest is kept per process: made here, it is not hashed below
    hashed = []
    monkeypatch.setattr(compiler, "environment_key", lambda arch: "compiler")
    monkeypatch.setattr(_memo, "tree_digest", lambda root: hashed.append(root) or root)
    _call_store._environment.cache_clear()
    try:
        _call_store._environment(kspec.runtime.current_device_id())
    finally:
        _call_store._environment.cache_clear()
    kernels, specs = (os.path.realpath(root) for root in hashed)
    assert os.path.isdir(kernels) and os.path.isdir(specs)
    assert os.path.realpath(os.path.dirname(planning.__file__)).startswith(kernels + os.sep)
    assert specs == os.path.realpath(os.path.dirname(spec.__file__))
