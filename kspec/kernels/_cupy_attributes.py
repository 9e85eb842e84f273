"""The attributes CuPy's kernel objects have and CuPy's own library code reads (``kernel.name``, ``in_params[i].ctype``,
``nin``, ``preamble``, ...), for :class:`kspec.kernels.ElementwiseKernel` and ``ReductionKernel`` (their base
``SpecKernel`` holds ``_spec``, ``_nin`` and ``_nout``)."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from ._param_info import ParameterInfo, parameter_infos


class KernelAttributes:
    """CuPy's read-only kernel attributes over a spec kernel's ``_spec``, ``_nin`` and ``_nout``."""

    _spec: Any
    _nin: int
    _nout: int

    @property
    def name(self) -> str:
        return str(self._spec.name)

    @property
    def __name__(self) -> str:  # CuPy sets it for profilers that name a callable by it
        return str(self._spec.name)

    # CuPy's parameter records (kspec/kernels/_param_info.py), made on first access

    @cached_property
    def in_params(self) -> tuple[ParameterInfo, ...]:
        return parameter_infos(self._spec.in_params, outputs=False)

    @cached_property
    def out_params(self) -> tuple[ParameterInfo, ...]:
        return parameter_infos(self._spec.out_params, outputs=True)

    @property
    def params(self) -> tuple[ParameterInfo, ...]:
        """The inputs' and outputs' records (CuPy's tuple also ends with a record of its indexer, ``_ind``)."""
        return self.in_params + self.out_params

    @property
    def scalars(self) -> tuple[str, ...]:
        """The inputs the spec declares as passed by value (numbers), e.g. a kspec.fuse kernel's scalars."""
        return tuple(getattr(self._spec, "scalars", ()))

    @property
    def nin(self) -> int:
        return self._nin

    @property
    def nout(self) -> int:
        return self._nout

    @property
    def nargs(self) -> int:
        return self._nin + self._nout

    @property
    def preamble(self) -> str:
        return str(self._spec.preamble)

    @property
    def options(self) -> tuple[str, ...]:
        return tuple(self._spec.options)

    @property
    def reduce_dims(self) -> bool:
        return bool(self._spec.reduce_dims)
