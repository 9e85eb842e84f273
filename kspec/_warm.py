"""``kspec.warm``: the binary cache filled with every declared specialization (see kspec/build/_warm.py).

A top-level module, like ``kspec/__init__.py``: it needs the runtime (the current device's arch, the
default) and the build tools (the plan, the compile pool), and no layer may import both (a tool never
imports the runtime, a layer never imports a tool; docs/architecture.md). ``kspec.warm`` loads it lazily.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def warm(target: Any, arch: str | Sequence[str] | None = None, *, jobs: int | None = None) -> Any:
    """Compile (or find already cached) every declared specialization of ``target`` into the binary cache,
    each launch variant as a call looks it up, so that ``KSPEC_COMPILE=never`` serves every declared call.

    ``target``: spec files or a directory (a path or several), or a generated module. ``arch``: a target
    (``'sm_90'``, ``'host'``) or several; default: the current device's. ``jobs``: parallel compiles
    (default: the CPU count). Returns the report (``.compiled``, ``.cached``, ``.skipped``, ``.summary()``);
    a failed compile raises its error once the others are done.
    """
    from .build import check_archs, specs_of, warm_specs

    if arch is None:
        from .runtime import get_device  # the serving machine's own arch (host on the CPU device)

        arch = get_device().arch
    archs = check_archs(arch)
    report = warm_specs(specs_of(target), archs, jobs=jobs, show=True)
    for failed in report.failures:
        assert failed.error is not None
        raise failed.error
    return report
