"""The layers talk through their ``__init__`` and only downwards (issue 16; docs/architecture.md).

Every ``import`` in ``kspec/`` is parsed with :mod:`ast` (nothing is imported) and checked against three rules:

* no module imports another kspec package's private module (``from ..runtime._interop import x``); it
  imports what that package's ``__init__`` exports (``from ..runtime import x``). Inside a package anything goes;
* the layers import only downwards: spec -> render -> compiler -> runtime -> kernels -> fuse / jit -> jax / torch, and the
  tools (build, codegen, hatch, cli) never import runtime or kernels (a build machine has no GPU) while no
  layer imports a tool. The shared leaves (``kspec/*.py``: dtypes, _errors, _args, ...) import no package;
* a module does not read another package's private names through an object it imported from there
  (``_driver._device_count``, ``DeviceArray._wrap``), except the reads in ``ALLOWED_PRIVATE_READS``.
"""

from __future__ import annotations

import ast
import graphlib
import re
from pathlib import Path

import pytest

KSPEC = Path(__file__).resolve().parents[2] / "kspec"

# the order of the layers: a package may import those of a lower rank (and of its own, for fuse / jit: none do);
# jax and torch (kernels inside JAX / PyTorch graphs) are front ends over kernels and fuse; cupy (the switch that
# serves CuPy's constructors from kspec) is an adapter on top of kernels, fuse and jit; capturer (kspec capture)
# is a front end that records what kernels build and writes specs
LAYERS = {"spec": 0, "render": 1, "compiler": 2, "runtime": 3, "kernels": 4, "fuse": 5, "jit": 5, "grad": 6, "jax": 7,
          "cupy": 7, "capturer": 7, "torch": 7, "tune": 8}  # tune: `kspec tune` times kernels on a GPU (issue [AT]); only the CLI asks for it
# the tools: they may import spec, render, compiler and each other, never runtime or kernels
TOOLS = {"build", "codegen", "hatch", "cli"}
TOOLS_MAY_NOT_IMPORT = {"runtime", "kernels"}
# framework bindings and the packages they use (through their __init__): nothing below kernels, fuse and runtime;
# kspec.grad for the backward kernels their autograd calls (issue [AD])
BINDINGS = {"torch": {"kernels", "fuse", "grad", "runtime"}, "cupy": {"kernels", "fuse", "jit"}}
# the shared leaves (kspec/<name>.py) that any layer may import; they import no package
LEAVES = {"dtypes", "_errors", "_args", "_lazy", "_manifest", "_memo", "_binfmt", "_atomic", "_digest", "_resources", "typing", "_torch_watch", "_tuning", "_plan_tuning", "_raw_names", "_version", "_fastcall_source", "_generated_code", "_named_tuple"}
# kspec/__init__.py and kspec/__main__.py sit above every layer (the public front door and the CLI entry), and
# kspec/_warm.py (kspec.warm: the runtime's default arch and the build tools' compile pool, together)
# and kspec/_startup/sitecustomize.py (run at start-up in processes `python -m kspec.cupy` and `kspec capture` start:
# it arms the CuPy switch and capture's recorder)
TOP = {"__init__", "__main__", "_warm", "_startup"}

# the rooms of a package that grew several concerns, low to high: a room imports only lower rooms of its package
# (through their __init__) and never the package's own modules, which sit above all its rooms; no module outside a
# room imports the room's private modules (docs/architecture.md, "Rooms")
ROOMS = {
    "kernels": ["binaries", "callpath", "planning", "records", "raw"],
}

# (file, "Name.attr"): private reads across packages that stay, with the reason
ALLOWED_PRIVATE_READS = {
    # no public DeviceArray constructor takes strides; _stand_in wraps a NumPy array's shape and strides
    ("kernels/_spec_kernel.py", "DeviceArray._wrap"),
}
# Reads of a private attribute of an *instance* are not seen by the parse above; the known ones stay on
# purpose, on the per-call hot path, where a property would cost a call per argument:
HOT_PATH_PRIVATE_READS = {
    ("kernels/callpath/_signature.py", "a{i}._shape, a{i}._strides, a{i}._dtype, a{i}._device_id"),  # READS: DeviceArray slots
    ("kernels/callpath/_signature.py", "a{i}._ptr"),  # READS: the pointer
    ("kernels/callpath/_prepared.py", "obj._ptr"),  # pointer_of(): each output of a prepared call
}


