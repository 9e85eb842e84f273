"""sha256 for the serving path, without loading OpenSSL.

``hashlib`` loads OpenSSL's libcrypto on import (2.5-3 ms, most of a served kernel's start-up budget).
CPython also builds its own sha256 (HACL*, ``_sha2`` since 3.12, ``_sha256`` before), which imports in
microseconds; it hashes about 4x slower than OpenSSL, which a process only notices past ~40 binaries of
~40 KB. The digests are the same bytes either way.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol


class _Hash(Protocol):
    def update(self, data: bytes, /) -> None: ...
    def digest(self) -> bytes: ...
    def hexdigest(self) -> str: ...


def _constructor() -> Any:
    for module, name in (("_sha2", "sha256"), ("_sha256", "sha256")):  # CPython >= 3.12, then older
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    from hashlib import sha256 as openssl_sha256  # a Python built without them

    return openssl_sha256


_SHA256 = _constructor()


def sha256(data: bytes = b"") -> _Hash:
    """A sha256 hash object (``update``, ``digest``, ``hexdigest``), as ``hashlib.sha256`` gives."""
    result: _Hash = _SHA256(data)
    return result


def sha256_hex(data: bytes) -> str:
    """The sha256 of ``data`` as 64 lowercase hex digits."""
    return sha256(data).hexdigest()
