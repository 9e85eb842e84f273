"""How ElementwiseKernel and ReductionKernel pickle: the spec, pickled once per object, with its digest.

A Dask task carries the kernels it calls, and the scheduler pickles a task's arguments for every task it sends: a
spec kernel took 40 us to pickle (the Pydantic spec) and 160 us to rebuild (spec, digest, setup), per task, on the
scheduler's and the worker's one thread. The spec's pickle is made once per object, and a process that unpickled
the kernel before adopts what that one built (the constructor memo, kspec/kernels/records/_constructor_memo.py,
under a key of its own): a few microseconds each way.
"""

from __future__ import annotations

import pickle
from typing import Any

from .records import SPEC_KERNELS, UNKEYED


def reduce_spec_kernel(kernel: Any) -> tuple[Any, tuple[Any, ...]]:
    """``kernel.__reduce__()``: :func:`rebuild` of its class, spec pickle, binaries directory, rules and digest."""
    spec = kernel.__dict__.get("_spec_pickle")
    if spec is None:  # once per object, not per task sent
        spec = kernel.__dict__["_spec_pickle"] = pickle.dumps(kernel.spec)
    directory = None if kernel._binaries is None else str(kernel._binaries.directory)
    return (rebuild, (type(kernel), spec, directory, kernel._cupy_rules, kernel._key))


def rebuild(cls: type[Any], spec: Any, binaries: str | None, cupy_rules: bool = False, digest: str | None = None) -> Any:
    """A pickled spec kernel: the state a kernel of the same class, digest, binaries and rules unpickled before in
    this process built, adopted; else built from ``spec`` (the model, or its pickle; older pickles pass the model
    and no digest)."""
    kernel = object.__new__(cls)
    key = kernel._adopt(None if digest is None else (cls, "unpickled", digest, binaries, cupy_rules))
    if key is None:  # unpickled before
        return kernel
    kernel = cls.from_spec(pickle.loads(spec) if isinstance(spec, bytes) else spec, binaries=binaries)
    kernel._cupy_rules = cupy_rules
    if key is not UNKEYED:
        SPEC_KERNELS.put(key, {name: kernel.__dict__[name] for name in cls._SHARED})
    return kernel
