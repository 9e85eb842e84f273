"""A pytest plugin for benchmarks/clients/peer_groups.sh: ``PEER_SHARD=K/N`` keeps the collected tests whose position
is K modulo N (after the peer's own sampling), so that a group too long for one device call (CuPy's client and
cupyx groups: 36,452 and 40,186 tests) runs whole as N runs, the same shard in each mode."""

from __future__ import annotations

import os
from typing import Any

import pytest


def shard() -> tuple[int, int] | None:
    """(K, N) from ``PEER_SHARD``, or None when unset; a malformed value is a ValueError naming the variable."""
    text = os.environ.get("PEER_SHARD", "").strip()
    if not text:
        return None
    try:
        k, n = (int(part) for part in text.split("/"))
    except ValueError:
        raise ValueError(f"PEER_SHARD must be K/N with integers 0 <= K < N, got {text!r}") from None
    if not 0 <= k < n:
        raise ValueError(f"PEER_SHARD must be K/N with integers 0 <= K < N, got {text!r}")
    return k, n


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    found = shard()
    if found is not None:
        k, n = found
        items[:] = items[k::n]
