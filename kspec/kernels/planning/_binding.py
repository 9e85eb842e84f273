"""Binding a call's arguments to a kernel's parameters (ElementwiseKernel and ReductionKernel).

CuPy's rules (REFERENCE.md): type placeholders bind from the given outputs first, then from the input
arrays; arrays are never cast (a dtype that differs from the declared or already-bound type is a
TypeError naming the parameter, both dtypes and the placeholder); scalars never bind a placeholder and are
converted to their parameter's type. Pure Python: array descriptions come from
:func:`kspec.runtime.array_info`, which needs no driver for kspec's own arrays, CuPy arrays and PyTorch
tensors.

Two sets of scalar rules, chosen by the kernel (``cupy_rules``, set for the CuPy-style constructors):

- CuPy's: a scalar is assigned to its parameter's dtype as NumPy assigns an array item (what CuPy's
  ``CScalar.apply_dtype`` does): ``2.0`` for an ``int32`` parameter is 2, ``2.7`` is 2 (toward zero); an
  out-of-range Python int is an OverflowError, NaN for an integer a ValueError, a Python complex for a real
  parameter a TypeError; a NumPy scalar is cast. A scalar given for a ``raw`` parameter is passed by value
  as that parameter's type, as CuPy passes it.
- The typed path's (spec files, generated modules, kspec.fuse), stricter: a float for an integer parameter or
  a complex for a real one is a TypeError rather than a silent truncation, and a raw parameter needs an array.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, TYPE_CHECKING

import numpy as np

from ..._named_tuple import NamedTuple
from ... import dtypes
from ..._errors import KspecTypeError, KspecValueError, about_kernel
from ...runtime import (
    CAI,
    CUPY,
    DLPACK,
    HOST,
    JAX,
    TORCH,
    accepts_kind,
    ArrayInfo,
    array_info,
    check_same_device,
    default_stream_getter,
    is_texture_type,
    kind_of_object,
    protocol_library,
    stream_handle,
)
from ..callpath import scalar_bytes

if TYPE_CHECKING:  # annotations only: binding serves plain specs too, without the Pydantic models
    from ...spec import ElementwiseSpec, Param, ReductionSpec

_PYTHON_SCALARS = (bool, int, float, complex)


class ArrayArg(NamedTuple):
    """A device array given for one parameter."""

    param: Param
    info: ArrayInfo
    dtype: str  # canonical kspec dtype name
    obj: Any  # the caller's object (returned as-is when it is an output)


class Bound(NamedTuple):
    """A call's arguments sorted by parameter, placeholders bound, scalars converted to their bytes."""

    kernel: str
    arrays: dict[str, ArrayArg]  # given device arrays by parameter name (inputs, given outputs, raw ones)
    scalars: dict[str, bytes]  # input parameter -> its value in the kernel's parameter format
    scalar_types: dict[str, type]  # input parameter -> the Python type of the value given
    types: dict[str, str]  # placeholder letter -> dtype, in the spec's order
    dtypes: dict[str, str]  # every parameter -> its dtype
    outputs_given: bool
    device_id: int | None  # the arrays' device; None when the call has no array
    library: str | None  # 'cupy' / 'torch' / None: where allocated outputs go (the first array's library)
    cupy_rules: bool = False  # CuPy's scalar rules (see the module docstring)


def is_scalar(obj: object) -> bool:
    """A Python or NumPy scalar (passed by value), as opposed to an array."""
    return isinstance(obj, _PYTHON_SCALARS) or isinstance(obj, np.generic)


