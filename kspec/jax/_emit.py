"""The traced call: plan the kernel on abstract arrays, register the plan, emit ``jax.ffi.ffi_call``.

Tracing asks the kernel for its plan (``kernel.plan_launch`` on :class:`kspec.kernels.ArraySpec` stand-ins of
the arrays: output shapes and dtypes, the launches, the workspace; the binary is loaded then, from a wheel,
the cache or NVRTC), registers the plan's description with the FFI handler (kspec/jax/_library.py) and emits
``jax.ffi.ffi_call("kspec_launch", ...)`` with the description's index as an attribute. Running the jitted
function is then XLA's business: no Python, no planning, no file read per call. A workspace is one more
result, dropped. The call sits under ``jax.custom_batching.custom_vmap``: vmap re-plans (kspec/jax/_batching.py).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .._errors import KspecNotImplementedError, KspecValueError
from ._batching import batch_rule
from ._callspec import CallSpec, kernel_name
from ._describe import KIND_HOST, describe
from ._library import TARGET, register


def run(spec: CallSpec, *arrays: Any) -> Any:
    """The traced call: planned and emitted under ``jax.custom_batching.custom_vmap`` (vmap re-plans)."""
    outputs, result = launch(spec, arrays)
    # no_return: JAX arrays cannot be written in place, so such a kernel returns its outputs too
    if result == "single" or (result == "none" and len(outputs) == 1):
        return outputs[0]
    return tuple(outputs)


def launch(spec: CallSpec, arrays: tuple[Any, ...]) -> tuple[tuple[Any, ...], str]:
    """(the outputs, the plan's result kind) of ``spec`` on ``arrays``, batchable by ``jax.vmap``."""
    import jax

    seen: dict[str, str] = {}

    def emit(*operands: Any) -> tuple[Any, ...]:
        outputs, seen["result"] = emit_call(spec, operands)
        return outputs

    batched = jax.custom_batching.custom_vmap(emit)
    batched.def_vmap(functools.partial(batch_rule, spec, launch))
    outputs = batched(*arrays)
    return tuple(outputs), seen.get("result", "tuple")


def emit_call(spec: CallSpec, arrays: tuple[Any, ...]) -> tuple[tuple[Any, ...], str]:
    """Plan ``spec`` for ``arrays`` (abstract values) and emit the ffi_call: (outputs, result kind)."""
    import jax
    import jax.numpy as jnp

    from ..kernels import ArraySpec
    from ..runtime import device_kind, worker_threads

    target = spec.target
    name = kernel_name(spec.kernel)
    if target.kind == KIND_HOST and device_kind() != "cpu":
        raise KspecValueError(
            f"kernel '{name}': JAX runs this computation on the CPU, where kspec launches on its CPU device, which is "
            "off; turn it on first (kspec.use_device('cpu') or KSPEC_DEVICE=cpu), or run JAX on a GPU"
        )
    device = "cpu" if target.kind == KIND_HOST else "cuda"
    stand_ins = tuple(ArraySpec(tuple(a.shape), np.dtype(a.dtype).name, device=device, device_id=target.device)
                      for a in arrays)  # fmt: skip
    plan = spec.kernel.plan_launch(*spec.arguments(stand_ins), **dict(spec.kwargs))
    threads = worker_threads() if target.kind == KIND_HOST else 1
    description = describe(plan, name=name, kind=target.kind, device=target.device, inputs=len(arrays), threads=threads)
    index, process = register(description)
    results = []
    for number, out in enumerate(plan.outputs):
        if out.strides is not None and tuple(out.strides) != _c_strides(out.shape, jnp.dtype(out.dtype).itemsize):
            raise KspecNotImplementedError(
                f"kernel '{name}': output {number} is planned with strides {tuple(out.strides)}; JAX arrays are "
                "C-contiguous, so kspec.jax returns only C-contiguous outputs"
            )
        results.append(jax.ShapeDtypeStruct(tuple(out.shape), jnp.dtype(out.dtype)))
    if description.workspace:
        results.append(jax.ShapeDtypeStruct((description.workspace,), jnp.uint8))
    if not results:
        raise KspecNotImplementedError(
            f"kernel '{name}': the call has no outputs; under JAX a kernel's results are new arrays, so kspec.jax "
            "needs a kernel with outputs"
        )
    # outputs given as arguments are written in place by the kernel (it may read them): XLA's result buffer is
    # the operand's (a copy of it, unless the caller donates it)
    aliases = spec.output_operands()
    call = jax.ffi.ffi_call(TARGET, results, input_output_aliases=aliases or None)
    outputs = call(*arrays, kspec_launch=np.int64(index), kspec_process=np.int64(process))
    return tuple(outputs[: len(plan.outputs)]), str(plan.result)


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides, step = [], itemsize
    for extent in reversed(tuple(shape)):
        strides.append(step)
        step *= max(int(extent), 1)
    return tuple(reversed(strides))
