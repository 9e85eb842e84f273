"""Stages -> kernel specs: C++ one line per recorded step, parameters named after the function's arguments.

Every value is a ``const`` local of its NumPy dtype's C type; a value read in another dtype (a ufunc loop's
input type, a cast, ``where``'s common type) gets one conversion line, made once. The ufunc library
(:mod:`._ufuncs`, ``kspec/ufunc.cuh``) gives each step's expression with NumPy's semantics.
"""

from __future__ import annotations

import keyword
import os
from collections.abc import Sequence

from .. import dtypes
from ..spec import CPP_KEYWORDS, ElementwiseSpec, Param, ReductionSpec, parse_params
from . import _graph
from ._graph import Node
from ._plan import Stage, stage_leaves
from ._ufuncs import cast, emit, headers, literal


def c_type(dtype: str) -> str:
    return dtypes.BY_NAME[dtype].c_type


def identifier(name: str, taken: set[str]) -> str:
    """A C identifier close to ``name`` that kspec accepts as a parameter (no ``i``, no leading ``_``, no
    C++ keyword) and that is not in ``taken``; added to ``taken``."""
    base = name.lstrip("_") or "arg"
    if not base.isidentifier() or keyword.iskeyword(base):
        base = "arg"
    if base == "i" or base in CPP_KEYWORDS:
        base += "_"
    out, k = base, 1
    while out in taken:
        out, k = f"{base}{k}", k + 1
    taken.add(out)
    return out


class Emitter:
    """Writes the lines that compute nodes from leaves (parameters, or ``a`` in a post-map)."""

    def __init__(self, leaves: dict[int, tuple[str, str]], temp_prefix: str) -> None:
        self.leaves = leaves  # node id -> (C expression, dtype it has)
        self.lines: list[str] = []
        self._values: dict[tuple[int, str], str] = {}
        self._exprs: dict[tuple[str, str], str] = {}  # (dtype, expression) -> its local: equal text, equal value
        self._prefix = temp_prefix
        self._count = 0

    def _temp(self, dtype: str, expr: str, comment: str = "") -> str:
        found = self._exprs.get((dtype, expr))
        if found is not None:  # `(x - y) * (x - y)` computes x - y once
            return found
        name = self._exprs[(dtype, expr)] = f"{self._prefix}{self._count}"
        self._count += 1
        tail = f"  // {comment}" if comment else ""
        self.lines.append(f"const {c_type(dtype)} {name} = {expr};{tail}")
        return name

    def value(self, node: Node, dtype: str | None = None) -> str:
        """An identifier holding ``node``'s value as ``dtype`` (default: the node's own)."""
        want = dtype or node.dtype
        key = (id(node), want)
        found = self._values.get(key)
        if found is not None:
            return found
        leaf = self.leaves.get(id(node))
        if leaf is not None:
            expr, have = leaf
            result = expr if have == want else self._temp(want, cast(expr, have, want))
        elif node.kind == _graph.CONST:
            result = self._temp(want, literal(node.attrs["value"], want))
        elif want != node.dtype:
            result = self._temp(want, cast(self.value(node), node.dtype, want))
        else:
            result = self._compute(node)
        self._values[key] = result
        return result

    def _compute(self, node: Node) -> str:
        where = _short(node.where)
        if node.kind == _graph.UFUNC:
            a = node.attrs
            args = [self.value(inp, t) for inp, t in zip(node.inputs, a["loop_in"])]
            expr = emit(a["name"], a["loop_in"], a["loop_out"], args)[a["index"]]
            return self._temp(node.dtype, expr, f"{a['name']} {where}".strip())
        if node.kind == _graph.CAST:
            (inp,) = node.inputs
            return self._temp(node.dtype, cast(self.value(inp), inp.dtype, node.dtype), f"astype {where}".strip())
        if node.kind == _graph.WHERE:
            cond, x, y = node.inputs
            expr = f"{self.value(cond, 'bool')} ? {self.value(x, node.dtype)} : {self.value(y, node.dtype)}"
            return self._temp(node.dtype, expr, f"where {where}".strip())
        if node.kind == _graph.IMAG:
            (inp,) = node.inputs
            if inp.dtype.startswith("complex"):
                return self._temp(node.dtype, f"{self.value(inp)}.imag()", f"imag {where}".strip())
            self.value(inp)  # read for the shape only: the imaginary part of a real value is 0
            return self._temp(node.dtype, literal(0, node.dtype), "imag of a real value")
        raise AssertionError(f"no code for {node!r}")  # reductions and arguments are always leaves


def _short(where: str) -> str:
    path, _, line = where.rpartition(":")
    return f"({os.path.basename(path)}:{line})" if path else ""


def _temp_prefix(taken: set[str]) -> str:
    prefix = "t"
    while any(n.startswith(prefix) and n[len(prefix):].isdigit() for n in taken):
        prefix += "_"
    return prefix


def _param(dtype: str, name: str, non_const: bool = False) -> str:
    return f"{'_non_const ' if non_const else ''}{dtype} {name}"


def _params(texts: list[str], field: str) -> tuple[Param, ...]:
    return parse_params(", ".join(texts), field=field)


def _doc(stage: Stage, origin: str) -> str:
    if stage.reduce is None:
        return f"kspec.fuse: elementwise work of {origin}"
    a = stage.reduce.attrs
    axis = a["axes"][0] if len(a["axes"]) == 1 else a["axes"]
    return f"kspec.fuse: reduction of {origin}; the fused function calls it with axis={axis}, keepdims={a['keepdims']}"