class _Import:
    def __init__(self, file: Path, line: int, target: tuple[str, ...], type_checking: bool) -> None:
        self.file, self.line, self.target, self.type_checking = file, line, target, type_checking

    def __repr__(self) -> str:
        return f"{self.file.relative_to(KSPEC.parent)}:{self.line}: {'.'.join(self.target)}"


def _module_parts(file: Path) -> tuple[str, ...]:
    parts = file.relative_to(KSPEC.parent).with_suffix("").parts
    return parts[:-1] if parts[-1] == "__init__" else parts


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            inside.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return inside


def _imports(file: Path) -> tuple[list[_Import], dict[str, tuple[str, ...]]]:
    """Every kspec import of ``file`` (as the full dotted target, one per imported name) and the local
    names bound to kspec objects (name -> dotted target)."""
    tree = ast.parse(file.read_text(), str(file))
    here = _module_parts(file)
    package = here if file.name == "__init__.py" else here[:-1]
    checking = _type_checking_nodes(tree)
    found: list[_Import] = []
    bound: dict[str, tuple[str, ...]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = (*base, *(node.module.split(".") if node.module else ()))
            else:
                module = tuple((node.module or "").split("."))
            if module[0] != "kspec":
                continue
            for alias in node.names:
                target = (*module, alias.name)
                found.append(_Import(file, node.lineno, target, id(node) in checking))
                bound[alias.asname or alias.name] = target
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "kspec":
                    found.append(_Import(file, node.lineno, tuple(alias.name.split(".")), id(node) in checking))
    return found, bound


def _files() -> list[Path]:
    return sorted(KSPEC.rglob("*.py"))


def _owner(file: Path) -> str:
    """The package (``runtime``) or leaf (``dtypes``) a file belongs to."""
    parts = file.relative_to(KSPEC).with_suffix("").parts
    return parts[0]


def _unit(parts: tuple[str, ...]) -> str:
    """What a private name is private to: a room (``kernels/planning``) or else a package or leaf (``runtime``)."""
    if len(parts) < 2:
        return "__init__"  # kspec/__init__.py
    if len(parts) > 2 and parts[2] in ROOMS.get(parts[1], ()):
        return f"{parts[1]}/{parts[2]}"
    return parts[1]


def _is_private_module(target: tuple[str, ...]) -> bool:
    """``kspec.<package>._name[...]`` where ``_name`` is a module of that package."""
    if len(target) < 3 or not target[2].startswith("_") or target[2].startswith("__"):
        return False
    package = KSPEC / target[1]
    return package.is_dir() and ((package / f"{target[2]}.py").is_file() or (package / target[2]).is_dir())


def test_the_rules_see_every_package():
    packages = {p.name for p in KSPEC.iterdir() if (p / "__init__.py").is_file()}
    assert packages == set(LAYERS) | TOOLS, "a new package needs a place in LAYERS or TOOLS (and docs/architecture.md)"
    leaves = {p.stem for p in KSPEC.glob("*.py")} - TOP
    assert leaves == LEAVES, "a new shared leaf needs a place in LEAVES (and docs/architecture.md)"


def test_no_import_of_another_packages_private_module():
    bad = []
    for file in _files():
        owner = _owner(file)
        for imp in _imports(file)[0]:
            if imp.target[1] != owner and _is_private_module(imp.target) and not imp.type_checking:
                bad.append(imp)
    assert not bad, f"import these from the package's __init__ instead: {bad}"


def test_no_layer_imports_through_the_front_door():
    """A package or leaf never imports a name that kspec/__init__.py defines or re-exports (``from .. import
    __version__`` was one): the front door sits above every layer, so that import runs back up."""
    bad = []
    for file in _files():
        if _owner(file) in TOP:
            continue
        for imp in _imports(file)[0]:
            if len(imp.target) == 2 and _module_of(imp.target) == "kspec":
                bad.append(imp)
    assert not bad, f"import these from the leaf or package that defines them: {bad}"


def _module_of(target: tuple[str, ...]) -> str:
    """The kspec module an import target names: its longest prefix that is a module or a package."""
    for n in range(len(target), 0, -1):
        path = KSPEC.parent.joinpath(*target[:n])
        if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
            return ".".join(target[:n])
    raise AssertionError(f"{'.'.join(target)} names no kspec module")


def import_graph() -> dict[str, set[str]]:
    """module -> the kspec modules it imports: at module level, in functions and under TYPE_CHECKING alike
    (an import inside a function runs too, later), ``from pkg import name`` as pkg.name when that is a module."""
    graph = {}
    for file in _files():
        module = ".".join(_module_parts(file))
        graph[module] = {m for imp in _imports(file)[0] if (m := _module_of(imp.target)) != module}
    return graph


def import_circle(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return None


def test_no_import_circles():
    """No module of kspec/ imports, through any chain, a module that imports it back (issue [W]): split what
    two modules share into a third, or pass it in (docs/architecture.md, "Where new code goes")."""
    circle = import_circle(import_graph())
    assert circle is None, f"import circle: {' -> '.join(circle or [])}"


def test_the_circle_check_finds_a_circle():
    graph = import_graph()
    graph["kspec.dtypes"] = {*graph["kspec.dtypes"], "kspec.kernels._elementwise"}  # a leaf importing a layer
    circle = import_circle(graph)
    assert circle is not None and "kspec.dtypes" in circle and "kspec.kernels._elementwise" in circle


def test_layers_import_only_downwards():
    bad = []
    for file in _files():
        owner = _owner(file)
        if owner in TOP:
            continue
        for imp in _imports(file)[0]:
            target = imp.target[1] if len(imp.target) > 1 else None
            if target is None or target == owner:
                continue
            if owner in LEAVES:
                wrong = target not in LEAVES  # a leaf imports only other leaves
            elif owner in LAYERS:
                wrong = target in TOOLS or (target in LAYERS and LAYERS[target] >= LAYERS[owner])
            else:  # a tool
                wrong = target in TOOLS_MAY_NOT_IMPORT
            if wrong:
                bad.append(imp)
    assert not bad, f"imports against the layer order (docs/architecture.md): {bad}"


def test_bindings_use_only_kernels_fuse_and_runtime():
    """kspec.torch sits on the user-facing layers only: the callables, the fuse front end and the runtime."""
    bad = []
    for file in _files():
        owner = _owner(file)
        if owner not in BINDINGS:
            continue
        for imp in _imports(file)[0]:
            target = imp.target[1] if len(imp.target) > 1 else None
            if target not in (None, owner) and target not in LEAVES and target not in BINDINGS[owner]:
                bad.append(imp)
    assert not bad, f"a binding imports a layer it should not: {bad}"


def test_no_private_reads_across_packages():
    """Nor across the rooms of a package."""
    bad = []
    for file in _files():
        owner = _unit(_module_parts(file))
        bound = {name: target for name, target in _imports(file)[1].items() if len(target) > 1 and _unit(target) != owner}
        if not bound:
            continue
        for node in ast.walk(ast.parse(file.read_text(), str(file))):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in bound
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                read = f"{node.value.id}.{node.attr}"
                if (file.relative_to(KSPEC).as_posix(), read) not in ALLOWED_PRIVATE_READS:
                    bad.append(f"{file.relative_to(KSPEC.parent)}:{node.lineno}: {read}")
    assert not bad, f"private state read across packages (expose a public function): {bad}"


@pytest.mark.parametrize("allowed", sorted(ALLOWED_PRIVATE_READS | HOT_PATH_PRIVATE_READS))
def test_allowed_private_reads_still_exist(allowed):
    """An allow-list entry whose read is gone goes too."""
    file, read = allowed
    assert read in (KSPEC / file).read_text(), f"{allowed} is no longer read: drop it from ALLOWED_PRIVATE_READS"


# -- one source for each rule ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "macro", "module", "name"),
    [
        ("indexer.cuh", "KSPEC_EW_UNROLL", "kspec.kernels.planning._plan", "EW_UNROLL"),
        ("reduce.cuh", "KSPEC_REDUCE_UNROLL", "kspec.kernels.planning._reduction_strategy", "REDUCE_UNROLL"),
        ("reduce.cuh", "KSPEC_COLS_THREADS", "kspec.render", "COLS_THREADS"),
        ("reduce.cuh", "KSPEC_COLS_MIN_BLOCKS", "kspec.render", "COLS_MIN_BLOCKS"),
        ("reduce.cuh", "KSPEC_COLS_ONE_DIM_THREADS", "kspec.render", "COLS_ONE_DIM_THREADS"),
        ("reduce.cuh", "KSPEC_COLS_ONE_DIM_BLOCKS", "kspec.render", "COLS_ONE_DIM_BLOCKS"),
        ("reduce.cuh", "KSPEC_COLS_WARP_LOADS", "kspec.render", "COLS_WARP_LOADS"),
        ("reduce.cuh", "KSPEC_FINAL_OWN_CHUNKS", "kspec.render", "FINAL_OWN_CHUNKS"),
        ("reduce.cuh", "KSPEC_FINAL_OWN_OUTPUTS", "kspec.render", "FINAL_OWN_OUTPUTS"),
    ],
)
def test_planner_constants_match_the_device_header(header, macro, module, name):
    """The planners size grids with the unroll factor and launch bounds the device code uses: the Python
    constant is the header's ``#ifndef`` default (the templates never override it)."""
    import importlib
    import re

    from kspec._resources import templates_dir

    text = (templates_dir() / "include" / "kspec" / header).read_text()
    found = re.search(rf"#ifndef {macro}\s*\n#define {macro} (\d+)", text)
    assert found, f"{header} has no #ifndef default for {macro}"
    assert getattr(importlib.import_module(module), name) == int(found.group(1))
    rendered = "".join(p.read_text() for p in templates_dir().rglob("*.j2"))  # reduction/*.cu.j2, host/ too
    assert f"#define {macro}" not in rendered, f"a template overrides {macro}: the planner would not know"


def test_each_rule_is_defined_once():
    """TEMPLATE_VERSION and the templates digest live in kspec/_resources.py; render and compiler use them."""
    import kspec._resources as resources
    import kspec.compiler
    import kspec.render

    assert kspec.render.TEMPLATE_VERSION is resources.TEMPLATE_VERSION
    assert kspec.compiler.TEMPLATE_VERSION is resources.TEMPLATE_VERSION
    sources = {p.relative_to(KSPEC).as_posix(): p.read_text() for p in _files()}
    for pattern in (r"^TEMPLATE_VERSION = ", r"^def templates_digest\(", r"^MAX_ENTRIES = ", r'\+= b"\\0"'):
        where = [f for f, text in sources.items() if re.search(pattern, text, re.MULTILINE)]
        assert len(where) <= 1, f"{pattern!r} is defined in {where}"


def _room(parts: tuple[str, ...]) -> tuple[str, str | None] | None:
    """(package, room) of a module's dotted parts inside a package with rooms (room None: the package's own
    modules and its __init__), else None."""
    if len(parts) < 2 or parts[1] not in ROOMS:
        return None
    room = parts[2] if len(parts) > 2 and parts[2] in ROOMS[parts[1]] else None
    return parts[1], room


def room_violation(importer: tuple[str, ...], target: str) -> str | None:
    """Why module ``importer`` (dotted parts) may not import kspec module ``target``, by the rooms' rules, or None."""
    target_parts = tuple(target.split("."))
    mine, theirs = _room(importer), _room(target_parts)
    if theirs is None or theirs[1] is None and (mine is None or mine[1] is None):
        return None  # not inside a room, or a package's own modules among themselves
    package, room = theirs
    if room is not None and len(target_parts) > 3 and mine != theirs:
        return f"imports the private module {target} of room {package}/{room}: import from kspec.{package}.{room}"
    if mine is None or mine[0] != package or mine[1] is None:
        return None  # another layer (the layer rules judge it), or the package's own modules using a room
    order = ROOMS[package]
    if room is None:
        return f"room {package}/{mine[1]} imports {target}, which sits above every room of {package}"
    if order.index(room) > order.index(mine[1]):
        return f"room {package}/{mine[1]} imports the higher room {package}/{room} ({' < '.join(order)})"
    return None


def test_rooms_import_only_downwards_and_through_their_init():
    bad = []
    for file in _files():
        importer = _module_parts(file)
        for imp in _imports(file)[0]:
            why = room_violation(importer, _module_of(imp.target))
            if why is not None and not imp.type_checking:
                bad.append(f"{imp}: {why}")
    assert not bad, "\n".join(bad)


def test_the_room_rules_find_planted_imports():
    """Each rule fails an import planted against it."""
    assert "higher room" in room_violation(("kspec", "kernels", "binaries", "_loaded"), "kspec.kernels.planning")
    assert "above every room" in room_violation(("kspec", "kernels", "planning", "_plan"), "kspec.kernels._elementwise")
    assert "above every room" in room_violation(("kspec", "kernels", "callpath", "_frame"), "kspec.kernels")
    assert "private module" in room_violation(("kspec", "kernels", "_elementwise"), "kspec.kernels.planning._plan")
    assert "private module" in room_violation(("kspec", "fuse", "_api"), "kspec.kernels.callpath._prepared")
    assert room_violation(("kspec", "kernels", "planning", "_plan"), "kspec.kernels.callpath") is None
    assert room_violation(("kspec", "kernels", "_elementwise"), "kspec.kernels.planning") is None
    assert room_violation(("kspec", "kernels", "planning", "_planner"), "kspec.kernels.planning._plan") is None


def test_every_room_exists_and_has_a_curated_init():
    for package, rooms in ROOMS.items():
        for room in rooms:
            init = KSPEC / package / room / "__init__.py"
            assert init.is_file(), f"kspec/{package}/{room}/ is in ROOMS but has no __init__.py"
            assert "__all__" in init.read_text(), f"{init}: a room's __init__ names what it exports"
        found = {p.name for p in (KSPEC / package).iterdir() if (p / "__init__.py").is_file()}
        assert found == set(rooms), f"kspec/{package}/'s subpackages {sorted(found)} are not ROOMS' {rooms}"


def test_the_planner_reads_no_private_attribute_of_a_kernel():
    """The planner reads a kernel through kspec.kernels.planning.PlannedKernel, by name (issue [H2])."""
    bad = []
    for file in sorted((KSPEC / "kernels" / "planning").glob("*.py")):
        for node in ast.walk(ast.parse(file.read_text(), str(file))):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "kernel"
                    and node.attr.startswith("_")):
                bad.append(f"{file.relative_to(KSPEC.parent)}:{node.lineno}: kernel.{node.attr}")
    assert not bad, f"the planner reads private attributes of a kernel (add them to PlannedKernel): {bad}"