def bind(
    spec: ElementwiseSpec | ReductionSpec,
    inputs: Sequence[Any],
    outputs: Sequence[Any] | None,
    textures: frozenset[str] = frozenset(),
    *,
    launch: bool = False,
    stream: object = None,
    abstract: bool = False,
    cupy_rules: bool = False,
) -> Bound:
    """Describe ``inputs`` (and ``outputs`` when given) against ``spec``'s parameters and bind its types.

    ``textures`` names inputs given a texture/surface object (already replaced by its uint64 handle): the
    handle is passed by value, and a placeholder of such a parameter binds to uint64 (``cudaTextureObject_t``
    is ``unsigned long long``), as CuPy binds it to no array dtype.

    ``launch``: the call launches next, on ``stream`` (None: the default stream of the first array's library,
    as :class:`~kspec.kernels.callpath._prepared.PreparedCall` picks it). Arrays that come through the protocols are then
    read for that stream: a ``__cuda_array_interface__`` v3 producer's ``stream`` is ordered before it, and
    DLPack is asked for ``__dlpack__(stream=<it>)``, as both protocols require of a consumer.

    ``abstract``: every array is an :class:`~._array_spec.ArraySpec` (``output_specs`` / ``plan_launch``), read
    into the ArrayInfo a real array of its layout gives, with pointer 0.

    ``cupy_rules``: CuPy's scalar rules (the module docstring). The array library of the first array argument,
    raw or not, decides where outputs are allocated; with ``cupy_rules``, a first array known only by
    ``__cuda_array_interface__`` answers as CuPy (:func:`_cupy_converts`). A call keyed from the dict
    (:func:`kspec.kernels.callpath.cai_entry`) keeps the library its first call found: a process that imports
    CuPy after such a call keeps kspec's arrays for that signature."""
    kernel = spec.name
    arrays: dict[str, ArrayArg] = {}
    scalar_inputs: dict[str, Any] = {}
    order: list[str] = []  # array parameters in argument order (the first one's library wins)
    protocol: list[tuple[Param, Any, bool, str]] = []  # CAI / DLPack arrays, read once the launch stream is known
    pairs = [(p, obj) for p, obj in zip(spec.in_params, inputs)]
    if outputs is not None:
        pairs += [(p, obj) for p, obj in zip(spec.out_params, outputs)]
    output_names = {p.name for p in spec.out_params}
    for param, obj in pairs:
        is_output = param.name in output_names
        if not is_output and is_scalar(obj):
            if param.raw and not cupy_rules:
                raise KspecTypeError(
                    about_kernel(kernel, f"{param.name} is a raw parameter and needs a device array, got a scalar {type(obj).__name__}")
                )
            scalar_inputs[param.name] = obj
            continue
        order.append(param.name)
        if abstract:
            arrays[param.name] = _abstract_arg(kernel, param, obj, is_output)
            continue
        kind = kind_of_object(obj)
        if launch and kind in (CAI, DLPACK):
            protocol.append((param, obj, is_output, kind))
            continue
        arrays[param.name] = _array_arg(kernel, param, obj, is_output, kind)
    as_cupy = False
    if protocol:
        _, first, _, first_kind = protocol[0]  # the first array argument when order[0] is not read yet
        as_cupy = order[0] not in arrays and _cupy_converts(first, first_kind) and _cupy_answers(cupy_rules)
        handle = _launch_stream(kernel, stream, arrays.get(order[0]), CUPY if as_cupy else None)
        for param, obj, is_output, kind in protocol:
            arrays[param.name] = _array_arg(kernel, param, obj, is_output, kind, handle)
        arrays = {name: arrays[name] for name in order}

    types = _bind_types(spec, arrays, outputs is not None, scalar_inputs, textures)
    param_dtypes = {p.name: types[p.type] if p.is_placeholder else p.type for p in spec.params}
    scalars = {name: scalar_bytes(kernel, name, value, param_dtypes[name], cupy_rules) for name, value in scalar_inputs.items()}

    device_id = None
    if arrays:
        named = [(name, arrays[name].info.device_id) for name in order]
        try:
            device_id = check_same_device(named)
        except KspecValueError as exc:
            raise KspecValueError(about_kernel(kernel, str(exc))) from None
    library = None
    if order:
        library = CUPY if as_cupy else arrays[order[0]].info.library
    scalar_types = {name: type(value) for name, value in scalar_inputs.items()}
    return Bound(kernel, arrays, scalars, scalar_types, types, param_dtypes, outputs is not None, device_id, library,
                 cupy_rules)


def library_without_arrays(stream: object, cupy_rules: bool, device_id: int) -> str | None:
    """Where a call with no array argument (scalars and ``size=`` only) allocates its outputs: the library of
    ``stream=`` when that is a CuPy or PyTorch stream; else, for a kernel of the CuPy-style constructors on a
    GPU, CuPy's when this process has imported CuPy (code written for CuPy indexes what it gets back, e.g.
    cupyx.scipy.signal's windows call ``kernel(scalars..., size=M)``); else None: kspec's own arrays."""
    root = type(stream).__module__.partition(".")[0]
    if stream is not None and root in ("cupy", "cupy_backends", "torch"):
        return TORCH if root == "torch" else CUPY
    if device_id >= 0 and _cupy_answers(cupy_rules):
        return CUPY
    return None


