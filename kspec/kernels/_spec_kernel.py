"""What ElementwiseKernel and ReductionKernel share: specializations, launches, CuPy's attributes.

One rendered module per specialization (spec + placeholder binding + scalar inputs) serves every call
shape; it is rendered once per process and its variants are compiled and loaded per device as calls need
them (kspec/kernels/binaries/_loaded.py). The tables are module-level, so two kernel objects with equal specs share
everything.
"""

from __future__ import annotations

from types import MappingProxyType
from collections.abc import Callable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from .._errors import InvalidNameError, KspecTypeError, ReservedNameError, SpecError, about_kernel
from ..render import Specialization  # lazy: no Jinja
from ..runtime import DeviceArray, get_device, stream_handle
from .callpath import CallPath, MISS, RESULT_NONE, RESULT_ONE, RESULT_TUPLE
from .records import (
    notify, observers, raw_layouts_of, RecordedCalls, spec_digest, SPEC_KERNELS, specialization_of, UNKEYED,
)
from ..compiler import compile_program, rendered_module
from .binaries import interface_of, loaded_kernel
from ._cupy_attributes import KernelAttributes
from . import _pickling
from ._planner_view import PlannerView
from .planning import PlanTuned

if TYPE_CHECKING:  # the serving path never imports the spec models, the renderer or the compiler
    from ..spec import ElementwiseSpec, ReductionSpec
    from .planning import ArraySpec, Bound, LaunchPlan


