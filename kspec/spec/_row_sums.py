"""The row-sum variant of a backward kernel: broadcast inputs' gradients summed in the same pass.

A bias added to an activation's input gets the column sum of the input's gradient: as a second kernel that is
one more read of a full-size array (half a copy: ~20% of a bias-GELU training step). This variant computes the
backward over the broadcast shape seen as ``(rows, cols)`` (the leading dims the summed inputs are broadcast
along, then the dims they span) and sums the ``summed`` inputs' gradients over the rows as it goes:

- its loop is over ``(chunks, cols)``: element ``(c, k)`` walks rows ``c * chunk .. (c + 1) * chunk`` of column
  ``k`` (adjacent threads read adjacent columns: every warp load is coalesced), a few rows' loads at a time;
- every array the backward reads is a ``raw`` parameter addressed by two element strides (one per row, one per
  column), passed as int64 scalars, so a C-contiguous input, a bias (row stride 0), a size-1 array (both 0) and
  a broadcast incoming gradient are the same code;
- a gradient that is not summed is written to a ``raw`` output, C-contiguous ``(rows, cols)``; a summed one is
  the loop's output: one partial sum per chunk and column, which kspec.grad folds (a ``grad_sum_spec``
  reduction over the chunks) to the input's shape.

It is an ordinary elementwise spec made from the backward spec, so it renders, compiles, caches and precompiles
(``kspec build``: kspec/spec/_grad_plan.py) as any; what it needs of a call (the split, the strides, whether it
applies at all) is kspec.grad's to decide (kspec/grad/_summed.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .. import dtypes
from .._errors import SpecError
from ._grad import GRAD_PREFIX, mentions
from ._params import Param

ROW_SUM_SUFFIX = "_rowsum"
# rows whose loads a thread issues before the first use. H100, (16384, 4096) float32 bias-GELU backward, as a
# fraction of 1.5 copies' bandwidth: 2 rows 0.88, 4 rows 0.85-0.93, 8 rows 0.93-0.94 (spec and fused kernels)
UNROLL = 8
IN_PREFIX = "kspec_in_"  # the raw view of an array the backward reads
OUT_PREFIX = "kspec_out_"  # the raw output of a gradient that is not summed
ROW_STRIDE = "kspec_sr_"  # + input name: its element stride per row
COL_STRIDE = "kspec_sk_"  # ... per column
SIZES = ("kspec_rows", "kspec_cols", "kspec_chunk")  # rows, columns, rows per chunk
_LOOP_STATE = re.compile(r"\b(i|_ind|_in_ind|_out_ind)\b")


def row_sum_spec(backward: Any, summed: Sequence[str], elementwise: type) -> Any:
    """The row-sum variant of ``backward`` (a backward ElementwiseSpec, kspec/spec/_backward.py) summing the
    gradients of the inputs named in ``summed``, of class ``elementwise``. A SpecError where the backward's body
    depends on the loop (``i``, ``_ind``, loop_prep / after_loop) or reads raw arrays: kspec.grad then sums
    those gradients in a second pass."""
    outputs = {p.name: p for p in backward.out_params}
    unknown = [n for n in summed if GRAD_PREFIX + n not in outputs]
    if not summed or unknown:
        raise SpecError(f"summed: expected names of inputs the backward gives gradients of, got {list(summed)!r}",
                        kernel=backward.name, field="grad")  # fmt: skip
    texts = (backward.operation, backward.loop_prep, backward.after_loop)
    if backward.loop_prep.strip() or backward.after_loop.strip() or _LOOP_STATE.search(backward.operation):
        raise SpecError("the row-sum backward needs a body that reads no loop state (i, _ind, loop_prep)",
                        kernel=backward.name, field="grad")  # fmt: skip
    if any(p.raw for p in backward.in_params):
        raise SpecError("the row-sum backward reads no raw arrays", kernel=backward.name, field="grad")
    scalars = set(backward.scalars)
    arrays = [p for p in backward.in_params if p.name not in scalars and mentions(p.name, texts)]
    summed_out = [outputs[GRAD_PREFIX + n] for n in summed]
    written = [p for p in backward.out_params if p.name[len(GRAD_PREFIX):] not in summed]
    sizes = [Param(name=n, type="int64") for n in SIZES]
    strides = [Param(name=prefix + p.name, type="int64") for p in arrays for prefix in (ROW_STRIDE, COL_STRIDE)]
    in_params = [
        *(Param(name=IN_PREFIX + p.name, type=p.type, raw=True) for p in arrays),
        *(p for p in backward.in_params if p.name in scalars),
        *sizes,
        *strides,
    ]
    out_params = [*(Param(name=OUT_PREFIX + p.name, type=p.type, raw=True) for p in written), *summed_out]
    return elementwise(
        name=f"{backward.name}{ROW_SUM_SUFFIX}_{'_'.join(summed)}",
        doc=f"{backward.name} with the gradients of {', '.join(summed)} summed over the rows (kspec.grad).",
        options=backward.options,
        in_params=in_params,
        out_params=out_params,
        operation=_operation(backward.operation, arrays, written, summed_out),
        preamble=backward.preamble,
        cupy_headers=backward.cupy_headers,
        instantiations=_instantiations(backward.instantiations, (*in_params, *out_params)),
        scalars=[*(n for n in backward.scalars), *(p.name for p in (*sizes, *strides))],
        layouts="contiguous",  # its loop arrays are the partials kspec.grad allocates: C-contiguous, always
    )


def _instantiations(declared: Sequence[Any], params: Sequence[Any]) -> list[dict[str, str]]:
    """The backward's instantiations over the placeholders the variant still has (an unread array's may go)."""
    used = {p.type for p in params}
    kept = [{k: v for k, v in dict(inst).items() if k in used} for inst in declared]
    return [dict(t) for t in dict.fromkeys(tuple(sorted(i.items())) for i in kept)]


def _c_type(type_name: str) -> str:
    """A parameter's type in the kernel: a placeholder is its own typedef, a dtype name its C type."""
    return type_name if dtypes.is_placeholder(type_name) else dtypes.lookup(type_name).c_type


