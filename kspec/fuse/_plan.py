"""From a traced graph to kernels: which values each kernel computes, reads and writes.

A reduction becomes one reduction kernel: the elementwise work feeding it is its map, the elementwise work
on its result alone (with scalars) is its post-map. Everything else the function returns or writes back
becomes elementwise kernels, grouped by the arrays they read so that every result gets NumPy's broadcast
shape. Values that cross from one kernel to another (a reduction's result used by later elementwise work or
by a second reduction) are *materialized*: a kernel writes them, a later one reads them. CuPy refuses such
functions; here they run as a short sequence of kernels.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import _graph
from ._graph import Node

# What the function returns, item by item.
ARG_RESULT = "arg"  # an argument object itself (returned as is, after any in-place update)
NODE_RESULT = "node"  # a computed value
CONST_RESULT = "const"  # a constant of the function (returned as it is)
NONE_RESULT = "none"
TUPLE_RESULT = "tuple"  # a tuple inside the returned tuple


@dataclass
class Stage:
    """One kernel: ``reduce`` is the reduction node of a reduction kernel, None for an elementwise one."""

    reduce: Node | None
    outputs: list[Node] = field(default_factory=list)  # values it writes into new arrays
    writes: list[tuple[Node, int]] = field(default_factory=list)  # (value, argument index) updated in place

    @property
    def is_reduction(self) -> bool:
        return self.reduce is not None


@dataclass
class Plan:
    stages: list[Stage]
    materialized: set[int]  # ids of nodes a kernel writes into an array (reductions and their post-maps)
    results: list[tuple[str, object]]  # how to build each returned item
    returns_tuple: bool


class _Deps:
    """Per node: the arrays and reductions it depends on, not looking through reductions."""

    def __init__(self) -> None:
        self._deps: dict[int, frozenset[int]] = {}
        self.nodes: dict[int, Node] = {}

    def of(self, node: Node) -> frozenset[int]:
        found = self._deps.get(id(node))
        if found is not None:
            return found
        self.nodes[id(node)] = node
        if node.kind == _graph.REDUCE or node.is_array_arg:
            deps = frozenset({id(node)})
        else:
            deps = frozenset().union(*(self.of(i) for i in node.inputs)) if node.inputs else frozenset()
        self._deps[id(node)] = deps
        return deps

    def owner(self, node: Node) -> Node | None:
        """The reduction whose post-map can compute ``node`` (itself, or work on its result and scalars)."""
        deps = self.of(node)
        if len(deps) == 1:
            (only,) = deps
            candidate = self.nodes[only]
            if candidate.kind == _graph.REDUCE:
                return candidate
        return None


def plan(roots: list[tuple[Node, int | None]], results: list[tuple[str, object]], returns_tuple: bool) -> Plan:
    """``roots``: (value, argument index to write it into, or None for a value the function returns)."""
    deps = _Deps()
    order = list(_graph.postorder([n for n, _ in roots]))
    for node in order:
        deps.of(node)

    materialized: set[int] = set()
    for node in order:
        for inp in node.inputs:
            owner = deps.owner(inp)
            if owner is None:
                continue
            inline = node.kind != _graph.REDUCE and deps.owner(node) is owner  # same post-map
            if not inline:
                materialized.add(id(inp))
    for node, _target in roots:
        if deps.owner(node) is not None:
            materialized.add(id(node))

    stages: list[Stage] = []
    for node in order:
        if node.kind == _graph.REDUCE:
            outs = [n for n in order if id(n) in materialized and deps.owner(n) is node]
            stages.append(Stage(node, outputs=outs))

    groups: dict[tuple[frozenset[object], bool], Stage] = {}
    for node, target in roots:
        if target is None and (id(node) in materialized or node.kind in (_graph.ARG, _graph.CONST)):
            continue  # a reduction kernel writes it, or it is returned as it is
        if target is None and not deps.of(node):
            raise ValueError("scalar-only")  # the caller turns this into a FuseError naming the line
        key_deps = _array_leaves(node, materialized, deps)
        if target is not None:
            key_deps = key_deps | {("arg", target, None)}
        key = (frozenset(key_deps), target is not None)
        stage = groups.setdefault(key, Stage(None))
        if target is None:
            if node not in stage.outputs:
                stage.outputs.append(node)
        else:
            stage.writes.append((node, target))
    # Kernels that return new arrays read the arguments before the kernels that update arguments write them.
    stages += [s for (_, writes), s in groups.items() if not writes]
    stages += [s for (_, writes), s in groups.items() if writes]
    return Plan(stages, materialized, results, returns_tuple)


def _array_leaves(node: Node, materialized: set[int], deps: _Deps) -> set[object]:
    """The arrays an elementwise value reads: array arguments (by index) and materialized values."""
    leaves: set[object] = set()
    for n in _graph.postorder([node], stop=lambda m: id(m) in materialized and m is not node):
        if id(n) in materialized and n is not node:
            leaves.add(id(n))
        elif n.is_array_arg:
            leaves.add(("arg", n.attrs["index"], n.attrs.get("view")))
    return leaves


def stage_leaves(stage: Stage, materialized: set[int]) -> list[Node]:
    """The nodes a stage reads as kernel parameters: arguments (by index), then materialized values in the
    order they were computed. Constants are not parameters: they are written into the code."""
    found: dict[int, Node] = {}
    own = {id(n) for n in stage.outputs} if stage.reduce is not None else set()

    def collect(roots: list[Node], stop: object) -> None:
        for n in _graph.postorder(roots, stop=stop):
            if n.kind == _graph.ARG or (id(n) in materialized and n is not stage.reduce and id(n) not in own):
                found.setdefault(id(n), n)

    if stage.reduce is None:
        collect(stage.outputs + [n for n, _ in stage.writes], lambda m: id(m) in materialized)
    else:
        collect([stage.reduce.inputs[0]], lambda m: id(m) in materialized)
        # the post-map reads the reduced value and scalars only (that is what made it a post-map)
        collect(list(stage.outputs), lambda m: m is stage.reduce)
    args = sorted((n for n in found.values() if n.kind == _graph.ARG), key=lambda n: n.attrs["index"])
    return args + [n for n in found.values() if n.kind != _graph.ARG]
