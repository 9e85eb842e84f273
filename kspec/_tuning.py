"""Tuning spaces and tuning records: the one leaf module every layer reads them through.

A raw spec's ``tune`` table declares what may vary (its ``params``), which choices are allowed
(``constraints``), what the choice depends on (``key``: int arguments of the kernel) and how a choice
becomes code and a launch (``name_expression`` / ``defines``, ``block``, ``grid``, ``shared_mem``). ``kspec
tune`` times the choices on a GPU and writes a *record* (JSON beside the spec file: ``<stem>.tune.json``);
``kspec build`` compiles the record's winners; a call picks its config from the record by :func:`choose`, a
fixed rule on the key, so every process and replica makes the same choice and nothing is timed at run time.

Nothing here imports Pydantic, Jinja or the driver: the spec models validate through :func:`check_space`,
the serving path (a generated module's kernels) reads the same tables with the same functions.

Record layout (``format`` 1)::

    {"format": 1, "archs": {"sm_90": {"device": ..., "driver": ..., "kspec": ..., "kernels": {
        "<kernel>": {"digest": ..., "key": [...], "default": {...}, "buckets": {
            "<bucket label>": {"shape": {...}, "winner": {"config": {...}, "ms": ...,
                               "spread": ...}, "runner_up": ..., "default": {"ms": ...},
                               "candidates": N, "skipped": [{"config": ..., "reason": ...}]}}}}}}}
"""

from __future__ import annotations

import ast
import itertools
import json
import math
import operator
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ._digest import sha256_hex

RECORD_FORMAT = 1
RECORD_SUFFIX = ".tune.json"
MAX_CONFIGS = 4096  # a space larger than this (before constraints) is refused: an exhaustive sweep must end
MAX_VALUES = 64  # candidate values per parameter
BUILD_RECORD = "tuning.json"  # the winners a `kspec build` output carries (merged records of its specs)
ARRAY_DTYPES = ("float16", "float32", "float64", "int32", "int64", "uint8", "int8", "uint32")
SCALAR_DTYPES = ("int32", "int64", "uint32", "uint64")


class TuningError(ValueError):
    """A tuning space, record or expression that cannot be used; ``field`` names the part of ``tune``."""

    def __init__(self, message: str, field: str = "tune") -> None:
        super().__init__(message)
        self.field = field


# --- integer expressions: constraints, block, grid, shared memory -------------------------------------------

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Mod: operator.mod, ast.LShift: operator.lshift, ast.RShift: operator.rshift}
_COMPARE = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
            ast.Eq: operator.eq, ast.NotEq: operator.ne}
