"""The hatchling build hook that ships typed modules and precompiled kernels in a wheel.

Importing this package imports hatchling (nothing else in kspec does): it is meant for build environments,
where hatchling is the backend. See :mod:`kspec.hatch._hook` and docs/guide/hatch-hook.md.
"""

from .._errors import BuildHookError
from ._hook import COMMAND, HookOptions, KspecBuildHook

__all__ = ["COMMAND", "BuildHookError", "HookOptions", "KspecBuildHook"]
