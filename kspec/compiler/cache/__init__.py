"""The content-addressed binary cache: compiled modules kept on disk, one entry file per cache key.

:class:`BinaryCache` (``_store``) is an in-process dict in front of the entry files of one or more directories
(``KSPEC_CACHE_DIR``; which may be written and what each holds: ``_dirs``); ``_entry`` is one entry file's name
and bytes, ``_stats`` the size cap (LRU eviction) and the hit/miss counts shared by processes, ``_clear`` what
``kspec cache clear`` removes and what it could not. The key an entry is stored under is the compiler's
(kspec/compiler/_key.py): the cache stores bytes, it does not know what made them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_getattr

if TYPE_CHECKING:  # the same names, typed for mypy (a module __getattr__ is Any to it); never run
    from ._clear import ClearReport as ClearReport
    from ._dirs import NOT_AN_ENTRY as NOT_AN_ENTRY
    from ._entry import ENTRY_FORMAT_VERSION as ENTRY_FORMAT_VERSION, ENTRY_SUFFIX as ENTRY_SUFFIX
    from ._entry import decode_entry as decode_entry, entry_parts as entry_parts, read_regular as read_regular
    from ._store import BinaryCache as BinaryCache, CacheInfo as CacheInfo, default_cache as default_cache


# Lazy exports, as kspec.compiler's: a process serving cached kernels loads only the modules it reads.
_LAZY = {
    "BinaryCache": "_store", "CacheInfo": "_store", "default_cache": "_store",
    "ClearReport": "_clear",
    "NOT_AN_ENTRY": "_dirs",
    # the entry format, for the rest of kspec.compiler: the cache key hashes its version in, and the compiled
    # call path's lookup (kspec/compiler/host/_extension.py) reads one entry file without the cache object
    "ENTRY_FORMAT_VERSION": "_entry", "ENTRY_SUFFIX": "_entry", "decode_entry": "_entry", "entry_parts": "_entry",
    "read_regular": "_entry",
}


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


__all__ = [
    "BinaryCache",
    "CacheInfo",
    "ClearReport",
    "NOT_AN_ENTRY",
    "default_cache",
]