def _cupy_answers(cupy_rules: bool) -> bool:
    """Whether a call whose arguments name no array library answers as CuPy would: a kernel of the CuPy-style
    constructors, in a process that imported CuPy (code written for CuPy indexes what it gets back)."""
    return cupy_rules and "cupy" in sys.modules


def _cupy_converts(obj: Any, kind: str) -> bool:
    """Whether CuPy turns this protocol argument into a ``cupy.ndarray``: an object known only by
    ``__cuda_array_interface__`` (CuPy takes no DLPack-only object; JAX and Numba arrays keep their library).
    Where it is a CuPy-style kernel's first array (and :func:`_cupy_answers`), the call allocates CuPy's arrays
    on CuPy's current stream, as a call with no array does (:func:`library_without_arrays`)."""
    return kind == CAI and protocol_library(obj) is None


def _launch_stream(kernel: str, stream: object, first: ArrayArg | None, library: str | None = None) -> int:
    """The handle of the stream the call will launch on. ``first`` is the first array argument when it was
    read already (a CuPy / PyTorch / kspec array); None when it is a protocol array, which launches on the
    default stream of ``library`` (None: the legacy default stream, for JAX, Numba and others), as it would in
    PreparedCall."""
    if stream is not None:
        try:
            return stream_handle(stream)
        except KspecTypeError as exc:
            raise KspecTypeError(about_kernel(kernel, str(exc))) from None
    if first is None:
        return default_stream_getter(library)(-1)
    return default_stream_getter(first.info.library)(first.info.device_id)


def _abstract_arg(kernel: str, param: Param, obj: Any, is_output: bool) -> ArrayArg:
    # ArraySpecs are planning's without memory (output_specs / plan_launch): a served call never loads them
    from ._array_spec import ArraySpec, array_spec_info

    if not isinstance(obj, ArraySpec):
        role = "output" if is_output else "input"
        raise KspecTypeError(about_kernel(
            kernel, f"{role} {param.name}: expected a kspec.ArraySpec (output_specs / plan_launch take ArraySpecs "
            f"where a call takes arrays) or a scalar, got {'a scalar ' if is_scalar(obj) else 'a '}{type(obj).__name__}"))
    return ArrayArg(param, array_spec_info(obj), obj.dtype, obj)


def _is_array_spec(obj: Any) -> bool:
    """Whether ``obj`` is an ArraySpec (an error message's words for it; its module is loaded for it here)."""
    from ._array_spec import ArraySpec

    return isinstance(obj, ArraySpec)


def _array_arg(kernel: str, param: Param, obj: Any, is_output: bool, kind: str | None, stream: int | None = None) -> ArrayArg:
    role = "output" if is_output else "input"
    if not accepts_kind(kind):
        if kind == HOST:
            what = (
                f"a {type(obj).__module__}.{type(obj).__name__} in host memory; copy it to the device first "
                "(kspec.asarray(x), cupy.asarray(x) or torch.as_tensor(x, device='cuda')), or, to run on NumPy arrays "
                "(no GPU needed), use kspec's CPU device: KSPEC_DEVICE=cpu or kspec.use_device('cpu')"
            )
        elif is_output and is_scalar(obj):
            what = f"a scalar {type(obj).__name__}"
        elif _is_array_spec(obj):
            what = "a kspec.ArraySpec, which has no memory (kernel.output_specs / kernel.plan_launch take those)"
        else:
            what = f"a {type(obj).__name__}"
        lead = "Output arguments type must be cupy.ndarray or another device array: " if is_output else ""
        raise KspecTypeError(lead + about_kernel(kernel, f"{role} {param.name} must be a device array, got {what}"))
    try:
        info = array_info(obj, param=param.name, stream=stream)
    except KspecTypeError as exc:
        raise KspecTypeError(about_kernel(kernel, str(exc))) from None
    if is_output and (info.readonly or info.library == JAX):
        what = ("a JAX array: JAX arrays are immutable. Call the kernel with JAX arrays only and no stream (it runs "
                "as kspec.jax.call: the results come back as new JAX arrays, the one given unchanged), or pass an "
                "array kspec may write") if info.library == JAX else "read-only (its producer marked it so)"
        raise KspecTypeError(about_kernel(kernel, f"output {param.name} is {what}"))
    try:
        name = dtypes.from_numpy(info.dtype).name
    except (KeyError, TypeError, ValueError):
        raise KspecTypeError(
            about_kernel(
                kernel,
                f"{role} {param.name} has dtype {info.dtype}, which kspec kernels do not take "
                f"(supported: {', '.join(dtypes.NAMES)} and unstructured void V<n>)",
            )
        ) from None
    return ArrayArg(param, info, name, obj)


