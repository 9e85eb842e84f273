"""Where kspec's data files (Jinja templates, device headers) live, in a checkout and when installed."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


@lru_cache(maxsize=1)
def templates_dir() -> Path:
    """The ``templates/`` directory: ``<site-packages>/kspec/_templates`` when installed (the wheel maps the
    repository's ``templates/`` there), ``<repo>/templates`` in a source checkout.

    Raises ``FileNotFoundError`` naming both places when neither exists (a broken install).
    """
    # The installed location wins: an editable install of a checkout has no _templates, so both never clash.
    candidates = (_PACKAGE_DIR / "_templates", _PACKAGE_DIR.parent / "templates")
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        "kspec's templates directory is missing; looked in " + " and ".join(str(c) for c in candidates)
    )
