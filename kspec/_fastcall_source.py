"""The compiled call path's C++ source (kspec/_fastcall_c/): data shared by the layer that builds it (the
compiler's host extension, kspec/compiler/host/_extension.py) and the one that loads and calls it (the runtime,
kspec/runtime/_fastcall.py), so it sits beside both as a leaf rather than inside either."""

from __future__ import annotations

import os
from functools import lru_cache

SOURCE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_fastcall_c")


@lru_cache(maxsize=1)
def call_path_source() -> str:
    """The files of kspec/_fastcall_c/ in name order, one translation unit (``#line`` keeps a compiler's
    messages naming each file); read once per process, as the templates' digest is (kspec.cupy's ``enable()``
    looks the call path up, and the first call may again)."""
    parts = []
    for name in sorted(os.listdir(SOURCE_DIR)):
        if name.endswith((".h", ".cc")):
            with open(os.path.join(SOURCE_DIR, name), encoding="utf-8") as f:
                parts.append(f'#line 1 "{name}"\n' + f.read())
    return "\n".join(parts)
