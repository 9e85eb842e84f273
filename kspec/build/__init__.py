"""Ahead-of-time builds: compile specs to binaries plus a manifest (the CLI's `build`, the hatch hook); warm the binary cache (the CLI's `warm`, ``kspec.warm``).

Never imports :mod:`kspec.runtime`: a build machine has no GPU.
"""

from .._manifest import (
    BINARY_SUFFIXES, INTERFACE_SUFFIX, MANIFEST_NAME, REGISTRATION_DIR, confined_file, read_manifest, registration_document,
)
from ._output import binary_path, check_output_dir, manifest_entry, write_output
from ._precompile import BuildPlan, BuildResult, BuildUnit, plan_build, precompile
from ._progress import BuildProgress, precompile_with_progress
from ._warm import (
    WarmPlan, WarmReport, WarmResult, WarmUnit, check_archs, plan_warm, specs_of, warm_specs, warm_summary, warm_units,
    warm_with_progress,
)

__all__ = [
    "BINARY_SUFFIXES",
    "INTERFACE_SUFFIX",
    "MANIFEST_NAME",
    "REGISTRATION_DIR",
    "registration_document",
    "BuildPlan",
    "BuildProgress",
    "BuildResult",
    "BuildUnit",
    "binary_path",
    "check_output_dir",
    "confined_file",
    "manifest_entry",
    "plan_build",
    "precompile",
    "precompile_with_progress",
    "read_manifest",
    "write_output",
    "WarmPlan",
    "WarmReport",
    "WarmResult",
    "WarmUnit",
    "check_archs",
    "plan_warm",
    "specs_of",
    "warm_specs",
    "warm_summary",
    "warm_units",
    "warm_with_progress",
]
