"""CuPy's kernel cache, as a second home for the raw modules kspec builds under the switch.

A program may point CuPy's kernel cache elsewhere (``cupy.cuda.compiler._set_kernel_cache_backend``: CuPy's own
CI stores kernels in a cloud bucket this way; tests patch it with a temporary directory) and expects the raw
modules it builds to be found and kept there. While it is pointed anywhere but CuPy's default directory, the
switch gives kspec's raw modules this adapter (kspec/kernels/raw/_module_cache.py): an entry is read and written in
CuPy's own format -- the binary, preceded by the mangled name of each name expression in the order of their
sorted spellings (CuPy's ``_encode_cache_payload``) -- under a name made of kspec's content key and the
architecture. CuPy's backend is looked up at every module load, so a backend set or patched later is the one
used. While CuPy's cache is its default directory kspec's own cache is the only one (nothing is stored twice).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any


def _compiler() -> Any:
    return sys.modules.get("cupy.cuda.compiler")


_verdict: list[Any] = [None, None]  # [the backend object judged last, whether it takes part]


def _backend() -> Any:
    """CuPy's kernel cache backend when a program pointed it away from the default directory, else None (judged
    once per backend object: a RawModule's get_function asks)."""
    backend = getattr(_compiler(), "_kernel_cache_backend", None)
    if backend is None:
        return None
    if _verdict[0] is not backend:
        _verdict[:] = [backend, _takes_part(backend)]
    return backend if _verdict[1] else None


def _takes_part(backend: Any) -> bool:
    default_type = getattr(sys.modules.get("cupy.cuda._compiler_cache"), "DiskKernelCacheBackend", None)
    if type(backend) is not default_type:
        return True
    default_dir = os.environ.get("CUPY_CACHE_DIR", os.path.expanduser("~/.cupy/kernel_cache"))
    return os.path.abspath(str(getattr(backend, "_cache_dir", ""))) != os.path.abspath(default_dir)


class CupyKernelCache:
    """kspec's ModuleCache over CuPy's kernel cache backend (see the module docstring)."""

    def active(self) -> bool:
        return _backend() is not None

    @staticmethod
    def _entry(key: str, arch: str) -> str:
        return f"kspec_{key}_{arch}.cubin"

    def load(self, key: str, arch: str, name_expressions: tuple[str, ...]) -> tuple[bytes, dict[str, str]] | None:
        backend = _backend()
        if backend is None or not arch.startswith(("sm_", "compute_")):
            return None
        payload = backend.load(self._entry(key, arch))
        if not payload:
            return None
        if not name_expressions:
            return bytes(payload), {}
        names = sorted(set(name_expressions))
        decode = getattr(_compiler(), "_decode_cache_payload", None)
        decoded = decode(payload, len(names)) if decode is not None else None
        if decoded is None:  # a bare binary or another set of names: compiled and saved again
            return None
        mangled, binary = decoded
        return bytes(binary), dict(zip(names, mangled))

    def save(self, key: str, arch: str, binary: bytes, lowered_names: Mapping[str, str], source: str) -> None:
        backend = _backend()
        if backend is None or not arch.startswith(("sm_", "compute_")):
            return
        payload = bytes(binary)
        if lowered_names:
            encode = getattr(_compiler(), "_encode_cache_payload", None)
            if encode is None:  # a CuPy without name-expression entries: it could not read them back
                return
            payload = encode([lowered_names[name] for name in sorted(lowered_names)], payload)
        backend.save(self._entry(key, arch), payload, source)
