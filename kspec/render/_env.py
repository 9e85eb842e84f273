"""The Jinja environment of kspec's templates: strict (a missing variable is an error, not an empty string)."""

from __future__ import annotations

from functools import lru_cache

import jinja2

from .._resources import templates_dir


def make_environment(loader: jinja2.BaseLoader | None = None) -> jinja2.Environment:
    """A Jinja environment with kspec's settings; ``loader`` defaults to the templates directory.

    StrictUndefined turns a misspelt or missing template variable into an error at render time instead of
    silently emitting nothing into CUDA source. trim_blocks/lstrip_blocks keep block tags off the output.
    No autoescaping: the output is C++, not HTML.
    """
    return jinja2.Environment(
        loader=loader if loader is not None else jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The shared environment over the templates directory (templates are parsed once per process)."""
    return make_environment()
