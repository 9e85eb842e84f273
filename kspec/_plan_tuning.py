"""The planner's tuning space: what ``kspec tune`` may vary for elementwise and reduction kernels.

These kernels declare no space: theirs is kspec's own planner's choices, the same for every kernel (the
knobs below). A spec gives only the calls to tune for, ``tune.cases``; ``kspec tune`` times every distinct
launch the knobs give for each case and records the winner under the case's *layout label* (the class of
launch the planner sees, the item size and the merged loop extents rounded up to powers of two: ``"tiled 4B
2048x2048"``). A call takes the winner of its own label, else of the nearest label of the same class, item
size and rank; else the planner's rules. The knobs choose among entry points every module already holds and
set launch sizes, so a record adds no binary to a build.

Leaf module like kspec/_tuning.py (which holds the record files and raw spaces): no Pydantic, no driver.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ._named_tuple import NamedTuple
from ._digest import sha256_hex
from ._tuning import TuningError, bucket

# Knob -> its candidate values. Elementwise: threads per block (the tiled entry keeps its 256), resident
# blocks of 256 threads per SM that the grid-stride paths aim at (kspec/kernels/planning/_plan.py's
# CONTIG_BLOCKS_PER_SM), and the tiled entry's tile width (0: no tiles, the strided entry). Reduction: the block
# the strategy starts from, the blocks per SM a split aims at (BLOCKS_PER_SM), the slab entry allowed, the
# cols entry taken from 8 contiguous outputs (0: those layouts take the rows entry), the fold strategy allowed
# (short contiguous reduced pieces inside a kept dim), and the pieces strategy allowed (pieces shorter than a
# vector, in one pass).
ELEMENTWISE_KNOBS: dict[str, tuple[int, ...]] = {"block": (128, 256, 512, 1024), "per_sm": (4, 8, 16, 32),
                                                 "tile": (0, 4, 8, 16, 32, 64)}
REDUCTION_KNOBS: dict[str, tuple[int, ...]] = {"block": (128, 256, 512), "per_sm": (2, 4, 8), "slab": (0, 1),
                                               "cols": (0, 1), "fold": (0, 1), "pieces": (0, 1)}
KNOBS = {"elementwise": ELEMENTWISE_KNOBS, "reduction": REDUCTION_KNOBS}
PLANNER_KEY = ["layout"]  # a planner entry's key: the call's layout label
CASE_FIELDS = {"elementwise": ("args",), "reduction": ("args", "axis", "keepdims")}
LAYOUT_DTYPES = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16",
                 "float32", "float64", "complex64", "complex128")
# compiled on first use: a served kernel reads labels, never layouts
_LAYOUT = r"^\s*(\w+)\s*\[([^\]]*)\]\s*(\.T|\.transpose\(([^)]*)\))?\s*$"


class Layout(NamedTuple):
    """An array of a tuning case: made C-contiguous with ``shape``, then viewed through ``perm`` (None: as is)."""

    dtype: str
    shape: tuple[int, ...]
    perm: tuple[int, ...] | None


def parse_layout(text: object, field: str) -> Layout:
    """``"float32[2048, 1024]"``, ``"float32[1024, 2048].T"`` (the transposed view of a C-contiguous array)
    or ``"float16[8, 64, 32].transpose(2, 0, 1)"``; a :class:`TuningError` naming ``field`` otherwise."""
    match = re.match(_LAYOUT, text) if isinstance(text, str) else None
    if match is None:
        raise TuningError(f"expected 'DTYPE[D0, D1, ...]' with an optional .T or .transpose(...), got {text!r}", field)
    dtype, dims, view, axes = match.groups()
    if dtype not in LAYOUT_DTYPES:
        raise TuningError(f"dtype {dtype!r} is not one of {', '.join(LAYOUT_DTYPES)}", field)
    try:
        shape = tuple(int(d) for d in dims.split(",") if d.strip())
    except ValueError:
        raise TuningError(f"{text!r}: the dims must be ints", field) from None
    if not shape or any(d <= 0 for d in shape):
        raise TuningError(f"{text!r}: give at least one dim, each a positive int", field)
    perm: tuple[int, ...] | None = None
    if view == ".T":
        perm = tuple(reversed(range(len(shape))))
    elif view is not None:
        try:
            perm = tuple(int(a) for a in axes.split(",") if a.strip())
        except ValueError:
            raise TuningError(f"{text!r}: transpose takes ints", field) from None
        if sorted(perm) != list(range(len(shape))):
            raise TuningError(f"{text!r}: transpose{perm} is not a permutation of the {len(shape)} dims", field)
    return Layout(dtype, shape, perm)


def check_cases(tune: object, kind: str, in_params: Sequence[str], out_params: Sequence[str]) -> None:
    """The rules of an elementwise or reduction spec's ``tune`` table: ``cases``, a non-empty list of calls,
    each ``{args = {input: layout or number, ...}}`` (every input; outputs optional, allocated when left out)
    and, for a reduction, ``axis`` (an int or a list of ints) and ``keepdims``. Names the field it refuses."""
    if not isinstance(tune, Mapping) or set(tune) != {"cases"}:
        raise TuningError("an elementwise or reduction kernel's tune table holds only 'cases' (its space is the "
                          "planner's own)", "tune")  # fmt: skip
    cases = tune["cases"]
    if not isinstance(cases, (list, tuple)) or not cases:
        raise TuningError("cases: expected a non-empty list of calls ({args = {x = 'float32[4096, 4096]'}})", "tune.cases")
    for k, case in enumerate(cases):
        field = f"tune.cases[{k}]"
        if not isinstance(case, Mapping) or "args" not in case or not set(case) <= set(CASE_FIELDS[kind]):
            raise TuningError(f"expected a table of {', '.join(CASE_FIELDS[kind])} (args required), got {case!r}", field)
        args = case["args"]
        if not isinstance(args, Mapping):
            raise TuningError(f"args: expected a table of parameter -> layout, got {args!r}", f"{field}.args")
        for name in in_params:
            if name not in args:
                raise TuningError(f"input {name!r} is missing (every input is given)", f"{field}.args")
        for name, value in args.items():
            where = f"{field}.args.{name}"
            if name not in in_params and name not in out_params:
                raise TuningError(f"{name!r} is not a parameter ({', '.join([*in_params, *out_params])})", where)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                if name in out_params:
                    raise TuningError("an output is an array layout, not a number", where)
                continue
            parse_layout(value, where)
        axis = case.get("axis")
        if axis is not None and not (type(axis) is int or (isinstance(axis, (list, tuple)) and all(type(a) is int for a in axis))):
            raise TuningError(f"axis: expected an int or a list of ints, got {axis!r}", f"{field}.axis")
        if "keepdims" in case and type(case["keepdims"]) is not bool:
            raise TuningError(f"keepdims: expected true or false, got {case['keepdims']!r}", f"{field}.keepdims")


_NOT_CODE = ("tune", "doc", "instantiations", "scalars")  # what a build precompiles, not what a kernel computes


def plan_digest(table: Mapping[str, Any]) -> str:
    """What a planner entry was tuned for: the kernel's code (its spec table without ``tune``, ``doc`` and the
    build's ``instantiations`` and ``scalars``): a CuPy-style constructor call of the same code has the same."""
    data = {k: v for k, v in table.items() if k not in _NOT_CODE}
    return sha256_hex(json.dumps(data, sort_keys=True, default=str).encode())[:16]


