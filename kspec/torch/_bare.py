"""Which registered op a bare kernel call inside ``torch.compile`` becomes, and with which keywords.

``resolve`` sees the call as planning does (tensors as their example values, numbers as numbers) and asks
:func:`kspec.torch.register` for the op: the inputs that are numbers are its scalars, a fused function returns
as many tensors as its ``output_specs`` plans. So a kernel called bare and the same kernel registered with the
same scalars share one op, named as register names it.
"""

from __future__ import annotations

from typing import Any

from .._errors import KspecNotImplementedError, KspecTypeError, KspecValueError

_NUMBERS = (bool, int, float, complex)


INSIDE_COMPILE = "inside torch.compile"


def resolve(register: Any, kernel: Any, values: list[Any], named: dict[str, Any],
            where: str = INSIDE_COMPILE) -> tuple[Any, dict[str, Any]]:  # fmt: skip
    """(the registered callable to call with the call's positional arguments, its keyword arguments: its
    ``overload`` is the op that tracing calls); ``register`` is kspec.torch.register. ``where`` names the calls
    that take this route, for the errors (``inside torch.compile``)."""
    from ..fuse import FusedFunction
    from ..kernels import ReductionKernel

    if isinstance(kernel, FusedFunction):
        function = f"fused function {kernel.kernel_name!r}"
        if named:
            raise KspecTypeError(f"kspec.torch: {function}: pass its arguments positionally {where}")
        scalars = _scalars(function, _fused_names(kernel, len(values)), values, where)
        return register(kernel, scalars=scalars, returns=_fused_returns(kernel, values)), {}
    what = f"kernel '{kernel.name}'"
    names = [p.name for p in kernel.in_params]
    stream = named.pop("stream", None)
    if stream is not None:
        raise KspecValueError(f"kspec.torch: {what}: stream= {where}; the op runs on PyTorch's current stream (torch.cuda.stream(s))")
    if len(values) != len(names):
        raise KspecNotImplementedError(
            f"kspec.torch: {what} takes {len(names)} input(s) {where} and returns new tensors; got "
            f"{len(values)} arguments (outputs given to write into are not supported there: autograd cannot record "
            "a kernel writing into given arrays, as for PyTorch's out= arguments)"
        )
    scalars = _scalars(what, names, values, where)
    if isinstance(kernel, ReductionKernel):
        if named.pop("out", None) is not None:
            raise KspecNotImplementedError(f"kspec.torch: {what}: out= {where}; use the returned tensor")
        axis, keepdims = named.pop("axis", None), named.pop("keepdims", False)
        _no_more(what, named)
        if isinstance(axis, int):
            axis = [axis]
        elif axis is not None:
            axis = list(axis)
        return register(kernel, scalars=scalars), {"axis": axis, "keepdims": bool(keepdims)}
    if named.pop("block_size", None) is not None:
        raise KspecNotImplementedError(f"kspec.torch: {what}: block_size= {where}; leave it to the kernel's default")
    size = named.pop("size", None)
    _no_more(what, named)
    keywords = {"size": size} if size is not None else {}
    return register(kernel, scalars=scalars), keywords


def _no_more(what: str, named: dict[str, Any]) -> None:
    if named:
        raise KspecTypeError(f"kspec.torch: {what}: unexpected keyword argument {next(iter(named))!r}")


def _scalars(what: str, names: list[str], values: list[Any], where: str) -> list[str]:
    """The inputs given as numbers (the op's scalars); every other must be a tensor."""
    import torch

    scalars = []
    for name, value in zip(names, values):
        if type(value) in _NUMBERS:
            scalars.append(name)
        elif not isinstance(value, torch.Tensor):
            raise KspecTypeError(
                f"kspec.torch: {what}: {name}: {where} an input is a tensor or a Python number, got "
                f"{type(value).__name__}"
            )
    return scalars


def _fused_names(fused: Any, count: int) -> list[str]:
    from ._schema import fused_signature

    inputs = fused_signature(fused, (), 1).inputs  # raises for functions register cannot take
    if len(inputs) != count:
        raise KspecTypeError(f"kspec.torch: fused function {fused.kernel_name!r} takes {len(inputs)} argument(s), got {count}")
    return list(inputs)


def _fused_returns(fused: Any, values: list[Any]) -> int:
    """How many tensors the function returns for these arguments (its planning, as register's fake does)."""
    import torch

    from ._tensors import array_spec

    stand_ins = [array_spec(v) if isinstance(v, torch.Tensor) else v for v in values]
    return len(fused.output_specs(*stand_ins))