class SpecKernel(PlanTuned, KernelAttributes, RecordedCalls):
    """Base of ElementwiseKernel and ReductionKernel: a spec, CuPy's attributes (kspec/kernels/_cupy_attributes.py),
    arity, pickling, streams.

    Subclasses set ``SPEC`` (the spec model class) and implement ``__call__`` (through ``self._calls``) and
    ``_plan_call``.
    """

    SPEC: type[ElementwiseSpec] | type[ReductionSpec]  # a SpecClass: the model is imported on first access
    KIND: str  # "elementwise" or "reduction"
    # CuPy's argument rules (kspec/kernels/planning/_binding.py): kernels from the CuPy-style constructors bind as CuPy
    # does; those of spec files, generated modules and kspec.fuse keep the typed path's stricter rules.
    _cupy_rules = False
    _SHARED = ("_binaries", "_spec", "_key", "_nin", "_nout", "_calls", "_cupy_rules", "_used")  # what _adopt takes

    def _adopt(self, arguments: tuple[Any, ...] | None) -> Any:
        """Take the state an identical constructor call built (kspec/kernels/records/_constructor_memo.py): None when done,
        else the key under which :meth:`_built` remembers this call (``UNKEYED`` for arguments that cannot
        be one, or None given)."""
        key, state = SPEC_KERNELS.find(arguments)
        if state is None:
            return key if key is not None else UNKEYED
        self.__dict__.update(state)
        return None

    def _built(self, key: Any, build: Callable[[], Any]) -> None:
        """Set up a constructor call's kernel (CuPy's rules) and remember it for identical calls. ``build``
        makes (and checks) its spec: now, unless an earlier process recorded calls of these exact arguments
        (kspec/kernels/records/_call_store.py), which proves them valid; then on first need (:meth:`__getattr__`),
        and a call the record holds never needs it."""
        records = self._constructor_records(key)
        arity = records.arity_of() if records is not None else None
        if records is not None and arity is not None:
            self._binaries: Any = None
            self._lazy_spec, (self._nin, self._nout) = build, arity
            self._start_calls()
            self._call_records_ = records
        else:
            self._setup(build())
            if observers:
                notify("constructed", self._key)
        self._cupy_rules = True
        if key is not UNKEYED:
            self._ctor_key = key
            shared = self._SHARED if arity is None else (*(n for n in self._SHARED if n not in ("_spec", "_key")),
                                                            *self._LAZY_STATE)  # fmt: skip
            SPEC_KERNELS.put(key, {name: self.__dict__[name] for name in shared})

    def _build_spec(self, texts: dict[str, Any], fields: dict[str, Any], grad: Any = None) -> Any:
        """The spec of a constructor call: its text arguments must be str (TypeError naming the argument).
        ``grad``: the constructor's ``grad=`` (the spec model checks it, the plain path does not take it).

        A plain spec when kspec.spec proves the fields valid without Pydantic (a cold first call then imports
        none; ``spec`` validates it lazily), else the model, which raises the SpecError."""
        for what, value in texts.items():
            if not isinstance(value, str):
                raise KspecTypeError(f"{what}: expected a str, got {type(value).__name__}")
        if grad is not None:
            fields["grad"] = dict(grad) if isinstance(grad, Mapping) else grad
        options = fields.get("options", ())
        fields["options"] = (options,) if isinstance(options, str) else tuple(options)
        from ..spec import plain_from_fields

        plain = plain_from_fields(self.KIND, {**texts, **fields})
        if plain is not None:
            return plain
        try:
            return type(self).SPEC(**texts, **fields)
        except SpecError as exc:
            raise _with_cupy_phrase(exc, texts) from None

    @classmethod
    def from_spec(cls, spec: Any, *, binaries: Any = None) -> Any:
        """The callable of a spec (from a spec file or built in Python). ``binaries``: a directory written by
        ``kspec build`` (or a :class:`BinaryStore`) to load precompiled binaries from before compiling."""
        if not isinstance(spec, cls.SPEC):
            raise KspecTypeError(f"spec: expected a {cls.SPEC.__name__}, got {type(spec).__name__}")
        kernel = object.__new__(cls)
        kernel._setup(spec, binaries)
        return kernel

    @classmethod
    def from_plain(cls, spec: Any, *, binaries: Any = None) -> Any:
        """The callable of a :class:`kspec.spec.PlainSpec` (a generated module's table, validated when it was
        written): no Pydantic until something must be rendered or the spec model is asked for."""
        if spec.KIND != cls.KIND:
            raise KspecTypeError(f"spec: expected a {cls.KIND} spec, got a {spec.KIND} one")
        kernel = object.__new__(cls)
        kernel._setup(spec, binaries)
        return kernel

    def _setup(self, spec: Any, binaries: Any = None) -> None:
        from .binaries import binary_store

        self._binaries = binary_store(binaries)
        self._spec = spec
        self._key = spec_digest(spec)
        self._nin = len(spec.in_params)
        self._nout = len(spec.out_params)
        self._start_calls()

    def _start_calls(self) -> None:
        # every call goes through it (kspec/kernels/callpath/_call_path.py); a call record may serve a first call
        self._calls = CallPath(self._plan_call, self._traced_call, (self._recall, self._remember))
        self._used: dict[Any, Specialization | None] = {}  # the specializations calls used (_cached_codes)

    def _plan_call(self, args: tuple[Any, ...], stream: object, extra: Any) -> Any:
        """The kernel's planner: ``(PreparedCall, pointers)`` of a call (kspec/kernels/planning/_planner.py)."""
        raise NotImplementedError

    def _traced_call(self, framework: Any, args: tuple[Any, ...], stream: object, extra: Any, concrete: bool) -> Any:
        """A call on another framework's tracers, or eagerly on its arrays (``concrete``; kspec/kernels/callpath/_frameworks.py):
        its adapter runs it with the keywords the call gave (``extra`` as the call path holds them), e.g.
        ``kspec.jax.call(self, ...)``. A concrete call with a launch size, or with outputs given that are not all
        the framework's arrays (a NumPy ``out`` keeps CuPy's in-place contract), is left to the launch path (MISS).
        Outputs given as JAX arrays go to the adapter, which returns new arrays: JAX arrays are immutable (the
        launch path refuses to write one)."""
        kwargs = self._call_keywords(extra)
        if concrete:
            out = kwargs.get("out")
            given = (*args[self._nin:], *(() if out is None else out if isinstance(out, tuple) else (out,)))
            if "size" in kwargs or "block_size" in kwargs or not all(framework.is_array(o) for o in given):
                return MISS
        if stream is not None:  # the adapter says what it makes of a stream (kspec.jax refuses one)
            kwargs["stream"] = stream
        return framework.call(self, args, kwargs)

    def _call_keywords(self, extra: Any) -> dict[str, Any]:
        """The call's keywords from the call path's ``extra`` (None: none given)."""
        raise NotImplementedError

    def _result_items(self, nargs: int) -> tuple[int, tuple[int, ...]]:
        """What a prepared call's launch returns (kspec/kernels/callpath/_launch_code.py's :data:`Result`), for ``nargs``
        arguments: the outputs given as arguments, else the allocated ones (in the outputs' order); one output
        as itself (unless ``return_tuple``), several as a tuple; None with ``no_return``."""
        if getattr(self._spec, "no_return", False):
            return (RESULT_NONE, ())
        given = nargs == self._nin + self._nout
        items = tuple(self._nin + j if given else -1 - j for j in range(self._nout))
        if len(items) == 1 and not getattr(self._spec, "return_tuple", False):
            return (RESULT_ONE, items)
        return (RESULT_TUPLE, items)

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return _pickling.reduce_spec_kernel(self)

    def __repr__(self) -> str:
        return f"<kspec.{type(self).__name__} {self.name!r}>"

    @property
    def spec(self) -> Any:
        """The spec model (a kernel made from a plain spec validates its table here, once)."""
        spec = self._spec
        if hasattr(spec, "validated"):
            spec = self._spec = spec.validated()  # same table, same keys: memoised specializations stay valid
        return spec

    @property
    def spec_digest(self) -> str:
        """SHA-256 (hex) of the spec's content: the same for the same spec in every process."""
        return self._key

    @property
    def binaries(self) -> Any:
        """The BinaryStore (precompiled binaries) this kernel is served from, or None; a kernel built beside it
        (kspec.grad's gradient sums) is served from it too."""
        return self._binaries

    def _backward_with(self, elementwise: Any, shared: bool = False) -> Any:
        """The kernel (of class ``elementwise``) of this spec's backward (its ``grad``; kspec.grad uses it), or of
        its ``shared`` variant, served from the same precompiled binaries; each made once."""
        slot = "_backward_shared" if shared else "_backward"
        backward = self.__dict__.get(slot)
        if backward is None:
            backward = elementwise.from_spec(self.spec.backward_spec(shared), binaries=self._binaries)
            setattr(self, slot, backward)
        return backward

    def _row_sum_with(self, elementwise: Any, summed: tuple[str, ...]) -> Any:
        """The kernel of the backward's row-sum variant summing the gradients of ``summed``
        (kspec/spec/_row_sums.py), served from the same precompiled binaries; each made once."""
        made = self.__dict__.setdefault("_row_sums", {})
        kernel = made.get(summed)
        if kernel is None:
            kernel = made[summed] = elementwise.from_spec(self.spec.row_sum_spec(summed), binaries=self._binaries)
        return kernel

    def _split_args(self, args: tuple[Any, ...], kwargs: Mapping[str, Any], accepted: str) -> tuple[Sequence[Any], Sequence[Any] | None]:
        """(inputs, outputs or None) of a call; TypeErrors for a stray keyword or a wrong argument count."""
        if kwargs:
            bad = next(iter(kwargs))
            raise KspecTypeError(
                f"Wrong arguments {dict(kwargs)}: kernel '{self.name}': unexpected keyword argument {bad!r} "
                f"({type(self).__name__} takes {accepted})"
            )
        n = len(args)
        if n != self._nin and n != self._nin + self._nout:
            # CuPy's phrase first (ElementwiseKernel's wording; ReductionKernel's is its prefix without quotes)
            name = repr(self.name) if self.KIND == "elementwise" else self.name
            raise KspecTypeError(
                f"Wrong number of arguments for {name}. It must be either {self._nin} or "
                f"{self._nin + self._nout} (with outputs), but given {n}. kernel '{self.name}' takes "
                f"{self._nin} arguments (inputs) or {self._nin + self._nout} (inputs and outputs), got {n}"
            )
        return args[: self._nin], (args[self._nin :] if n > self._nin else None)

    def _specializer(self, bound: Bound, used: bool = True) -> Specialization:
        """The specialization of a bound call. The CuPy-style constructors' kernels fix each raw array's rank and
        contiguity as CuPy does (kspec::RankedView: measured on an H100, 1.5x faster ndimage filters); spec
        files keep one module for every raw layout, so that a wheel's precompiled binaries serve every call."""
        layouts = raw_layouts_of(bound) if self._cupy_rules else ()
        scalars = frozenset(bound.scalars)
        found = specialization_of(self._spec, self._key, bound.types, scalars, layouts, self._binaries is not None)
        key = (tuple(bound.types.items()), scalars, layouts)
        if used:
            self._used[key] = found
            self._last_used = key  # what the call record of this plan files under _cached_codes
        return found

    @property
    def _cached_codes(self) -> MappingProxyType[Any, Specialization]:
        """CuPy's per-kernel record of the code its calls built (its tests count it): one entry per
        specialization a call planned. CuPy keys it by argument types; kspec's drop-in kernels also by each raw
        array's rank and contiguity, as their code differs by them. Read-only."""
        used = self._used
        for key, found in list(used.items()):
            if found is None:  # a call record's: made now (kspec/kernels/records/_call_store.py)
                types, scalars, layouts = key
                used[key] = specialization_of(self._spec, self._key, dict(types), scalars, layouts,
                                              self._binaries is not None)
        return MappingProxyType(used)

    # -- planning a call of arrays without memory (torch.compile, jax.jit): kspec/kernels/planning/_abstract_plan.py ---

    def output_specs(self, *args: Any, **kwargs: Any) -> tuple[ArraySpec, ...]:
        """The outputs of a call, one :class:`ArraySpec` per output parameter in order (a given output as
        given, an allocated one C-contiguous): ``args`` as for a call with each array an ArraySpec (scalars
        stay values, their Python type counting as in a call), ``kwargs`` the call's keywords but ``stream``.
        The call's binding and planning, with its errors; compiles, loads and allocates nothing, and needs
        no GPU."""
        from .planning import output_specs_of

        bound, out_shape, _plan = self._abstract_plan(args, dict(kwargs), launch=False)
        return output_specs_of(PlannerView(self), bound, out_shape)

    def plan_launch(self, *args: Any, **kwargs: Any) -> LaunchPlan:
        """What a call with these arguments (as for :meth:`output_specs`) launches: the :class:`LaunchPlan`,
        its binary compiled or loaded for the ArraySpecs' device as a call would; launches and allocates
        nothing."""
        from .planning import launch_plan_of

        bound, out_shape, plan = self._abstract_plan(args, dict(kwargs), launch=True)
        return launch_plan_of(PlannerView(self), bound, out_shape, plan)

    def _abstract_plan(self, args: tuple[Any, ...], kwargs: dict[str, Any],
                       launch: bool) -> tuple[Any, tuple[int, ...], Any]:  # fmt: skip
        """(bound arguments, output shape, plan) of a call of ArraySpecs; ``launch``: plan the launch too."""
        raise NotImplementedError

    def _abstract_steps(self, plan: Any, device_id: int) -> tuple[list[Any], int]:
        """The launches of a plan on a device, its specialization loaded there, and their workspace bytes."""
        raise NotImplementedError

    # -- inspecting: the generated source and the compile log (no launch) ---------------------------------

    def specialization(self, *args: Any) -> Specialization:
        """The specialization a call with ``args`` uses (inputs, or inputs and outputs). NumPy arrays stand in
        for device arrays (only dtype and ndim are read), so this needs no GPU; scalars are scalars."""
        from .planning import bind, texture_handles

        args, textures = texture_handles(tuple(_stand_in(a) for a in args), self._spec)
        inputs, outputs = self._split_args(args, {}, "")
        bound = bind(self._spec, inputs, outputs, textures, cupy_rules=self._cupy_rules)
        return self._specializer(bound, used=False)  # inspecting is not a call: not in _cached_codes

    def source(self, *args: Any) -> str:
        """The CUDA C++ a call with ``args`` compiles (NumPy stand-ins accepted; no GPU needed)."""
        return rendered_module(self.specialization(*args)).source

    def compile(self, *args: Any, log_stream: IO[str] | None = None, arch: str | None = None) -> None:
        """Compile the specialization of a call with ``args`` now and write NVRTC's log to ``log_stream``.

        With ``arch`` (``'sm_90'``...) it only compiles (behind the binary cache), which needs no GPU; without
        it, it compiles for the current device and loads the module there, so the first call only launches.
        """
        from ..compiler import explicit_compiles

        specialization = self.specialization(*args)
        logs: list[str] = []
        with explicit_compiles():  # asked for: allowed whatever the compile policy (kspec.compile_policy)
            if arch is None:
                loaded = loaded_kernel(specialization, get_device().id, self._binaries)
                for variant in loaded.interface.variants:
                    loaded.function(variant)
                arch = loaded.device.arch
            for expression in interface_of(specialization).variants.values():  # the entries calls look up
                log = compile_program(specialization, arch, self._binaries, (expression,)).log
                if log and log not in logs:
                    logs.append(log)
        if log_stream is not None:
            for log in logs:
                log_stream.write(log if log.endswith("\n") else log + "\n")

    def _check_stream(self, stream: object) -> None:
        """A KspecTypeError naming the kernel for a ``stream=`` that is not a stream (before anything compiles)."""
        if stream is not None:
            try:
                stream_handle(stream)
            except KspecTypeError as exc:
                raise KspecTypeError(about_kernel(self.name, str(exc))) from None