_FUNCTIONS: dict[str, Callable[..., int]] = {"cdiv": lambda a, b: -(-a // b), "min": min, "max": max}


def compile_expr(text: object, names: Sequence[str], field: str) -> Callable[[Mapping[str, int]], int]:
    """An integer expression over ``names`` (``+ - * // % << >>``, comparisons, ``and or not``, ``cdiv(a, b)``,
    ``min``, ``max``, int literals) as a function of a mapping of those names. Anything else (a float, an
    attribute, an unknown name) is a :class:`TuningError` naming ``field``."""
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        raise TuningError(f"expected an integer expression (a string) or an int, got {text!r}", field)
    source = str(text)
    try:
        tree = ast.parse(source, mode="eval").body
    except SyntaxError:
        raise TuningError(f"{source!r} is not an expression", field) from None
    allowed = set(names)

    def build(node: ast.AST) -> Callable[[Mapping[str, int]], int]:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            value = node.value
            return lambda env: value
        if isinstance(node, ast.Name):
            if node.id not in allowed:
                raise TuningError(f"{source!r}: unknown name {node.id!r} (known: {', '.join(sorted(allowed)) or 'none'})", field)
            name = node.id
            return lambda env: env[name]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            fn, left, right = _BINARY[type(node.op)], build(node.left), build(node.right)
            return lambda env: fn(left(env), right(env))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
            inner = build(node.operand)
            return (lambda env: -inner(env)) if isinstance(node.op, ast.USub) else (lambda env: int(not inner(env)))
        if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
            parts = [build(node.left), *(build(c) for c in node.comparators)]
            ops = [_COMPARE[type(op)] for op in node.ops]
            return lambda env: int(all(op(parts[k](env), parts[k + 1](env)) for k, op in enumerate(ops)))
        if isinstance(node, ast.BoolOp):
            parts = [build(v) for v in node.values]
            if isinstance(node.op, ast.And):
                return lambda env: int(all(p(env) for p in parts))
            return lambda env: int(any(p(env) for p in parts))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS
                and not node.keywords and node.args):  # fmt: skip
            fn, args = _FUNCTIONS[node.func.id], [build(a) for a in node.args]
            return lambda env: fn(*(a(env) for a in args))
        raise TuningError(f"{source!r}: {ast.unparse(node)!r} is not allowed (integer arithmetic, comparisons, "
                          "and/or/not, cdiv, min, max)", field)  # fmt: skip

    built = build(tree)

    def evaluate(env: Mapping[str, int]) -> int:
        try:
            return int(built(env))
        except ZeroDivisionError:
            raise TuningError(f"{source!r} divides by zero for {dict(env)}", field) from None

    return evaluate


# --- the space ---------------------------------------------------------------------------------------------


def parse_arg(text: object, k: int) -> tuple[str, str, tuple[str | int, ...] | None]:
    """``"float32[n, m] src"`` -> ("src", "float32", ("n", "m")); ``"int32 n"`` -> ("n", "int32", None)."""
    field = f"tune.args[{k}]"
    if not isinstance(text, str) or not text.split():
        raise TuningError(f"expected 'DTYPE[DIMS] NAME' or 'DTYPE NAME', got {text!r}", field)
    head, _, name = text.strip().rpartition(" ")
    head, name = head.strip(), name.strip()
    if not name.isidentifier() or not head:
        raise TuningError(f"expected 'DTYPE[DIMS] NAME' or 'DTYPE NAME', got {text!r}", field)
    if "[" not in head:
        if head not in SCALAR_DTYPES:
            raise TuningError(f"scalar {name!r}: dtype {head!r} is not one of {', '.join(SCALAR_DTYPES)}", field)
        return name, head, None
    dtype, _, dims_text = head.partition("[")
    dtype = dtype.strip()
    if dtype not in ARRAY_DTYPES or not dims_text.endswith("]"):
        raise TuningError(f"array {name!r}: expected DTYPE[DIMS] with DTYPE one of {', '.join(ARRAY_DTYPES)}, got {head!r}", field)
    dims: list[str | int] = []
    for part in dims_text[:-1].split(","):
        part = part.strip()
        if part.isdigit() and int(part) > 0:
            dims.append(int(part))
        elif part.isidentifier():
            dims.append(part)
        else:
            raise TuningError(f"array {name!r}: a dim is a key name or a positive int, got {part!r}", field)
    return name, dtype, tuple(dims)


def check_space(tune: Mapping[str, Any], kernels: Sequence[str], name_expressions: Sequence[str]) -> None:
    """Every rule of a tuning space (:class:`TuningError` naming the field): a non-empty, bounded space whose
    constraints leave the default and at least one config, expressions over known names, keys that are int
    arguments, a name expression or defines that use the parameters."""
    params = tune.get("params")
    if not isinstance(params, Mapping) or not params:
        raise TuningError("params is empty: name at least one parameter and its candidate values", "tune.params")
    size = 1
    for name, values in params.items():
        if not str(name).isidentifier():
            raise TuningError(f"parameter name {name!r} is not an identifier", "tune.params")
        if not isinstance(values, (list, tuple)) or not values or not all(type(v) is int for v in values):
            raise TuningError(f"{name}: expected a non-empty list of ints, got {values!r}", f"tune.params.{name}")
        if len(values) > MAX_VALUES or len(set(values)) != len(values):
            raise TuningError(f"{name}: at most {MAX_VALUES} distinct values, got {len(values)}", f"tune.params.{name}")
        size *= len(values)
    if size > MAX_CONFIGS:
        raise TuningError(f"the space has {size} configs before constraints; at most {MAX_CONFIGS} (narrow the "
                          "params' lists)", "tune.params")  # fmt: skip
    args = [parse_arg(a, k) for k, a in enumerate(tune.get("args") or ())]
    if not args:
        raise TuningError("args is empty: list the kernel's arguments ('float32[n, m] src', 'int32 n')", "tune.args")
    arg_names = [a[0] for a in args]
    if len(set(arg_names)) != len(arg_names):
        raise TuningError("an argument is named twice", "tune.args")
    key = list(tune.get("key") or ())
    scalars = {a[0] for a in args if a[2] is None}
    for k, name in enumerate(key):
        if name not in scalars:
            raise TuningError(f"key {name!r} is not an int argument of args ({', '.join(sorted(scalars)) or 'none'})", f"tune.key[{k}]")
    if len(set(key)) != len(key):
        raise TuningError("a key is named twice", "tune.key")
    if set(key) & set(params):
        raise TuningError(f"{sorted(set(key) & set(params))} are both keys and params", "tune.key")
    for k, (name, _, dims) in enumerate(args):
        if name not in scalars and (dims is None or any(isinstance(d, str) and d not in key for d in dims)):
            raise TuningError(f"array {name!r}: its dims must be ints or keys ({', '.join(key) or 'none'})", f"tune.args[{k}]")
        if name in scalars and name not in key:
            raise TuningError(f"scalar {name!r} is not a key: list it in key (its value is the call's)", f"tune.args[{k}]")
    names = [*params, *key]
    for k, c in enumerate(tune.get("constraints") or ()):  # each checked here, so its error names its index
        compile_expr(c, list(params), f"tune.constraints[{k}]")
    for field in ("block", "grid"):
        dims = tune.get(field)
        if not isinstance(dims, (list, tuple)) or not 1 <= len(dims) <= 3:
            raise TuningError(f"{field}: expected 1 to 3 integer expressions, got {dims!r}", f"tune.{field}")
        for k, d in enumerate(dims):
            compile_expr(d, names, f"tune.{field}[{k}]")
    compile_expr(tune.get("shared_mem", 0), names, "tune.shared_mem")
    pattern, defines = tune.get("name_expression"), list(tune.get("defines") or ())
    if pattern is None and not defines:
        raise TuningError("give name_expression (a template of the params, like 'transpose<{TILE}, {ROWS}>') or "
                          "defines (params passed as -D macros)", "tune.name_expression")  # fmt: skip
    for k, d in enumerate(defines):
        if d not in params:
            raise TuningError(f"define {d!r} is not a parameter", f"tune.defines[{k}]")
    if pattern is not None:
        if not isinstance(pattern, str) or not pattern.strip():
            raise TuningError(f"expected a name expression like 'transpose<{{TILE}}>', got {pattern!r}", "tune.name_expression")
        try:
            pattern.format(**{p: 1 for p in params})
        except (KeyError, IndexError, ValueError) as exc:
            raise TuningError(f"{pattern!r} uses {exc} which is not a parameter", "tune.name_expression") from None
    if len(kernels) + len(name_expressions) > 1 or (pattern is None and len(kernels) != 1):
        raise TuningError("a tuned spec exposes one kernel: one entry of 'kernels' (with defines), or none and a "
                          "name_expression", "kernels")  # fmt: skip
    default = tune.get("default")
    if not isinstance(default, Mapping) or set(default) != set(params):
        raise TuningError(f"default must give every parameter ({', '.join(params)}), got {default!r}", "tune.default")
    for name, value in default.items():
        if value not in params[name]:
            raise TuningError(f"default {name} = {value!r} is not one of its values {params[name]}", f"tune.default.{name}")
    shapes = tune.get("shapes") or ()
    for k, shape in enumerate(shapes):
        if not isinstance(shape, Mapping) or set(shape) != set(key) or not all(type(v) is int and v > 0 for v in shape.values()):
            raise TuningError(f"a shape gives every key ({', '.join(key)}) a positive int, got {shape!r}", f"tune.shapes[{k}]")
    allowed = configs(tune)
    if not allowed:
        raise TuningError("the constraints allow no config of the params", "tune.constraints")
    if all(c != dict(default) for c in allowed):
        raise TuningError(f"the default {dict(default)} breaks the constraints", "tune.default")


def _product(params: Mapping[str, Sequence[int]]) -> list[dict[str, int]]:
    names = list(params)
    return [dict(zip(names, values)) for values in itertools.product(*(params[n] for n in names))]


def configs(tune: Mapping[str, Any]) -> list[dict[str, int]]:
    """Every config of the space its constraints (over the params) allow, in the params' order."""
    params = tune["params"]
    checks = [compile_expr(c, list(params), "tune.constraints") for c in tune.get("constraints") or ()]
    return [c for c in _product(params) if all(check(c) for check in checks)]


def config_label(config: Mapping[str, int]) -> str:
    """``BX32_BY4``: the params in sorted order (a record's JSON sorts them too: one name per config)."""
    return "_".join(f"{k}{config[k]}" for k in sorted(config))


def config_table(table: Mapping[str, Any], config: Mapping[str, int]) -> dict[str, Any]:
    """The raw spec table of one config: ``tune`` dropped, the name expression filled in (or the defines
    added as ``-D`` options), named ``<kernel>__<config label>``. The build and the runtime both make it
    here, so its content key (the binary a build files) is the same on both sides."""
    tune = table["tune"]
    out = {k: v for k, v in table.items() if k != "tune"}
    out["name"] = f"{table['name']}__{config_label(config)}"
    options = [*table.get("options", ()), *(f"-D{d}={config[d]}" for d in tune.get("defines") or ())]
    if options:  # as the spec model's to_data writes it (an empty list is its default, left out)
        out["options"] = options
    if tune.get("name_expression") is not None:
        out["name_expressions"] = [tune["name_expression"].format(**config)]
        out.pop("kernels", None)
    return out


def space_digest(table: Mapping[str, Any]) -> str:
    """What a record's entry was tuned for: the code, options and space (not the shapes or the doc)."""
    tune = {k: v for k, v in table["tune"].items() if k != "shapes"}
    data = {k: table.get(k) for k in ("source", "path", "kernels", "name_expressions", "options")} | {"tune": tune}
    return sha256_hex(json.dumps(data, sort_keys=True, default=str).encode())[:16]


# --- buckets and the choice --------------------------------------------------------------------------------


def bucket(values: Sequence[int]) -> tuple[int, ...]:
    """A key's bucket: each value rounded up to a power of two (0 and 1 -> 1)."""
    return tuple(1 << max(0, int(v) - 1).bit_length() for v in values)


def bucket_label(key: Sequence[str], values: Sequence[int]) -> str:
    return ",".join(f"{k}={v}" for k, v in zip(key, bucket(values)))


def _label_values(label: str) -> tuple[int, ...]:
    return tuple(int(part.partition("=")[2]) for part in label.split(",")) if label else ()


def choose(entry: Mapping[str, Any] | None, default: Mapping[str, int], key_values: Sequence[int]) -> tuple[dict[str, int], str]:
    """The config a call with these key values runs, and where it came from: ``"record"`` (its bucket's
    winner), ``"record, nearest <label>"`` (the winner of the bucket nearest in log2 distance, ties to the
    smaller label) or ``"default"`` (no record entry). The same answer in every process."""
    buckets = (entry or {}).get("buckets") or {}
    if not buckets:
        return dict(default), "default"
    want = bucket(key_values)
    label = bucket_label(entry.get("key") or (), key_values)  # type: ignore[union-attr]
    if label in buckets:
        return dict(buckets[label]["winner"]["config"]), "record"

    def distance(candidate: str) -> tuple[float, str]:
        got = _label_values(candidate)
        return sum(abs(math.log2(a) - math.log2(b)) for a, b in zip(got, want)), candidate

    nearest = min(buckets, key=distance)
    return dict(buckets[nearest]["winner"]["config"]), f"record, nearest {nearest}"


# --- record files ------------------------------------------------------------------------------------------


def record_path(spec_file: str | os.PathLike[str]) -> Path:
    """Where a spec file's record lives: beside it, ``<stem>.tune.json``."""
    path = Path(spec_file)
    return path.with_name(path.stem + RECORD_SUFFIX)


def read_record(path: str | Path) -> dict[str, Any] | None:
    """A record file's data, or None where there is none; a damaged one is a :class:`TuningError`."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise TuningError(f"{str(path)!r} is not JSON ({exc}); re-run kspec tune", "record") from None
    if not isinstance(data, dict) or data.get("format") != RECORD_FORMAT or not isinstance(data.get("archs"), dict):
        raise TuningError(f"{str(path)!r} is not a kspec tuning record of format {RECORD_FORMAT}", "record")
    return data


def kernel_entry(record: Mapping[str, Any] | None, arch: str, kernel: str) -> dict[str, Any] | None:
    if not record:
        return None
    found = ((record.get("archs") or {}).get(arch) or {}).get("kernels", {}).get(kernel)
    return found if isinstance(found, dict) else None


def winners(entry: Mapping[str, Any] | None) -> list[dict[str, int]]:
    """Each distinct winning config of an entry, in bucket order."""
    seen: list[dict[str, int]] = []
    for data in ((entry or {}).get("buckets") or {}).values():
        config = dict(data["winner"]["config"])
        if config not in seen:
            seen.append(config)
    return seen


def dumps(record: Mapping[str, Any]) -> str:
    """A record as it is written: sorted keys, two-space indent, a final newline (stable diffs)."""
    return json.dumps(record, indent=2, sort_keys=True) + "\n"
