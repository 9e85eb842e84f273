"""ElementwiseKernel: CuPy's elementwise kernels, from a constructor call or a spec file.

``kspec.ElementwiseKernel('float32 x, float32 y', 'float32 z', 'z = (x - y) * (x - y)', 'squared_diff')``
builds the same :class:`kspec.spec.ElementwiseSpec` a spec file holds. A call binds its arguments
(:mod:`.planning._binding`), plans the launch (:mod:`.planning._plan`) and prepares it once per signature (:mod:`.planning._planner`);
every call runs through :mod:`.callpath._call_path`. A constructor call binds by CuPy's rules (scalars converted as
CuPy converts them); a kernel of a spec file takes the typed path, which refuses a float for an integer
parameter. Where kspec differs from CuPy, it is clearer: an unbound placeholder names itself, C++ keywords
as names are refused at construction; ``size=`` with non-raw arrays is an error as in CuPy. An identical
constructor call adopts what the first one built (:mod:`.records._constructor_memo`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._args import flag, options_tuple
from . import _spec_kernel
from ._planner_view import PlannerView
from ._spec_kernel import grad_key
from ..runtime import fastcall_module
from .callpath import MISS, PreparedCall
from .planning import elementwise_steps, plan_elementwise_call, prepare_elementwise


class ElementwiseKernel(_spec_kernel.SpecKernel):
    """An elementwise kernel: ``k(*inputs)`` or ``k(*inputs, *outputs)``; kwargs ``size``, ``block_size``, ``stream``."""

    SPEC = _spec_kernel.SpecClass("ElementwiseSpec")
    KIND = "elementwise"

    def __init__(
        self,
        in_params: str,
        out_params: str,
        operation: str,
        name: str = "kernel",
        reduce_dims: bool = True,
        preamble: str = "",
        no_return: bool = False,
        return_tuple: bool = False,
        *,
        options: Sequence[str] = (),
        loop_prep: str = "",
        after_loop: str = "",
        grad: Mapping[str, str] | str | None = None,
    ) -> None:
        key = self._adopt((type(self), in_params, out_params, operation, name, reduce_dims, preamble, no_return, return_tuple,
                           options if type(options) is not list else tuple(options), loop_prep, after_loop,
                           grad_key(grad))
                          if type(reduce_dims) is bool and type(no_return) is bool and type(return_tuple) is bool else None)
        if key is None:  # built before: kspec/kernels/records/_constructor_memo.py
            return

        def build() -> Any:  # the spec, checked: now, or on first need (kspec/kernels/_spec_kernel.py's _built)
            texts = dict(in_params=in_params, out_params=out_params, operation=operation, name=name,
                         preamble=preamble, loop_prep=loop_prep, after_loop=after_loop)
            fields: dict[str, Any] = dict(reduce_dims=flag(reduce_dims, "reduce_dims"), no_return=flag(no_return, "no_return"),
                                          return_tuple=flag(return_tuple, "return_tuple"), options=options_tuple(options),
                                          cupy_headers=True)  # CuPy's implicit environment: M_PI, CArray, atomics...
            return self._build_spec(texts, fields, grad)

        self._built(key, build)

    @property
    def operation(self) -> str:
        return str(self._spec.operation)

    @property
    def no_return(self) -> bool:
        return bool(self._spec.no_return)

    @property
    def return_tuple(self) -> bool:
        return bool(self._spec.return_tuple)

    def __call__(self, *args: Any, size: object = None, block_size: object = None, stream: object = None, **kwargs: Any) -> Any:
        calls = self._calls  # the call path: kspec/kernels/callpath/_call_path.py
        if size is None and block_size is None and not kwargs:
            result = calls.call(args, stream)
            return result if result is not MISS else calls.miss(args, stream, None)
        if kwargs:
            self._split_args(args, kwargs, "size=, block_size= and stream=")  # raises: CuPy takes no others
        if not (_plain(size) and _plain(block_size)):
            return calls.once(args, stream, (size, block_size))
        extra = (size, block_size)
        result = calls.call(args, stream, extra)
        return result if result is not MISS else calls.miss(args, stream, extra)

    def backward_kernel(self, shared: bool = False) -> ElementwiseKernel:
        """The elementwise kernel of this spec's backward (``grad``: a table or ``"auto"``), made once;
        ``shared``: the variant without the gradients equal to an earlier input's (``spec.shared_gradients()``)."""
        return self._backward_with(ElementwiseKernel, shared)

    def row_sum_kernel(self, summed: tuple[str, ...]) -> ElementwiseKernel:
        """The elementwise kernel of this spec's backward with the gradients of the inputs ``summed`` summed over
        the rows of the pass (kspec.grad's fold of broadcast inputs' gradients: kspec/spec/_row_sums.py)."""
        return self._row_sum_with(ElementwiseKernel, tuple(summed))

    NOT_PREPARED: Any = MISS  # what call_prepared returns for a call it cannot serve

    @property
    def call_prepared(self) -> Any:
        """``f(args, stream=None)``: ``self(*args, stream=stream)`` if a call with the same signature
        (argument types, shapes, strides, dtypes, devices) ran last or before with the same argument types,
        else :attr:`NOT_PREPARED` with nothing done. For front ends that call a kernel per call of their own
        (kspec.fuse): they call it without another frame. Read it again after a call that missed."""
        return self._calls.call

    def _plan_call(self, args: tuple[Any, ...], stream: object, extra: Any) -> tuple[PreparedCall, tuple[int, ...]]:
        if not _native_call:
            _install_native_call()
        size, block_size = extra if extra is not None else (None, None)
        spec = self._spec
        if len(args) <= len(spec.in_params) and spec.out_params and not spec.operation.strip():
            _warn_empty_operation(spec)  # a plan is made once per signature: this is not the call path
        return prepare_elementwise(PlannerView(self), args, stream, size, block_size)

    def _call_keywords(self, extra: Any) -> dict[str, Any]:
        size, block_size = extra if extra is not None else (None, None)
        return {k: v for k, v in (("size", size), ("block_size", block_size)) if v is not None}

    def _abstract_plan(self, args: tuple[Any, ...], kwargs: dict[str, Any],
                       launch: bool) -> tuple[Any, tuple[int, ...], Any]:  # fmt: skip
        size, block_size = kwargs.pop("size", None), kwargs.pop("block_size", None)
        if kwargs:
            self._split_args(args, kwargs, "size= and block_size= here")  # raises
        bound, plan, _textures = plan_elementwise_call(PlannerView(self), args, None, size, block_size, abstract=True, launch=launch)
        return bound, plan.shape, plan

    def _abstract_steps(self, plan: Any, device_id: int) -> tuple[list[Any], int]:
        return elementwise_steps(PlannerView(self), plan, device_id, None), 0


