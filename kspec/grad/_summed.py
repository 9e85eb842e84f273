"""A backward whose gradients come summed to their inputs' shapes.

:class:`SummedBackward` runs a spec kernel's backward and returns every input's gradient in that input's shape.
Where inputs are broadcast (a bias over the rows of an activation), their gradients are summed in the backward's
own pass when the call's layout allows (the row-sum variant, kspec/spec/_row_sums.py): the broadcast shape splits
into (rows, cols) with every summed input spanning exactly the cols, and every array the backward reads is
addressed by one stride per row and one per column. Then the step reads the incoming gradient and the inputs once
and writes the full-size gradients once, plus per-chunk partial sums that a small reduction folds. Otherwise
(other layouts, Python numbers for arrays, float16 sums, a variant the compile policy keeps out) it runs the
plain backward and sums the broadcast inputs' gradients after it, as before. Either way the results are the same
arrays in the caller's library; kspec.vjp calls it, kspec.torch registers it as an op.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._named_tuple import NamedTuple
from .. import dtypes
from .._digest import sha256_hex
from .._errors import CompileForbiddenError, SpecError
from ..kernels import ArraySpec
from ..spec import row_sum_arrays, row_sum_inputs, row_sum_outputs
from ._sums import GRAD_PREFIX, _broadcast, by_input, grad_sum_kernel, reduced, shared_for

# (chunk, column) pairs a variant's loop aims at. H100, (16384, 4096) float32 bias-GELU backward, against 1.5 copies:
# 2^18: 0.89, 2^19: 0.89, 2^20: 0.94 (8 rows' loads in flight per thread: kspec/spec/_row_sums.py's UNROLL)
_TARGET_THREADS = 1 << 20
_MIN_CHUNK = 16  # rows per chunk at least: fewer, and the partial sums cost more than they save
_SUMMABLE = frozenset({"float32", "float64", "complex64", "complex128"})  # narrower types sum in float32: the plain path


class RowSplit(NamedTuple):
    """A call's broadcast shape as (rows, cols), and each array's element strides over them."""

    rows: int
    cols: int
    chunk: int
    strides: dict[str, tuple[int, int]]


class SummedBackward:
    """``kernel``'s backward (a spec kernel with ``grad``) returning each gradient in its input's shape.

    Called as the backward kernel is (the forward's inputs, its outputs, their gradients; ``stream=``), it returns
    one array per input with a gradient (``names``), a tuple when more than one."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.spec = kernel.spec
        self.backward_kernel = kernel.backward_kernel()
        self.names: tuple[str, ...] = tuple(self.spec.backward()[0])
        self.name = f"{self.backward_kernel.name}_summed"
        self.params = tuple(p.name for p in self.backward_kernel.in_params)
        self.inputs = len(self.backward_kernel.in_params) - 2 * len(self.spec.out_params)  # the forward's
        self._unavailable: set[tuple[str, ...]] = set()  # summed sets with no variant (body, compile policy)
        self._plans: dict[Any, tuple[tuple[str, ...], RowSumPlan | None]] = {}  # layouts -> (summed, plan)
        # how the last call's gradients were made: "row sums" (the variant), "second pass" (the plain or shared
        # backward, then the sums), "plain" (nothing broadcast); for tests and KSPEC_LOG-style inspection
        self.last_route = ""

    @property
    def in_params(self) -> Any:
        return self.backward_kernel.in_params

    @property
    def spec_digest(self) -> str:
        """What it runs, as a digest (op names are made of it): the backward's spec, summed."""
        return sha256_hex(f"{self.backward_kernel.spec_digest} summed".encode())

    def output_specs(self, *args: Any, **kwargs: Any) -> tuple[ArraySpec, ...]:
        """The gradients of a call with ArraySpecs for arrays (as the backward kernel's ``output_specs``), each
        in its input's shape."""
        specs = self.backward_kernel.output_specs(*args, **kwargs)
        shapes = {p: _shape(a) for p, a in zip(self.params, args)}
        return tuple(
            s if shapes[n] == tuple(s.shape) else ArraySpec(shapes[n], s.dtype, s.device, s.device_id)
            for n, s in zip(self.names, specs)
        )

    def __call__(self, *args: Any, stream: Any = None) -> Any:
        found = self.gradients(args, stream)
        made = tuple(found[n] for n in self.names)
        return made if len(made) > 1 else made[0]

    def gradients(self, args: Sequence[Any], stream: Any = None) -> dict[str, Any]:
        """``{input name: its gradient in the input's shape}`` for the backward's arguments ``args``."""
        on = {"stream": stream} if stream is not None else {}
        values = dict(zip(self.params, args))
        key = layouts_key(args)
        found = self._plans.get(key) if key is not None else None
        if found is None:
            full = _broadcast(tuple(_shape(a) for a in args))
            summed = tuple(n for n in self.names if _shape(values[n]) != full)
            plan = self._plan(summed, values, full) if summed and summed not in self._unavailable else None
            found = (summed, plan)
            if key is not None:
                if len(self._plans) >= _KEPT:
                    del self._plans[next(iter(self._plans))]
                self._plans[key] = found
        summed, plan = found
        if plan is not None:
            made = self._run(plan, values, on)
            if made is not None:
                self.last_route = "row sums"
                return made
            self._unavailable.add(summed)
            self._plans.clear()  # plans made before this call knew no better
        self.last_route = "second pass" if summed else "plain"
        shared = shared_for(self.spec, args[: self.inputs]) if summed else {}
        made = self.kernel.backward_kernel(bool(shared))(*args, **on)
        return {n: reduced(g, values[n], on.get("stream"), self.kernel) for n, g in by_input(self.names, made, shared).items()}

    def _plan(self, summed: tuple[str, ...], values: dict[str, Any], full: tuple[int, ...]) -> RowSumPlan | None:
        """How the row-sum variant serves a call with these arguments' layouts, or None where it cannot."""
        from ..runtime import allocator_like, array_info

        try:
            variant = self.kernel.row_sum_kernel(summed)
        except SpecError:
            self._unavailable.add(summed)
            return None
        arrays = row_sum_arrays(variant.spec)
        if not arrays:
            return None  # nothing to allocate like
        infos = {}
        for name in arrays:
            try:
                infos[name] = array_info(values[name])
            except TypeError:
                return None  # a Python number for an array parameter
        kinds = row_sum_outputs(variant.spec)
        out_dtypes = [_gradient_dtype(self.backward_kernel, infos, name) for name, _ in kinds]
        if any(dt is None or (is_summed and np.dtype(dt).name not in _SUMMABLE) for dt, (_, is_summed) in zip(out_dtypes, kinds)):
            return None  # a gradient type only a scalar binds, or one summed wider than it is stored
        split = row_split(full, {n: _shape(values[n]) for n in summed},
                          {n: (tuple(i.shape), tuple(i.strides), i.dtype.itemsize) for n, i in infos.items()})  # fmt: skip
        if split is None:
            return None
        chunks = -(-split.rows // split.chunk)
        marker = object()  # stands for an argument in the recipe
        recipe = row_sum_inputs(variant.spec, {n: (marker, n) for n in values}, split.strides, (split.rows, split.cols, split.chunk))
        sums = []
        for (name, is_summed), dt in zip(kinds, out_dtypes):
            shape = _shape(values[name])
            axis = 0 if math.prod(shape) > 1 else None  # a size-1 input: every column's partials too
            sums.append((shape, axis, grad_sum_kernel(np.dtype(dt).name, self.kernel)) if is_summed else None)
        first = infos[arrays[0]]
        return RowSumPlan(
            variant,
            tuple((True, r[1]) if isinstance(r, tuple) and len(r) == 2 and r[0] is marker else (False, r) for r in recipe),
            tuple((chunks, split.cols) if is_summed else full for _, is_summed in kinds),
            tuple(out_dtypes), tuple(name for name, _ in kinds), tuple(sums), first.library, first.device_id,
            tuple(allocator_like(first.library, dt, first.device_id) for dt in out_dtypes),
        )

    def _run(self, plan: RowSumPlan, values: dict[str, Any], on: dict[str, Any]) -> dict[str, Any] | None:
        """The gradients from the row-sum variant; None where the compile policy keeps it out (nothing written)."""
        from ..runtime import allocate_like

        stream = on.get("stream")
        if stream is None:  # on the library's current stream, where the kernels launch
            outputs = [new(shape) for new, shape in zip(plan.allocators, plan.shapes)]
        else:
            outputs = [allocate_like(plan.library, shape, dt, stream, plan.device_id) for shape, dt in zip(plan.shapes, plan.dtypes)]
        inputs = [values[v] if is_arg else v for is_arg, v in plan.recipe]
        variant = plan.variant
        # a layout the variant ran before launches with no frame of the kernel's own (every step of a loop)
        if stream is not None or variant.call_prepared((*inputs, *outputs)) is variant.NOT_PREPARED:
            try:
                variant(*inputs, *outputs, **on)
            except CompileForbiddenError:
                return None  # KSPEC_COMPILE=never without this variant built: the plain path
        found = {}
        for name, total, array in zip(plan.names, plan.sums, outputs):
            if total is not None:
                shape, axis, fold = total
                array = fold(array, axis=axis, **on)
                if array.shape != shape:  # a size-1 input's, summed whole: a reshape costs a call
                    array = array.reshape(shape)
            found[name] = array
        return found


class RowSumPlan(NamedTuple):
    """A call's layout served by the row-sum variant (kept per layout: a training loop repeats a few)."""

    variant: Any
    recipe: tuple[tuple[bool, Any], ...]  # per input of the variant: (True, argument name) or (False, its value)
    shapes: tuple[tuple[int, ...], ...]  # per output: a full-size gradient's shape, or the partials'
    dtypes: tuple[Any, ...]
    names: tuple[str, ...]  # per output: the input whose gradient it is
    sums: tuple[tuple[tuple[int, ...], Any, Any] | None, ...]  # per summed output: (its input's shape, axis, the sum)
    library: str | None
    device_id: int
    allocators: tuple[Any, ...]  # per output: new(shape) on the library's current stream


def layouts_key(args: Sequence[Any]) -> tuple[Any, ...] | None:
    """What a plan depends on in ``args``: each array's type, shape, strides, dtype and device, each number's type
    and value; None where something is not hashable (no plan is kept)."""
    key: list[Any] = []
    for a in args:
        stride = getattr(a, "stride", None)
        if callable(stride):  # a torch.Tensor (a fake one's sizes may be symbolic: unhashable, caught below);
            # its device as an index and its type (a FakeTensor's differs): `.device` makes an object per read
            key.append((type(a), a.shape, stride(), a.dtype, a.get_device()))
        elif isinstance(a, (int, float, complex)):
            key.append((type(a), a))
        else:
            key.append((type(a), getattr(a, "shape", None), getattr(a, "strides", None), getattr(a, "dtype", None),
                        getattr(a, "device", None)))  # fmt: skip
    try:
        hash(tuple(key))
    except TypeError:
        return None
    return tuple(key)


_KEPT = 256
_made: dict[int, tuple[Any, SummedBackward]] = {}  # id(kernel) -> (the kernel, kept so the id stays its; its backward)


def summed_backward(kernel: Any) -> SummedBackward:
    """The :class:`SummedBackward` of a spec kernel with gradients, made once per kernel (oldest out)."""
    found = _made.get(id(kernel))
    if found is not None and found[0] is kernel:
        return found[1]
    if len(_made) >= _KEPT:
        del _made[next(iter(_made))]
    made = SummedBackward(kernel)
    _made[id(kernel)] = (kernel, made)
    return made


def broadcast_gradients(names: Sequence[str], params: Sequence[str], inputs: Sequence[Any]) -> bool:
    """Whether an input with a gradient (``names``) is broadcast in a call with ``inputs`` (``params`` their
    names): its gradient then needs summing to its shape."""
    shapes = [_shape(a) for a in inputs]
    full = _broadcast(tuple(shapes))
    return any(shape != full for p, shape in zip(params, shapes) if p in names)


def _gradient_dtype(backward: Any, infos: dict[str, Any], name: str) -> Any:
    """The dtype of input ``name``'s gradient: its declared type, or the dtype of an array that binds that
    placeholder; None where only a scalar binds it."""
    declared = next(p.type for p in backward.out_params if p.name == GRAD_PREFIX + name)
    if not dtypes.is_placeholder(declared):
        return np.dtype(dtypes.lookup(declared).name)
    return next((infos[p.name].dtype for p in backward.in_params if p.type == declared and p.name in infos), None)


def row_split(full: tuple[int, ...], summed: dict[str, tuple[int, ...]],
              arrays: dict[str, tuple[tuple[int, ...], tuple[int, ...], int]]) -> RowSplit | None:  # fmt: skip
    """``full`` as (rows, cols) for the row-sum variant: rows the leading dims every summed input (shapes
    ``summed``) is broadcast along, cols the dims each spans in full (an input of size 1 fits any split); and
    each array's (shape, byte strides, itemsize) in ``arrays`` as two element strides, the column one 0 or 1 (the
    variant's warps read adjacent columns). None where no split fits."""
    n = len(full)
    firsts = set()
    for shape in summed.values():
        padded = (1,) * (n - len(shape)) + shape
        if math.prod(padded) == 1:
            continue
        first = next(d for d, extent in enumerate(padded) if extent != 1)
        if padded[first:] != full[first:]:
            return None
        firsts.add(first)
    if len(firsts) > 1:
        return None
    d = firsts.pop() if firsts else max(n - 1, 0)
    rows, cols = math.prod(full[:d]), math.prod(full[d:])
    if rows == 0 or cols == 0:
        return None
    strides = {}
    for name, (shape, byte_strides, itemsize) in arrays.items():
        lead = n - len(shape)
        if lead < 0:
            return None
        over = [0] * lead + [0 if extent == 1 else s for extent, s in zip(shape, byte_strides)]
        row, col = _merged(full[:d], over[:d]), _merged(full[d:], over[d:])
        if row is None or col not in (0, itemsize) or row % itemsize:
            return None  # no such strides, or adjacent columns apart in memory (uncoalesced: the tiled backward)
        strides[name] = (row // itemsize, col // itemsize)
    chunk = max(_MIN_CHUNK, -(-rows * cols // _TARGET_THREADS))
    return RowSplit(rows, cols, min(chunk, rows), strides)


def _merged(extents: Sequence[int], strides: Sequence[int]) -> int | None:
    """The one stride of dims that merge in C order (0 where all are broadcast or of extent 1), or None."""
    stride = expected = None
    for extent, s in zip(reversed(extents), reversed(strides)):
        if extent == 1:
            continue
        if stride is None:
            stride = s
        elif s != expected:
            return None
        expected = s * extent
    return 0 if stride is None else stride


def _shape(a: Any) -> tuple[int, ...]:
    return tuple(getattr(a, "shape", ()))