class SpecClass:
    """``SPEC`` of a kernel class: the spec model, imported from kspec.spec on first access (Pydantic stays
    unloaded in a process that only serves kernels of generated modules)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        from .. import spec

        return getattr(spec, self._name)


def _stand_in(obj: Any) -> Any:
    """A NumPy array as a pointer-less kspec array of its dtype and shape (for source/compile only)."""
    if isinstance(obj, np.ndarray):
        # DeviceArray's private constructor: no public one takes strides (allow-listed in tests/project_tests/test_layers.py)
        return DeviceArray._wrap(0, obj.shape, obj.dtype, 0, None, strides=obj.strides)
    return obj


def _with_cupy_phrase(exc: SpecError, texts: dict[str, Any]) -> SpecError:
    """A constructor's spec error whose message starts with CuPy's phrase for it, where CuPy has one (tests
    written for CuPy match it); kspec's located message follows."""
    if isinstance(exc, InvalidNameError) and exc.field == "name":
        lead = f'Invalid kernel name: "{texts["name"]}": '
    elif isinstance(exc, ReservedNameError) and "'i'" in exc.message:
        lead = "Can not use 'i' as a parameter name: "
    else:
        return exc
    return type(exc)(lead + str(exc))


_rebuild = _pickling.rebuild  # the name pickles of earlier versions call


def grad_key(grad: Any) -> Any:
    """A constructor's ``grad=`` in its memo key: a table as its items (a dict is not hashable)."""
    return (dict, *grad.items()) if isinstance(grad, Mapping) else grad