def _subpackages() -> list[tuple[str, ...]]:
    """Every package inside a layer package (``('kspec', 'compiler', 'cache')``, the rooms of kspec/kernels)."""
    return sorted(_module_parts(p) for p in KSPEC.glob("*/*/__init__.py"))


def subpackage_violation(importer: tuple[str, ...], target: str) -> str | None:
    """Why ``importer`` may not import ``target``: a private module of a subpackage it is not in (a subpackage is
    used through its ``__init__``, as a package is), or None."""
    parts = tuple(target.split("."))
    if len(parts) < 4 or not parts[3].startswith("_") or parts[3].startswith("__"):
        return None
    home = parts[:3]
    if home not in _SUBPACKAGES or importer[:3] == home:
        return None
    return f"imports the private module {target} of {'/'.join(home[1:])}: import it from {'.'.join(home)}"


_SUBPACKAGES = set(_subpackages())


def test_subpackages_are_used_through_their_init():
    """kspec/compiler/cache/, kspec/compiler/host/, kspec/runtime/host/ and the rooms of kspec/kernels: no module
    outside one imports its private modules (tests may)."""
    bad = []
    for file in _files():
        importer = _module_parts(file)
        for imp in _imports(file)[0]:
            why = subpackage_violation(importer, _module_of(imp.target))
            if why is not None and not imp.type_checking:
                bad.append(f"{imp}: {why}")
    assert not bad, "\n".join(bad)
    assert ("kspec", "compiler", "cache") in _SUBPACKAGES and ("kspec", "runtime", "host") in _SUBPACKAGES
    assert "private module" in subpackage_violation(("kspec", "compiler", "_compile"), "kspec.compiler.cache._store")
    assert "private module" in subpackage_violation(("kspec", "runtime", "_packer"), "kspec.runtime.host._checked")
    assert subpackage_violation(("kspec", "compiler", "cache", "_stats"), "kspec.compiler.cache._store") is None
    assert subpackage_violation(("kspec", "compiler", "_compile"), "kspec.compiler.cache") is None
