"""The environment of a child process (``subprocess``) that imports kspec from this checkout.

A child's PYTHONPATH is what it is asked to see first (the checkout, unless told otherwise), then this
process's own PYTHONPATH: on the GPU machine pydantic and other wheels live there, not in site-packages.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def child_path(*first: str | os.PathLike[str]) -> str:
    """PYTHONPATH for a child: ``first`` (default: the checkout), then this process's PYTHONPATH entries;
    no empty entries, no duplicates (the first occurrence stays)."""
    entries = [os.fspath(f) for f in first or (ROOT,)]
    entries += os.environ.get("PYTHONPATH", "").split(os.pathsep)
    return os.pathsep.join(dict.fromkeys(e for e in entries if e))


def child_env(*first: str | os.PathLike[str], unset: Iterable[str] = (), **extra: str) -> dict[str, str]:
    """This process's environment without the variables named in ``unset``, PYTHONPATH from :func:`child_path`
    (``first`` ahead), then ``extra``."""
    dropped = set(unset)
    return {**{k: v for k, v in os.environ.items() if k not in dropped}, "PYTHONPATH": child_path(*first), **extra}