def _plain(value: object) -> bool:
    """A keyword value that can be part of a signature as it is."""
    return value is None or type(value) is int


_python_call = ElementwiseKernel.__call__
_native_call: list[Any] = []  # [the compiled __call__], once installed (asked again on each plan until then)


def _install_native_call() -> None:
    """``ElementwiseKernel.__call__`` in C (kspec/_fastcall_c/'s KernelCall: ``k(*args)`` and
    ``k(*args, stream=s)`` straight to the dispatcher, every other call to :func:`_python_call`) where the
    compiled call path is loaded; decided on the first call planned after it is (a cold cache builds it)."""
    fastcall = fastcall_module()
    if fastcall is not None:
        _native_call.append(fastcall.kernel_call(_python_call, MISS))
        ElementwiseKernel.__call__ = _native_call[0]  # type: ignore[method-assign]


def _warn_empty_operation(spec: Any) -> None:
    import warnings

    from .._errors import UninitializedOutputWarning, about_kernel

    names = ", ".join(p.name for p in spec.out_params)
    warnings.warn(about_kernel(spec.name, f"its operation is empty, so the outputs it allocated ({names}) come back "
                               "uninitialised (as CuPy returns them); give an operation, or pass the outputs"),
                  UninitializedOutputWarning, stacklevel=5)  # fmt: skip