def _bind_types(
    spec: ElementwiseSpec | ReductionSpec,
    arrays: dict[str, ArrayArg],
    outputs_given: bool,
    scalars: dict[str, Any],
    textures: frozenset[str] = frozenset(),
) -> dict[str, str]:
    kernel = spec.name
    bound: dict[str, tuple[str, str]] = {}  # letter -> (dtype, parameter that bound it)
    for param in spec.in_params:
        if param.name in textures:
            if param.raw or (not param.is_placeholder and param.type != "uint64"):
                raise KspecTypeError(
                    about_kernel(
                        kernel,
                        f"{param.name} was given a texture/surface object; declare it with a type "
                        f"placeholder of its own (e.g. 'U {param.name}'), not '{'raw ' if param.raw else ''}{param.type}'",
                    )
                )
            if param.is_placeholder:
                bound[param.type] = ("uint64", param.name)
    params = (*spec.out_params, *spec.in_params) if outputs_given else spec.in_params
    for param in params:
        given = arrays.get(param.name)
        if given is None:
            continue
        if not param.is_placeholder:
            if given.dtype != param.type:
                raise KspecTypeError(
                    f"Type is mismatched. kernel '{kernel}': {param.name} is an array of {given.dtype} but the parameter is declared "
                    f"{param.type} (arrays are not cast; convert it with .astype('{param.type}'))"
                )
            continue
        previous = bound.get(param.type)
        if previous is None:
            bound[param.type] = (given.dtype, param.name)
        elif previous[0] != given.dtype:
            raise KspecTypeError(
                f"Type is mismatched. kernel '{kernel}': {param.name} is an array of {given.dtype}, but type placeholder "
                f"'{param.type}' is already bound to {previous[0]} by {previous[1]} (arrays are not cast)"
            )
    for letter in spec.placeholders:
        if letter not in bound:
            raise KspecTypeError(_unbound_message(spec, letter, outputs_given, scalars))
    return {letter: bound[letter][0] for letter in spec.placeholders}


def _unbound_message(spec: ElementwiseSpec | ReductionSpec, letter: str, outputs_given: bool, scalars: dict[str, Any]) -> str:
    users = [p for p in spec.params if p.type == letter]
    names = ", ".join(p.name for p in users) or "reduce_type"
    head = about_kernel(spec.name, f"type placeholder '{letter}' (of {names}) is not bound")
    outs = [p.name for p in users if p in spec.out_params]
    if outs and not outputs_given and all(p in spec.out_params for p in users):
        return f"{head}: only the output {', '.join(outs)} has it, so pass the output array(s) explicitly"
    if any(p.name in scalars for p in users):
        return f"{head}: it is given only scalars, and a scalar never binds a placeholder; pass an array for it"
    return f"{head}: no array argument has it"


def texture_handles(args: tuple[Any, ...], spec: ElementwiseSpec | ReductionSpec) -> tuple[tuple[Any, ...], frozenset[str]]:
    """``args`` with each input texture/surface object replaced by its handle (a NumPy uint64), and the names
    of those inputs; ``(args, frozenset())`` unchanged when there is none."""
    names = [p.name for p in spec.in_params]
    found = [i for i, a in enumerate(args[: len(names)]) if is_texture_type(type(a))]
    if not found:
        return args, frozenset()
    converted = list(args)
    for i in found:
        converted[i] = np.uint64(int(args[i].ptr))
    return tuple(converted), frozenset(names[i] for i in found)