# --- labels and the choice ---------------------------------------------------------------------------------


def layout_label(cls: str, itemsize: int, extents: Sequence[int], reduced: Sequence[int] | None = None) -> str:
    """``"tiled 4B 2048x2048x64"``: a launch class, the widest operand's item size, and loop extents (outermost
    first) each rounded up to a power of two; a reduction's kept ``extents`` and ``reduced`` ones as
    ``32x16/64``."""
    dims = "x".join(str(e) for e in bucket(extents))
    return f"{cls} {itemsize}B {dims}" if reduced is None else f"{cls} {itemsize}B {dims}/{'x'.join(str(e) for e in bucket(reduced))}"


def _label_parts(label: str) -> tuple[str, tuple[int, ...]]:
    head, _, dims = label.rpartition(" ")
    values = tuple(int(v) for v in re.split(r"[x/]", dims) if v)
    return f"{head} {re.sub(r'[0-9]+', 'N', dims)}", values  # same class, item size and ranks: comparable


def choose_knobs(entry: Mapping[str, Any] | None, label: str) -> tuple[dict[str, int] | None, str]:
    """The knobs a call of layout ``label`` takes from a planner entry, and where they came from: ``"record"``
    (its label's winner), ``"record, nearest <label>"`` (the winner of the nearest label of the same class,
    item size and rank: smallest sum of log2 distances, ties to the smaller label) or ``"rules"`` (None: no
    label of its kind, the planner's rules)."""
    buckets = (entry or {}).get("buckets") or {}
    if label in buckets:
        return dict(buckets[label]["winner"]["config"]), "record"
    kind, values = _label_parts(label)
    near = [b for b in buckets if _label_parts(b)[0] == kind]
    if not near:
        return None, "rules"

    def distance(candidate: str) -> tuple[float, str]:
        got = _label_parts(candidate)[1]
        return sum(abs(math.log2(a) - math.log2(b)) for a, b in zip(got, values)), candidate

    nearest = min(near, key=distance)
    return dict(buckets[nearest]["winner"]["config"]), f"record, nearest {nearest}"


def knob_label(config: Mapping[str, int] | None) -> str:
    """``block256_per_sm16``; ``rules`` for the planner's own choice (no knobs)."""
    return "_".join(f"{k}{config[k]}" for k in sorted(config)) if config else "rules"
