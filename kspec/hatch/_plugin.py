"""hatchling finds the hook through this module: entry point group ``hatch``, name ``kspec`` (pyproject.toml)."""

from __future__ import annotations

from hatchling.plugin import hookimpl

from ._hook import KspecBuildHook


@hookimpl
def hatch_register_build_hook() -> type[KspecBuildHook]:
    return KspecBuildHook
