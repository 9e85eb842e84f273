"""sha256 for the serving path, without loading OpenSSL.

``hashlib`` loads OpenSSL's libcrypto on import (2.5-3 ms, most of a served kernel's start-up budget).
CPython also builds its own sha256 (HACL*, ``_sha2`` since 3.12, ``_sha256`` before), which imports in
microseconds; it hashes about 4-5x slower than OpenSSL (2.8 against 0.5 ms a MiB on a 2-core machine), which a
process notices past ~40 binaries of ~40 KB, or on one large one (a RawModule of a hundred template
instantiations: 0.8 MB, 2.2 against 0.4 ms). So OpenSSL's is used where it is already loaded (CuPy, PyTorch and
most libraries import ``hashlib``: kspec.cupy's processes have it), and for data of 1 MiB or more, whose hash
alone repays loading it. The digests are the same bytes either way.
"""

from __future__ import annotations

import importlib
import sys
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


_LARGE = 1 << 20  # bytes from which loading OpenSSL (2.5-3 ms) costs less than hashing without it


def sha256(data: bytes = b"") -> _Hash:
    """A sha256 hash object (``update``, ``digest``, ``hexdigest``), as ``hashlib.sha256`` gives: OpenSSL's
    where it is loaded already or ``data`` is large, else CPython's own (see the module docstring)."""
    if "_hashlib" in sys.modules or len(data) >= _LARGE:
        try:
            from hashlib import sha256 as openssl_sha256

            found: _Hash = openssl_sha256(data)
            return found
        except ImportError:  # a Python built without OpenSSL
            pass
    result: _Hash = _SHA256(data)
    return result


def sha256_hex(data: bytes) -> str:
    """The sha256 of ``data`` as 64 lowercase hex digits."""
    return sha256(data).hexdigest()
