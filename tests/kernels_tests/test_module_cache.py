"""A second cache a raw module's binary is kept in (kspec/kernels/raw/_module_cache.py), on the CPU device: a module
built from code reads it before compiling and writes to it what it did not find there; an entry it cannot use is
rebuilt and saved again; an inactive cache is never read. (kspec.cupy installs one over CuPy's kernel cache:
tests/cupy_tests/test_cupy_switch.py and tests/cupy_tests/test_cupy_switch_gpu.py.)"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np
import pytest

import kspec
from kspec import kernels

CODE = r"""
template <typename T> __global__ void scale_by(const T* x, T* y, T factor, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = factor * x[i];
}
"""


class DictCache:
    def __init__(self) -> None:
        self.entries: dict[tuple[str, str], tuple[bytes, dict[str, str]]] = {}
        self.calls: list[str] = []
        self.on = True

    def active(self) -> bool:
        return self.on

    def load(self, key: str, arch: str, name_expressions: tuple[str, ...]) -> tuple[bytes, dict[str, str]] | None:
        self.calls.append("load")
        return self.entries.get((key, arch))

    def save(self, key: str, arch: str, binary: bytes, lowered_names: Mapping[str, str], source: str) -> None:
        assert "scale_by" in source
        self.calls.append("save")
        self.entries[(key, arch)] = (binary, dict(lowered_names))


@pytest.fixture
def cache(on_cpu_device: None) -> Iterator[DictCache]:
    made = DictCache()
    kernels.clear_constructor_memos()
    previous = kernels.set_module_cache(made)
    yield made
    kernels.set_module_cache(previous)
    kernels.clear_constructor_memos()


def _scale(factor: float) -> np.ndarray:
    mod = kspec.RawModule(code=CODE, name_expressions=["scale_by<float>"], options=("-DUNIQUE_TO_MODULE_CACHE_TEST",))
    x = kspec.asarray(np.arange(16, dtype=np.float32))
    y = kspec.asarray(np.zeros(16, dtype=np.float32))
    mod.get_function("scale_by<float>")((1,), (16,), (x, y, np.float32(factor), np.int32(16)))
    kernels.clear_constructor_memos()  # the next identical construction loads its module again
    return np.asarray(y)


def test_saved_once_then_served(cache: DictCache) -> None:
    np.testing.assert_array_equal(_scale(2.0), 2.0 * np.arange(16, dtype=np.float32))
    assert cache.calls == ["load", "save"]
    ((_key, arch),) = cache.entries
    assert arch == "host" and set(cache.entries[(_key, arch)][1]) == {"scale_by<float>"}
    np.testing.assert_array_equal(_scale(3.0), 3.0 * np.arange(16, dtype=np.float32))
    assert cache.calls == ["load", "save", "load"], "the second module came from the cache"


def test_an_entry_without_the_names_is_rebuilt(cache: DictCache) -> None:
    _scale(2.0)
    (entry,) = cache.entries
    cache.entries[entry] = (cache.entries[entry][0], {})  # names lost: the binary cannot be resolved from it
    original_load = cache.load

    def refusing_load(key: str, arch: str, names: tuple[str, ...]) -> tuple[bytes, dict[str, str]] | None:
        found = original_load(key, arch, names)
        return None if found is not None and set(found[1]) != set(names) else found

    cache.load = refusing_load  # type: ignore[method-assign]
    np.testing.assert_array_equal(_scale(4.0), 4.0 * np.arange(16, dtype=np.float32))
    assert cache.calls == ["load", "save", "load", "save"]


def test_inactive_cache_is_not_read(cache: DictCache) -> None:
    cache.on = False
    _scale(2.0)
    assert cache.calls == [] and kernels.module_cache() is None