def _operation(body: str, arrays: Sequence[Any], written: Sequence[Any], summed: Sequence[Any]) -> str:
    """The variant's body: element (chunk, column) of the loop walks its rows, UNROLL at a time, then the rest."""
    cols, rows, chunk = SIZES[1], SIZES[0], SIZES[2]
    lines = [
        f"const long long kspec_c = static_cast<long long>(i) / {cols};",
        f"const long long kspec_k = static_cast<long long>(i) - kspec_c * {cols};",
        f"const long long kspec_r0 = kspec_c * {chunk};",
        f"const long long kspec_r1 = {rows} - kspec_r0 < {chunk} ? {rows} : kspec_r0 + {chunk};",
    ]
    for p in arrays:
        lines.append(f"const {_c_type(p.type)}* const kspec_a_{p.name} = {IN_PREFIX}{p.name}.data() + "
                     f"kspec_k * {COL_STRIDE}{p.name};")  # fmt: skip
    for p in written:
        lines.append(f"{_c_type(p.type)}* const kspec_o_{p.name} = {OUT_PREFIX}{p.name}.data() + kspec_k;")
    for p in summed:
        lines.append(f"{_c_type(p.type)} kspec_s_{p.name} = {_c_type(p.type)}(0);")
    lines.append("long long kspec_r = kspec_r0;")
    lines.append(f"for (; kspec_r + {UNROLL} <= kspec_r1; kspec_r += {UNROLL}) {{")
    for p in arrays:
        lines.append(f"  {_c_type(p.type)} kspec_l_{p.name}[{UNROLL}];")
    lines.append("#pragma unroll")
    lines.append(f"  for (int kspec_u = 0; kspec_u < {UNROLL}; ++kspec_u) {{")
    for p in arrays:
        lines.append(f"    kspec_l_{p.name}[kspec_u] = kspec_a_{p.name}[(kspec_r + kspec_u) * {ROW_STRIDE}{p.name}];")
    lines.append("  }")
    lines.append("#pragma unroll")
    lines.append(f"  for (int kspec_u = 0; kspec_u < {UNROLL}; ++kspec_u) {{")
    lines += _row(body, arrays, written, summed, "kspec_l_{}[kspec_u]", "(kspec_r + kspec_u)", "    ")
    lines.append("  }")
    lines.append("}")
    lines.append("for (; kspec_r < kspec_r1; ++kspec_r) {")
    lines += _row(body, arrays, written, summed, f"kspec_a_{{0}}[kspec_r * {ROW_STRIDE}{{0}}]", "kspec_r", "  ")
    lines.append("}")
    for p in summed:
        lines.append(f"{p.name} = kspec_s_{p.name};")
    return "\n".join(lines)


def _row(body: str, arrays: Sequence[Any], written: Sequence[Any], summed: Sequence[Any], load: str, row: str,
         indent: str) -> list[str]:  # fmt: skip
    """One element of the walk: the inputs under their own names, the body, then its gradients stored or summed."""
    cols = SIZES[1]
    lines = [f"{indent}{{"]
    for p in arrays:
        lines.append(f"{indent}  const {_c_type(p.type)} {p.name} = {load.format(p.name)};")
    for p in (*written, *summed):
        lines.append(f"{indent}  {_c_type(p.type)} {p.name};")
    lines.append(f"{indent}  {{")
    lines += [f"{indent}    {line}" for line in body.strip().splitlines()]
    lines.append(f"{indent}    ;")
    lines.append(f"{indent}  }}")
    for p in written:
        lines.append(f"{indent}  kspec_o_{p.name}[{row} * {cols}] = {p.name};")
    for p in summed:
        lines.append(f"{indent}  kspec_s_{p.name} += {p.name};")
    lines.append(f"{indent}}}")
    return lines


def row_sum_arrays(variant: Any) -> list[str]:
    """The names of the arrays the variant reads (its raw inputs), in order: each needs its two strides."""
    return [p.name[len(IN_PREFIX):] for p in variant.in_params if p.name.startswith(IN_PREFIX)]


def row_sum_outputs(variant: Any) -> list[tuple[str, bool]]:
    """(input name, summed) per output of the variant, in order: a gradient written in full, or summed."""
    return [
        (p.name[len(OUT_PREFIX + GRAD_PREFIX):], False) if p.name.startswith(OUT_PREFIX) else (p.name[len(GRAD_PREFIX):], True)
        for p in variant.out_params
    ]


def row_sum_inputs(variant: Any, values: Any, strides: Any, sizes: tuple[int, int, int]) -> list[Any]:
    """The variant's input arguments in order: ``values`` maps the backward's input names to arrays and scalars,
    ``strides`` each array's (row, column) element strides, ``sizes`` (rows, columns, rows per chunk)."""
    out: list[Any] = []
    for p in variant.in_params:
        name = p.name
        if name.startswith(IN_PREFIX):
            out.append(values[name[len(IN_PREFIX):]])
        elif name.startswith(ROW_STRIDE):
            out.append(strides[name[len(ROW_STRIDE):]][0])
        elif name.startswith(COL_STRIDE):
            out.append(strides[name[len(COL_STRIDE):]][1])
        elif name in SIZES:
            out.append(sizes[SIZES.index(name)])
        else:
            out.append(values[name])  # a scalar of the backward
    return out
