"""Tell PyTorch's compiler about kspec's kernels once it is loaded (bare kernel calls in ``torch.compile``).

Dynamo must know kspec's kernel types before it traces a call of one (``kspec/torch/_compile.py``), and Dynamo
is imported lazily by ``torch.compile`` itself (about 1-3 s: kspec never imports it). So ``import kspec``
installs :func:`watch`: where ``torch._dynamo`` is loaded already, kspec.torch teaches it at once; otherwise a
finder on ``sys.meta_path`` waits for that import and runs the same step right after it; it waits as well for
``kspec.jit`` where that loads after Dynamo, and removes itself when neither is left to wait for.
A process that never compiles never imports PyTorch or kspec.torch because of this; the finder costs one
string comparison per later first import of a module. Data goes one way: only kspec's top level and the
adapter meet here, the kernels layer knows nothing of it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

_MODULE = "torch._dynamo"
_JIT = "kspec.jit"
_watched: set[str] = set()  # the modules whose loading the finder waits for


def _teach() -> None:
    try:  # by name: this leaf imports nothing of kspec's at module level (tests/project_tests/test_layers.py)
        importlib.import_module("kspec.torch")._install_compile_hook()
    except Exception:  # noqa: BLE001  # a PyTorch kspec cannot teach: bare calls stay as they were, register serves
        pass


class _DynamoFinder:
    """Finds nothing itself: wraps the loader of ``torch._dynamo`` (and then of ``kspec.jit``, whose kernel type
    Dynamo must also know) so that :func:`_teach` runs after it. (A meta path finder needs only find_spec;
    importlib.abc would cost ~8 ms of every ``import kspec``.)"""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if fullname not in _watched:
            return None
        _watched.discard(fullname)
        if fullname == _MODULE and _JIT not in sys.modules:
            _watched.add(_JIT)  # loaded later: Dynamo learns its kernel type then
        if not _watched:
            _unwatch()
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            _teach()

        loader.exec_module = exec_module  # this module's loader only: made for this one import
        return spec


_finder = _DynamoFinder()


def _unwatch() -> None:
    if _finder in sys.meta_path:
        sys.meta_path.remove(_finder)


def watch() -> None:
    if _MODULE in sys.modules:
        _teach()
        if _JIT in sys.modules:
            return
        _watched.add(_JIT)
    else:
        _watched.add(_MODULE)
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
