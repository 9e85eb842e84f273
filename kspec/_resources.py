"""Where kspec's data files (Jinja templates, device headers) live, in a checkout and when installed."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent

# Bump when kspec's templates, device headers, generated code or its ABI change meaning in a way their text
# does not show (the text itself is hashed), so specializations and binaries cached by an older kspec are
# not reused. Part of the
# specialization key (kspec/render) and of the cache key (kspec/compiler).
TEMPLATE_VERSION = 2


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


@lru_cache(maxsize=1)
def templates_digest() -> str:
    """sha256 over every file under templates/ (relative path and content), once per install (memoized on
    disk under a stamp of the files: kspec/_memo.py)."""
    from ._memo import tree_digest

    return tree_digest(str(templates_dir()))


@lru_cache(maxsize=1)
def renderer_digest() -> str:
    """sha256 over kspec's rendering code (``kspec/render/``), memoized on disk like the templates': with the
    specialization key (which covers the spec, its binding and the templates) it determines a rendered
    kernel's source, so a compile cache hit can be found without rendering (kspec/kernels/binaries/_loaded.py)."""
    from ._memo import tree_digest

    return tree_digest(str(_PACKAGE_DIR / "render"))
