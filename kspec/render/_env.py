"""The Jinja environment of kspec's templates: strict (a missing variable is an error, not an empty string)."""

from __future__ import annotations

import io
from functools import lru_cache
from pathlib import Path

import jinja2

from .._atomic import write_atomic
from .._memo import memo_dir
from .._resources import templates_dir


class TemplateCodeCache(jinja2.BytecodeCache):
    """kspec's templates compiled to Python code once per install, on disk (under :func:`kspec._memo.memo_dir`).

    Parsing and compiling the elementwise and reduction templates costs 60-200 ms, which a first call with an
    empty kernel cache would pay in every new process. Jinja keys each entry by template name and source
    checksum, and stamps it with its own version and Python's: an edited template or another Jinja is a miss.
    Entries are written atomically; one that cannot be read is recompiled, one that cannot be written is skipped.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            with open(self.directory / f"{bucket.key}.code", "rb") as handle:
                bucket.load_bytecode(handle)
        except Exception:  # missing, truncated or foreign: compile the template as if nothing was cached
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        data = io.BytesIO()
        bucket.write_bytecode(data)
        try:
            write_atomic(self.directory / f"{bucket.key}.code", data.getvalue())
        except OSError:
            pass


def make_environment(loader: jinja2.BaseLoader | None = None, *, code_cache: jinja2.BytecodeCache | None = None) -> jinja2.Environment:
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
        bytecode_cache=code_cache,
    )


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The shared environment over the templates directory (templates are compiled once per install, see
    :class:`TemplateCodeCache`, and loaded once per process)."""
    return make_environment(code_cache=TemplateCodeCache(memo_dir() / "templates"))
