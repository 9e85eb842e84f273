"""Typed Python modules for spec files (what ``kspec generate`` writes into ``generated/``).

Two steps, torchgen style: a spec model becomes an API description (``_api``), which an emitter turns
into source text (``_emit``). This package only reads specs: it never imports ``kspec.runtime`` or
``kspec.kernels`` (the generated modules do, when they are imported).
"""

from ._api import Api, ApiFunction, ApiParam, ApiRaw, api_of
from ._emit import emit_module
from ._generate import Generation, generate
from ._literal import literal
from ._write import sync_files

__all__ = ["Api", "ApiFunction", "ApiParam", "ApiRaw", "Generation", "api_of", "emit_module", "generate", "literal", "sync_files"]
