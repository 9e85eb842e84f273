"""Every kernel of the repository's ``specs/`` on kspec's CPU device, and the same calls on both devices compared.

Each declared instantiation of each elementwise and reduction spec runs on small random inputs in several
layouts: contiguous, broadcast (inputs of shapes (29,), (37, 1)... against a (37, 29) loop, or a stride-0 view
for a reduction) and strided (negative strides, transposes, slices; a strided output); reductions over
axis=None, 0 and 1. Each function of each raw spec runs on 1-d data with the launch its recipe below gives.

- On the CPU device (NumPy arrays inside ``kspec.use_device("cpu")``; skipped without a host C++ compiler):
  the results match NumPy where the spec's doc makes the reference plain (``REFERENCES``, ``RAW_CALLS``), and
  are at least finite and of the right shape for a kernel without one.
- On both devices (``@pytest.mark.gpu``): the same host inputs through the CPU device and through a GPU (CuPy
  arrays; kspec arrays for bfloat16, which CuPy lacks and whose arrays take no views, so bfloat16 skips the
  strided layout there), every output compared: integers exactly, floats to a relative tolerance of their
  dtype. That test is the proof that the CPU device gives the GPU's results.

Floats compare with ``rtol`` by dtype and an absolute tolerance of ``rtol`` times the output's largest
magnitude: one rounding apart (an FMA the GPU contracts and the host does not) is magnified where terms of
both signs cancel, and the largest magnitude is the scale of such an error.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kspec
from kspec.spec import load_library

SPECS = Path(__file__).resolve().parents[2] / "specs"
SPEC_LIBRARY = load_library([SPECS])  # the spec models only: nothing compiles at collection

LOOP = (37, 29)  # every elementwise call's loop shape, every reduction's input shape
RTOL = {"float16": 1e-2, "bfloat16": 2e-2, "float32": 1e-5, "float64": 1e-12, "complex64": 1e-5, "complex128": 1e-12}


def wide(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.kind == "c":
        return a.astype(np.complex128)
    if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
        return a.astype(np.float64)
    return a


# -- NumPy references, by spec name: (inputs broadcast to the loop / the logical views, axis) -> outputs -------


def _squared_diff(a: dict[str, np.ndarray], _axis: Any) -> dict[str, np.ndarray]:
    return {"z": (wide(a["x"]) - wide(a["y"])) ** 2}


def _argmax(a: dict[str, np.ndarray], axis: Any) -> dict[str, np.ndarray]:
    x = a["x"]
    if axis is None:
        return {"max_value": x.max(), "index": np.int64(x.argmax())}  # C order over both axes
    return {"max_value": x.max(axis=axis), "index": x.argmax(axis=axis)}  # the first along that axis


REFERENCES: dict[str, Callable[[dict[str, np.ndarray], Any], dict[str, Any]]] = {
    "squared_diff": _squared_diff,
    "squared_diff_generic": _squared_diff,
    "squared_diff_generic_body": _squared_diff,
    "squared_diff_super_generic": _squared_diff,
    # y is raw: indexed in C order over its own shape, whatever its strides
    "add_reverse": lambda a, _: {"z": wide(a["x"]) + wide(a["y"]).ravel()[::-1].reshape(LOOP)},
    "clipped_relu": lambda a, _: {"y": np.minimum(np.maximum(a["x"], 0.0), a["cap"])},
    "abs_squared": lambda a, _: {"mag2": a["z"].real ** 2 + a["z"].imag ** 2},
    "saxpy": lambda a, _: {"out": wide(a["a"]) * wide(a["x"]) + wide(a["y"])},
    "relu": lambda a, _: {"y": np.where(a["x"] > 0, a["x"], 0)},
    "clamp": lambda a, _: {"y": np.where(a["x"] < a["lo"], a["lo"], np.where(a["x"] > a["hi"], a["hi"], a["x"]))},
    "l2norm": lambda a, axis: {"y": np.sqrt((wide(a["x"]) ** 2).sum(axis=axis))},
    "l2_norm_squared": lambda a, axis: {"y": (wide(a["x"]) ** 2).sum(axis=axis)},
    "sum_of_squares": lambda a, axis: {"y": (wide(a["x"]) ** 2).sum(axis=axis)},
    "argmax": _argmax,
}


# -- devices ------------------------------------------------------------------------------------------------


class OnDevice:
    """Host data onto one device and back: NumPy on the CPU device; CuPy on a GPU, kspec arrays for bfloat16."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.cupy = pytest.importorskip("cupy") if name == "cuda" else None

    def put(self, host: np.ndarray) -> Any:
        if self.cupy is None:
            return np.array(host, copy=True)
        if host.dtype.name == "bfloat16":
            return kspec.asarray(np.ascontiguousarray(host))
        return self.cupy.asarray(host)

    def get(self, a: Any) -> np.ndarray:
        if self.cupy is None:
            return np.array(a, copy=True)
        if isinstance(a, kspec.DeviceArray):
            kspec.get_device().synchronize()
            return a.get()
        return self.cupy.asnumpy(a)

    def views(self, host: np.ndarray) -> bool:
        """Whether this device's arrays of ``host``'s dtype take views (slices, transposes, broadcasts)."""
        return self.cupy is None or host.dtype.name != "bfloat16"