def elementwise_spec(name: str, stage: Stage, materialized: set[int], arg_names: Sequence[str],
                     origin: str) -> tuple[ElementwiseSpec, list[Node], list[int]]:
    """(spec, nodes passed as inputs in order, argument indices passed as outputs in order)."""
    leaves = stage_leaves(stage, materialized)
    taken: set[str] = set()
    written = [index for _, index in stage.writes]
    ins, leaf_exprs, inputs = [], {}, []
    for node in leaves:
        if node.kind == _graph.ARG and node.attrs["index"] in written and "view" not in node.attrs:
            continue  # an argument updated in place is an output parameter, read before it is written
        pname = identifier(_leaf_name(node, arg_names), taken)
        ins.append(_param(node.dtype, pname))
        leaf_exprs[id(node)] = (pname, node.dtype)
        inputs.append(node)
    outs, out_names = [], []
    for node, index in stage.writes:
        arg_node = next((n for n in leaves if n.kind == _graph.ARG and n.attrs["index"] == index and "view" not in n.attrs),
                        None)
        pname = identifier(arg_names[index], taken)
        outs.append(_param(node.dtype, pname))
        out_names.append(pname)
        if arg_node is not None:
            leaf_exprs[id(arg_node)] = (pname, arg_node.dtype)
    for k, node in enumerate(stage.outputs):
        pname = identifier(f"out{k}", taken)
        outs.append(_param(node.dtype, pname))
        out_names.append(pname)
    em = Emitter(leaf_exprs, _temp_prefix(taken))
    finals = [node for node, _ in stage.writes] + list(stage.outputs)
    values = [em.value(node) for node in finals]
    em.lines += [f"{pname} = {value};" for pname, value in zip(out_names, values)]
    used = [n.dtype for n in leaves] + [n.dtype for n in finals]
    spec = ElementwiseSpec(
        name=name, doc=_doc(stage, origin), in_params=_params(ins, "in_params"), out_params=_params(outs, "out_params"),
        operation="\n".join(em.lines), preamble=headers(used), return_tuple=len(out_names) > 1,
        scalars=tuple(leaf_exprs[id(n)][0] for n in inputs if n.is_scalar),
    )
    return spec, inputs, written


_REDUCE_EXPR = {"sum": "a + b", "prod": "a * b", "all": "a && b", "any": "a || b"}
_IDENTITY = {"sum": "0", "prod": "1", "all": "true", "any": "false"}


def reduction_spec(name: str, stage: Stage, materialized: set[int], arg_names: Sequence[str],
                   origin: str) -> tuple[ReductionSpec, list[Node]]:
    """(spec, nodes passed as inputs in order); the outputs are ``stage.outputs``, allocated by the kernel."""
    reduce = stage.reduce
    assert reduce is not None
    op, acc = reduce.attrs["op"], reduce.attrs["acc"]
    leaves = stage_leaves(stage, materialized)
    taken = {"a", "b"}  # the post-map's reduced value and the reduce_expr's operands
    ins, map_params, map_args, leaf_exprs = [], [], [], {}
    for node in leaves:
        pname = identifier(_leaf_name(node, arg_names), taken)
        ins.append(_param(node.dtype, pname))
        leaf_exprs[id(node)] = (pname, node.dtype)
        ref = "" if node.is_scalar else "&"
        map_params.append(f"const {c_type(node.dtype)}{ref} {pname}")
        map_args.append(pname)
    prefix = _temp_prefix(taken)
    mapper = Emitter(leaf_exprs, prefix)
    mapped = mapper.value(reduce.inputs[0], acc)
    map_fn = f"{name}_map"
    body = "\n".join(f"  {line}" for line in mapper.lines)
    function = (f"// The map: one input element of {name} as the accumulator type.\n"
                f"__device__ __forceinline__ {c_type(acc)} {map_fn}({', '.join(map_params)}) {{\n"
                f"{body}{chr(10) if body else ''}  return {mapped};\n}}")
    post = Emitter({**leaf_exprs, id(reduce): ("a", acc)}, prefix)
    outs, assigns = [], []
    for k, node in enumerate(stage.outputs):
        pname = identifier(f"out{k}", taken)
        outs.append(_param(node.dtype, pname))
        assigns.append(f"{pname} = {post.value(node)};")
    if op in _REDUCE_EXPR:
        reduce_expr = _REDUCE_EXPR[op]
    else:  # max / min: NumPy's maximum / minimum (NaN propagates); nanmax / nanmin: fmax / fmin (NaN skipped)
        pairwise = {"max": "maximum", "min": "minimum", "nanmax": "fmax", "nanmin": "fmin"}[op]
        reduce_expr = emit(pairwise, (acc, acc), (acc,), ("a", "b"))[0]
    used = [n.dtype for n in leaves] + [n.dtype for n in stage.outputs] + [acc]
    spec = ReductionSpec(
        name=name, doc=_doc(stage, origin), in_params=_params(ins, "in_params"), out_params=_params(outs, "out_params"),
        map_expr=f"{map_fn}({', '.join(map_args)})", reduce_expr=reduce_expr,
        post_map_expr="\n".join(post.lines + assigns), identity=_IDENTITY.get(op), reduce_type=acc,
        preamble=f"{headers(used)}\n\n{function}",
        scalars=tuple(leaf_exprs[id(n)][0] for n in leaves if n.is_scalar),
    )
    return spec, leaves


def _leaf_name(node: Node, arg_names: Sequence[str]) -> str:
    if node.kind == _graph.ARG:
        return arg_names[node.attrs["index"]] + ("_view" if "view" in node.attrs else "")
    if node.kind == _graph.REDUCE:
        return f"{node.attrs['op']}_result"
    return "partial"
