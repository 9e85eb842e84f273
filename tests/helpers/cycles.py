"""A check that code leaves nothing of its own in reference cycles: what it frees waits for no garbage collection."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def collector_off() -> Iterator[Callable[[], list[Any]]]:
    """Runs the block with the garbage collector off; the callable it gives returns, once called at the block's end,
    what a collection then finds in cycles that is kspec's own or a real tensor of a library (PyTorch's own
    machinery may free cycles of earlier tests' compiles meanwhile: Dynamo's fake tensors, frame summaries)."""
    gc.collect()
    gc.disable()

    def held() -> list[Any]:
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            gc.collect()
            return [o for o in gc.garbage if _of_kspec(o) or _real_tensor(o)]
        finally:
            gc.garbage.clear()
            gc.set_debug(0)

    try:
        yield held
    finally:
        gc.enable()


def _of_kspec(obj: Any) -> bool:
    """An instance of a kspec class, or a kspec function."""
    module = getattr(obj, "__module__", None) if callable(obj) and not isinstance(obj, type) else type(obj).__module__
    return isinstance(module, str) and module.startswith("kspec")


def _real_tensor(obj: Any) -> bool:
    kind = type(obj)
    if kind.__module__.startswith("torch") and kind.__name__ in ("Tensor", "Parameter"):
        return True
    return kind.__name__ == "ndarray" or kind.__module__.startswith(("cupy", "jax"))