# Views by name: (base shape from the loop shape, the view); the strided ones keep the loop's shape.
VIEWS: dict[str, tuple[Callable[[tuple[int, int]], tuple[int, ...]], Callable[[Any], Any]]] = {
    "plain": (lambda s: s, lambda a: a),
    "row": (lambda s: (s[1],), lambda a: a),  # broadcasts along the rows
    "column": (lambda s: (s[0], 1), lambda a: a),  # broadcasts along the columns
    "reversed": (lambda s: (2 * s[0], s[1]), lambda a: a[::2, ::-1]),
    "transposed": (lambda s: (s[1], s[0]), lambda a: a.T),
    "sliced": (lambda s: (2 * s[0], 3 * s[1]), lambda a: a[::2, 1::3]),
    "stride0": (lambda s: (s[1],), None),  # a stride-0 view of a row, made by the array library's broadcast_to
}


def view_of(name: str, a: Any, device: OnDevice | None) -> Any:
    if name != "stride0":
        return VIEWS[name][1](a)
    if device is None or device.cupy is None:
        return np.broadcast_to(a, LOOP)
    return device.cupy.broadcast_to(a, LOOP)


def random_host(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """No zeros among floats (magnitude in [0.5, 2), random sign); integers in [-100, 100] (squares fit int32,
    and argmax meets ties); complex: both parts so."""
    if dtype.kind in "iu":
        return rng.integers(0 if dtype.kind == "u" else -100, 101, size=shape).astype(dtype)

    def signed() -> np.ndarray:
        return rng.uniform(0.5, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)

    if dtype.kind == "c":
        return (signed() + 1j * signed()).astype(dtype)
    return signed().astype(dtype)


def numpy_dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        return np.dtype(pytest.importorskip("ml_dtypes", reason="bfloat16 on the host needs ml_dtypes").bfloat16)
    return np.dtype(name)


# -- one call of one instantiation ---------------------------------------------------------------------------


@dataclasses.dataclass
class Call:
    """One call of one spec kernel: host inputs (the bases of its views) and how to make the call on a device.
    ``run`` returns every output brought back to the host; ``reference`` what NumPy says (None: no reference)."""

    label: str
    host: dict[str, np.ndarray]
    run: Callable[[OnDevice], dict[str, np.ndarray]]
    reference: Callable[[], dict[str, Any]] | None
    needs_views: bool


def typed_calls(name: str, instantiation: dict[str, str], seed: int) -> list[Call]:
    """The calls of an elementwise or reduction spec's instantiation: every layout (and, for a reduction, axis)."""
    spec = SPEC_LIBRARY[name]
    bind = {p.name: numpy_dtype(instantiation.get(p.type, p.type)) for p in (*spec.in_params, *spec.out_params)}
    ins, outs = spec.in_params, spec.out_params
    rng = np.random.default_rng(seed)
    reduction = spec.KIND == "reduction"
    if reduction:
        layouts = {lay: {p.name: lay for p in ins} for lay in ("plain", "sliced", "transposed", "stride0")}
        axes: tuple[Any, ...] = (None, 0, 1)
    else:
        cycle = {"broadcast": ("row", "column", "plain"), "strided": ("reversed", "transposed", "sliced")}
        layouts = {"contiguous": {p.name: "plain" for p in ins}}
        for lay, names in cycle.items():
            arrays = [p for p in ins if not p.raw]
            layouts[lay] = {p.name: names[k % 3] for k, p in enumerate(arrays)}
            layouts[lay].update({p.name: "transposed" if lay == "strided" else "plain" for p in ins if p.raw})
        axes = ("elementwise",)
    calls = []
    for (lay, views), axis in itertools.product(layouts.items(), axes):
        host = {p.name: random_host(rng, VIEWS[views[p.name]][0](LOOP), bind[p.name]) for p in ins}
        out_shape = np.zeros(LOOP).sum(axis=axis).shape if reduction else LOOP
        strided_out = lay == "strided"

        def run(device: OnDevice, views=views, host=host, axis=axis, out_shape=out_shape, strided_out=strided_out):
            args = [view_of(views[p.name], device.put(host[p.name]), device) for p in ins]
            results = []
            for p in outs:
                fill = np.full(out_shape if not strided_out else (LOOP[0], 2 * LOOP[1]), 7, bind[p.name])
                base = device.put(fill)
                results.append(base[:, ::2] if strided_out else base)
            if reduction:
                returned = spec_kernel(name)(*args, *results, axis=axis)
            else:
                returned = spec_kernel(name)(*args, *results)
            returned = returned if isinstance(returned, tuple) else (returned,)
            assert len(returned) == len(outs) and all(r is o for r, o in zip(returned, results)), name
            return {p.name: device.get(r) for p, r in zip(outs, results)}

        def reference(views=views, host=host, axis=axis):
            logical = {p.name: view_of(views[p.name], host[p.name], None) for p in ins}
            if not reduction:
                logical.update({p.name: np.broadcast_to(logical[p.name], LOOP) for p in ins if not p.raw})
            want = REFERENCES[name](logical, axis)
            if name == "argmax" and axis is None and views["x"] not in ("plain", "sliced"):
                # over both axes the index follows the reduced axes ordered by stride (CuPy's rule), which is C
                # order only for a C-ordered input: elsewhere only the value is checked
                want = {"max_value": want["max_value"]}
            return want

        needs_views = any(v not in ("plain", "row", "column") for v in views.values()) or strided_out
        label = f"{lay} axis={axis}" if reduction else lay
        calls.append(Call(label, host, run, reference if name in REFERENCES else None, needs_views))
    return calls


# -- raw kernels: how to call each function (a raw kernel's arguments cannot be derived from its spec) --------


@dataclasses.dataclass(frozen=True)
class RawCall:
    """``args``: ("in", dtype) random input, ("out", dtype) output, ("inout", dtype) both, ("n", dtype) the element
    count, ("scalar", value). ``reference``: the inputs (by argument position) -> outputs by position."""

    n: int
    block: int
    args: tuple[tuple[str, Any], ...]
    reference: Callable[[dict[int, np.ndarray]], dict[int, np.ndarray]]


F32, F64, C64 = np.dtype("float32"), np.dtype("float64"), np.dtype("complex64")
RAW_CALLS: dict[str, RawCall] = {
    # my_add has no bounds check: n is a whole number of blocks
    "my_add": RawCall(256, 64, (("in", F32), ("in", F32), ("out", F32)), lambda a: {2: wide(a[0]) + wide(a[1])}),
    "my_func": RawCall(256, 64, (("in", C64), ("in", C64), ("out", C64), ("scalar", np.float32(1.5))),
                       lambda a: {2: wide(a[0]) + 1.5 * wide(a[1])}),
    "vector_add": RawCall(1000, 256, (("in", F64), ("in", F64), ("out", F64), ("n", np.int32)),
                          lambda a: {2: a[0] + a[1]}),
    "test_sum": RawCall(1000, 128, (("in", F32), ("in", F32), ("out", F32), ("n", np.uint32)),
                        lambda a: {2: wide(a[0]) + wide(a[1])}),
    "test_multiply": RawCall(1000, 128, (("in", F32), ("in", F32), ("out", F32), ("n", np.uint32)),
                             lambda a: {2: wide(a[0]) * wide(a[1])}),
    "fx3<float>": RawCall(1000, 128, (("inout", F32), ("n", np.int32)), lambda a: {0: wide(a[0]) * 3}),
    "fx3<double>": RawCall(1000, 128, (("inout", F64), ("n", np.int32)), lambda a: {0: a[0] * 3}),
}


def raw_calls(name: str, function: str, seed: int) -> list[Call]:
    recipe = RAW_CALLS.get(function)
    assert recipe is not None, f"raw spec {name!r}: no call recipe for {function!r}; add one to RAW_CALLS"
    rng = np.random.default_rng(seed)
    host = {str(k): random_host(rng, (recipe.n,), dt) for k, (role, dt) in enumerate(recipe.args) if role in ("in", "inout")}

    def run(device: OnDevice) -> dict[str, np.ndarray]:
        args: list[Any] = []
        written: dict[str, Any] = {}
        for k, (role, value) in enumerate(recipe.args):
            if role in ("in", "inout"):
                args.append(device.put(host[str(k)]))
            elif role == "out":
                args.append(device.put(np.full(recipe.n, 7, value)))
            elif role == "n":
                args.append(value(recipe.n))
            else:
                args.append(value)
            if role in ("out", "inout"):
                written[str(k)] = args[-1]
        kernel = spec_kernel(name)
        launch = kernel if isinstance(kernel, kspec.RawKernel) else kernel.get_function(function)
        launch(((recipe.n + recipe.block - 1) // recipe.block,), (recipe.block,), tuple(args))
        return {k: device.get(a) for k, a in written.items()}

    def reference() -> dict[str, Any]:
        return {str(k): v for k, v in recipe.reference({int(k): h for k, h in host.items()}).items()}

    return [Call(f"n={recipe.n}", host, run, reference, False)]


def tuned_calls(name: str, seed: int) -> list[Call]:
    """A tuned raw kernel (issue [AT]) called as users call it: the CPU device has no record section, so its
    default config runs; odd shapes that are no multiple of a tile."""
    rng = np.random.default_rng(seed)
    rows, cols = (37, 50) if name == "transpose_tiled" else (19, 45)
    src = random_host(rng, (rows, cols), F32)
    if name == "transpose_tiled":
        out_shape, want = (cols, rows), src.T
    else:
        padded = np.pad(src, 1, mode="edge")
        want = 0.2 * (src + padded[1:-1, :-2] + padded[1:-1, 2:] + padded[:-2, 1:-1] + padded[2:, 1:-1])
        out_shape = (rows, cols)

    def run(device: OnDevice) -> dict[str, np.ndarray]:
        dst = device.put(np.full(out_shape, 7, F32))
        spec_kernel(name)(device.put(src), dst, np.int32(rows), np.int32(cols))
        return {"1": device.get(dst)}

    return [Call(f"{rows}x{cols}", {"0": src}, run, lambda: {"1": want}, False)]


# -- the cases: every instantiation of every spec ------------------------------------------------------------


def _cases() -> list[tuple[str, str, Callable[[], list[Call]]]]:
    cases = []
    for seed, name in enumerate(SPEC_LIBRARY):
        spec = SPEC_LIBRARY[name]
        if spec.KIND == "raw" and spec.tune is not None:
            cases.append((name, "tuned", lambda name=name, s=seed: tuned_calls(name, s)))
            continue
        if spec.KIND == "raw":
            for function in (*spec.kernels, *spec.name_expressions):
                cases.append((name, function, lambda name=name, f=function, s=seed: raw_calls(name, f, s)))
            continue
        for inst in spec.declared_instantiations():
            label = ",".join(f"{k}={v}" for k, v in inst.items()) or "-"
            cases.append((name, label, lambda name=name, inst=inst, s=seed: typed_calls(name, inst, s)))
    return cases


CASES = _cases()

_kernels: dict[str, Any] = {}


def spec_kernel(name: str) -> Any:
    """The kernel object ``kspec.load`` makes of the spec (one library per session: each kernel compiles once
    per device)."""
    if not _kernels:
        library = kspec.load(str(SPECS))
        _kernels.update((n, library[n]) for n in library)
    return _kernels[name]


def compare(actual: np.ndarray, expected: Any, dtype_name: str) -> str | None:
    """None when ``actual`` matches ``expected`` (exact for integers and bools, ``RTOL`` of the dtype else),
    else what differs."""
    expected = np.asarray(expected)
    if actual.shape != expected.shape:
        return f"shape {actual.shape}, expected {expected.shape}"
    if dtype_name not in RTOL:
        bad = np.asarray(actual != expected)
        return None if not bad.any() else f"{int(bad.sum())} of {bad.size} elements differ (exact dtype {dtype_name})"
    rtol = RTOL[dtype_name]
    a, e = wide(actual), wide(expected)
    atol = rtol * float(np.max(np.abs(e), initial=0.0))
    bad = ~np.isclose(a, e, rtol=rtol, atol=atol) | (np.isnan(a) != np.isnan(e))
    if not bad.any():
        return None
    worst = float(np.max(np.abs(a - e)[bad]))
    return f"{int(bad.sum())} of {bad.size} elements beyond rtol={rtol} (largest difference {worst:.3g})"


def host_compiler_or_skip() -> None:
    from helpers.device_arrays import host_compiler_missing

    reason = host_compiler_missing()
    if reason is not None:
        pytest.skip(reason)


# -- (1) the CPU device against NumPy --------------------------------------------------------------------------


def test_every_spec_kernel_is_covered():
    """Every spec of specs/ has cases, and every reference and recipe here names a kernel that exists."""
    assert {name for name, _, _ in CASES} == set(SPEC_LIBRARY)
    assert set(REFERENCES) <= set(SPEC_LIBRARY)
    functions = {f for n in SPEC_LIBRARY if SPEC_LIBRARY[n].KIND == "raw"
                 for f in (*SPEC_LIBRARY[n].kernels, *SPEC_LIBRARY[n].name_expressions)}
    assert set(RAW_CALLS) == functions


@pytest.mark.parametrize("name, label, make", CASES, ids=[f"{n}[{lab}]" for n, lab, _ in CASES])
def test_spec_kernel_on_the_cpu_device(name, label, make):
    host_compiler_or_skip()
    calls = make()
    failures = []
    with kspec.use_device("cpu"):
        for call in calls:
            got = call.run(OnDevice("cpu"))
            if call.reference is None:  # no plain reference: finite results of the loop's shape
                for out, value in got.items():
                    if value.dtype.kind in "fc" and not np.isfinite(wide(value)).all():
                        failures.append(f"{call.label}: {out} has non-finite values")
                continue
            for out, want in call.reference().items():
                problem = compare(got[out], want, got[out].dtype.name)
                if problem:
                    failures.append(f"{call.label}: {out}: {problem}")
            if name == "argmax" and "index" in got and "index" not in call.reference():
                n = LOOP[0] * LOOP[1]
                assert 0 <= int(got["index"]) < n, f"{call.label}: index {got['index']} out of range"
    assert not failures, f"{name}[{label}] on the CPU device:\n" + "\n".join(failures)


def test_spec_kernels_allocate_their_outputs_on_the_cpu_device():
    """Called without outputs (where the inputs bind every placeholder), a spec kernel allocates NumPy arrays of
    the right shape and dtype holding what the call with outputs given writes."""
    host_compiler_or_skip()
    rng = np.random.default_rng(7)
    checked = 0
    with kspec.use_device("cpu"):
        for name in SPEC_LIBRARY:
            spec = SPEC_LIBRARY[name]
            if spec.KIND == "raw" or spec.output_only_placeholders:
                continue
            for inst in spec.declared_instantiations():
                if "bfloat16" in inst.values():
                    continue  # covered with outputs given; NumPy's bfloat16 needs ml_dtypes
                xs = [random_host(rng, LOOP, np.dtype(inst.get(p.type, p.type))) for p in spec.in_params]
                result = spec_kernel(name)(*xs)
                result = result if isinstance(result, tuple) else (result,)
                for p, r in zip(spec.out_params, result):
                    assert isinstance(r, np.ndarray), (name, inst, type(r))
                    assert r.dtype == np.dtype(inst.get(p.type, p.type)), (name, inst, p.name, r.dtype)
                    assert r.shape == (() if spec.KIND == "reduction" else LOOP), (name, inst, r.shape)
                    assert (np.isfinite(wide(r)).all() if r.dtype.kind in "fc" else True), (name, inst)
                checked += 1
    assert checked > 10


# -- (2) the CPU device against a GPU --------------------------------------------------------------------------


@pytest.mark.gpu
def test_cpu_device_gives_the_gpus_results_on_every_spec_kernel():
    """The same host inputs through kspec's CPU device and a GPU; every output of every call compared. Every
    mismatch (or a call failing on one device) is reported by kernel, instantiation and layout."""
    host_compiler_or_skip()
    gpu = OnDevice("cuda")
    cpu = OnDevice("cpu")
    mismatches, skipped, compared = [], [], 0
    for name, label, make in CASES:
        try:
            calls = make()
        except pytest.skip.Exception as exc:  # bfloat16 without ml_dtypes
            skipped.append(f"{name}[{label}]: {exc}")
            continue
        for call in calls:
            where = f"{name}[{label}] {call.label}"
            if call.needs_views and not all(gpu.views(h) for h in call.host.values()):
                skipped.append(f"{where}: no views of bfloat16 arrays on the GPU")
                continue
            try:
                with kspec.use_device("cpu"):
                    on_cpu = call.run(cpu)
            except Exception as exc:
                mismatches.append(f"{where}: the CPU device raised {type(exc).__name__}: {exc}"[:2000])
                continue
            try:
                on_gpu = call.run(gpu)
            except Exception as exc:
                mismatches.append(f"{where}: the GPU raised {type(exc).__name__}: {exc}"[:2000])
                continue
            for out in on_gpu:
                problem = compare(on_cpu[out], on_gpu[out], on_gpu[out].dtype.name)
                if problem:
                    mismatches.append(f"{where}: {out}: {problem}")
            compared += 1
    if skipped:
        print("skipped:\n" + "\n".join(skipped))
    assert not mismatches, f"{len(mismatches)} of {compared + len(mismatches)} calls differ:\n" + "\n".join(mismatches)
    assert compared > 0
