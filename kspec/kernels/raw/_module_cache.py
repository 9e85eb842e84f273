"""A second place a raw module's compiled binary is kept: a cache another library owns.

kspec's binary cache serves every kernel; code written for CuPy may also have pointed CuPy's own kernel cache
somewhere (``cupy.cuda.compiler._set_kernel_cache_backend``: a shared bucket for CI runners, a temporary
directory in a test). Under the ``kspec.cupy`` switch those programs expect their raw modules to be found and
kept there, so the switch installs an adapter here (kspec/cupy/_cache_bridge.py) and a raw module built from
code reads it before compiling and writes to it what it did not find in it. kspec's own cache is unchanged:
the adapter decides whether it takes part at all (it declines while CuPy's cache is its default directory, so
nothing is stored twice).

The adapter sees kspec's terms only: the module's content key (kspec/render/_content.py), the architecture, the
binary and the lowered name of each name expression.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class ModuleCache(Protocol):
    """Where raw modules' binaries are also kept; the methods may be called from any thread."""

    def active(self) -> bool:
        """Whether this cache takes part now (read once per module load)."""

    def load(self, key: str, arch: str, name_expressions: tuple[str, ...]) -> tuple[bytes, dict[str, str]] | None:
        """The binary filed under ``key`` for ``arch`` and each name expression's lowered name, or None (absent,
        or an entry that does not hold exactly these names: it is then compiled and saved again)."""

    def save(self, key: str, arch: str, binary: bytes, lowered_names: Mapping[str, str], source: str) -> None:
        """File a module's binary under ``key``; errors are the cache's own to report (a failed save loses
        nothing: kspec's cache has the binary)."""


_installed: list[ModuleCache] = []  # at most one; a list so readers take it without a lock


def set_module_cache(cache: ModuleCache | None) -> ModuleCache | None:
    """Install ``cache`` (None: remove it); returns the one it replaces."""
    previous = _installed[0] if _installed else None
    _installed[:] = [cache] if cache is not None else []
    return previous


def module_cache() -> ModuleCache | None:
    """The cache taking part now, or None."""
    cache = _installed[0] if _installed else None
    return cache if cache is not None and cache.active() else None
