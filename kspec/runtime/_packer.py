"""The packer of one raw-kernel signature: Python source written for it, compiled once, called per launch.

A packer reads each argument's pointer or value (:mod:`._launch_args` says which), picks the stream, writes
every value into its pre-allocated parameter buffer with one ``struct.pack_into`` and calls the driver's
``cuLaunchKernel``: from C where kspec's compiled call path is loaded (kspec/runtime/_fastcall.py's
``launch_kernel``, taking the function and stream as ints), else cuda.bindings', or the host driver's on the
CPU device. Its fast path has no call that
the signature does not need; errors leave through branches that call out (the messages in
:mod:`._launch_args`, :func:`._launch.relaunch_or_raise`).

The packer knows its kernel's launcher only as a :class:`PackerOwner` (what it calls on it), so this module
does not import :mod:`._launcher`, which imports it.
"""

from __future__ import annotations

import struct
import sys
import threading
from collections.abc import Callable
from typing import Any, Protocol

from . import _device_kind, _driver, _fastcall, _interop, _launch
from ._device_kind import HOST_DEVICE_ID
from . import _stream as _stream_module
from ._device import Device, current_device_id
from ._generic import DEVICE_ACCESSIBLE
from ._cupy_layout import prepare_cupy_layout
from ._launch_args import (
    _Arg,
    _bad_launch_value,
    _bad_scalar,
    _bf16_bits,
    _cai_pointer,
    _dlpack_view,
    _host_dlpack,
    _host_tensor,
    _mismatched_devices,
    dim3,
)
from ._stream import cu_stream, default_stream_getter, order_after, stream_handle
from .host import note as checked_note, state as checked_state  # the CPU device's checked mode
from .._generated_code import compiled, note_source, sources_watched


class PackerOwner(Protocol):
    """What a packer uses of its kernel's launcher (:class:`._launcher.Launcher` is one)."""

    name: str
    cooperative: bool

    def function(self, device_id: int, stream: int | None = None) -> Any: ...

    def check_params(self, device_id: int, specs: list[_Arg]) -> None: ...

    def check_cooperative(self, device_id: int, grid: tuple[int, int, int], block: tuple[int, int, int], shared_mem: int) -> None: ...

    def failed(self, err: int, device_id: int, grid: tuple[int, int, int], block: tuple[int, int, int], shared_mem: int, stream: int) -> Exception: ...

    def launch(self, grid: object, block: object, args: Any, shared_mem: int = 0, stream: object = None) -> None: ...


def _activate(device_id: int) -> None:
    Device(device_id).activate()


def _parameter_buffer(specs: list[_Arg]) -> tuple[str, Any, Any]:
    """(struct format, buffer, ``void*[]`` of the slots' addresses): one 8-byte slot per argument (16 for
    complex128), zero-padded so a narrower value reads back zero-extended."""
    import ctypes

    offsets, fmt, total = [], "<", 0
    for spec in specs:
        slot = 16 if spec.size == 16 else 8
        offsets.append(total)
        fmt += spec.fmt + ("x" * (slot - struct.calcsize("<" + spec.fmt)))
        total += slot
    buffer = (ctypes.c_char * max(total, 8))()
    base = ctypes.addressof(buffer)
    pointers = (ctypes.c_void_p * max(len(specs), 1))(*[base + off for off in offsets])
    return fmt, buffer, pointers


def _read_arguments(specs: list[_Arg], multi: bool, w: Callable[[str], None]) -> tuple[list[str], list[str], list[str]]:
    """Write the lines that read each argument; return (value expressions, device expressions, lines that
    need the stream: CAI producers' streams, DLPack exports)."""
    values: list[str] = []
    device_exprs: list[str] = []
    deferred: list[str] = []
    for i, spec in enumerate(specs):
        a = f"a{i}"
        if spec.kind == _interop.KSPEC:
            values.append(f"{a}._ptr")
            if multi:
                device_exprs.append(f"{a}._device_id")
        elif spec.kind == _interop.CUPY:
            w(f"    m{i} = {a}.data")
            values.append(f"m{i}.ptr")
            if multi:
                device_exprs.append(f"m{i}.device_id")
        elif spec.kind == _interop.TORCH:
            values.append(f"{a}.data_ptr()")
            if multi:
                w(f"    d{i} = {a}.get_device()")
                w(f"    if d{i} < 0: raise _host_tensor(_name, {i}, {a})")
                device_exprs.append(f"d{i}")
            else:
                w(f"    if not {a}.is_cuda: raise _host_tensor(_name, {i}, {a})")
        elif spec.kind == _interop.CAI:
            w(f"    p{i}, cs{i} = _cai({a})")
            values.append(f"p{i}")
            if multi:
                device_exprs.append(f"_ptr_device(p{i})")
            deferred.append(f"    if cs{i} is not None and _norm_stream(cs{i}) != s: _order(_norm_stream(cs{i}), s)")
        elif spec.kind == _interop.DLPACK:
            w(f"    t{i}, d{i} = {a}.__dlpack_device__()")
            w(f"    if t{i} not in _accessible: raise _host_dlpack(_name, {i}, {a}, t{i})")
            if multi:
                device_exprs.append(f"d{i}")
            deferred.append(f"    v{i} = _dlpack_view({a}, s)")
            values.append(f"v{i}.ptr")
        elif spec.kind == _interop.HOST:  # a NumPy array on the CPU device (classify_args accepted it)
            values.append(f"{a}.ctypes.data")
        elif spec.kind == "none":
            values.append("0")
        elif spec.kind == "handle":
            values.append(f"{a}.ptr")
        elif spec.kind == "struct":  # the driver copies the struct from the object's own memory (held by args)
            w(f"    _keep[{i}] = {a}.ptr")
        elif spec.kind == "complex":
            values.extend([f"{a}.real", f"{a}.imag"])
        elif spec.kind == "bf16":
            values.append(f"_bf16({a})")
        else:  # int, scalar
            values.append(a)
    return values, device_exprs, deferred


def _choose_stream(library: str | None, ns: dict[str, Any], w: Callable[[str], None], direct: bool) -> None:
    """Write the lines that set ``s`` (the stream handle) and ``hs`` (what the launch call takes for it: the
    handle itself for the compiled launch (``direct``), else a ``CUstream``, the conversions cached per handle)."""
    ns["_hs_cache"], ns["_to_hs"] = _stream_module._cu_streams, cu_stream
    # a `with kspec.Stream(...)` block open in this thread stands for stream= (one list read when none is)
    ns["_entered"], ns["_current_stream"] = _stream_module._entered, _stream_module.current_stream
    w("    if stream is None and _entered[0]:")
    w("        stream = _current_stream()")
    w("    if stream is None:")
    if library == _interop.CUPY:
        # CuPy's current stream of the arrays' device (a Python call into CuPy's thread-local state).
        ns["_cupy_current"] = sys.modules["cupy"].cuda.get_current_stream
        w("        s = _cupy_current(dev).ptr")
    elif library == _interop.TORCH:
        ns["_torch_current"] = default_stream_getter(_interop.TORCH)
        w("        s = _torch_current(dev)")
    else:
        w("        s = 0")
    if direct:
        w("    else:")
        w("        s = _stream_handle(stream)")
        w("    hs = s")
        return
    if library:
        w("        hs = _hs_cache.get(s)")
        w("        if hs is None:")
        w("            hs = _to_hs(s)")
    else:
        w("        hs = _hs0")
    w("    else:")
    w("        s = _stream_handle(stream)")
    w("        hs = _hs_cache.get(s)")
    w("        if hs is None:")
    w("            hs = _to_hs(s)")


def generate_packer(launcher: PackerOwner, specs: list[_Arg], types: tuple[type, ...]) -> Callable[..., None]:
    """Write, compile and return the packer for one signature (see :mod:`._launcher`)."""
    import ctypes

    cu = _driver.driver()
    host = _device_kind.host_active  # the CPU device: its driver answers the launch
    multi = _driver.initialized_device_count() > 1 and not host
    fmt, buffer, pointers = _parameter_buffer(specs)
    params_address = ctypes.addressof(pointers)
    library = next((spec.kind for spec in specs if spec.kind in (_interop.CUPY, _interop.TORCH)), None)
    # the compiled call path's launch (ints in: the function, the stream handle) where it serves this driver
    fastcall = None if host or launcher.cooperative else _fastcall.fastcall_module()
    direct = _fastcall.direct_launch_address(cu.cuLaunchKernel) if fastcall is not None else 0

    ns: dict[str, Any] = {
        "_launcher": launcher,
        "_name": launcher.name,
        "_specs": specs,
        "_pack": struct.Struct(fmt).pack_into,
        "_buf": buffer,
        "_keep": pointers,
        "_params": params_address,
        "_StructError": struct.error,
        "_dim3": dim3,
        "_default_stream": default_stream_getter(library),
        "_stream_handle": stream_handle,
        "_current_device": current_device_id,
        "_mismatch": _mismatched_devices,
        "_host_tensor": _host_tensor,
        "_host_dlpack": _host_dlpack,
        "_bad_scalar": _bad_scalar,
        "_bad_launch_value": _bad_launch_value,
        "_cai": _cai_pointer,
        "_dlpack_view": _dlpack_view,
        "_ptr_device": _interop.pointer_device,
        "_order": order_after,
        "_norm_stream": _interop.normalize_protocol_stream,
        "_accessible": DEVICE_ACCESSIBLE,
        "_bf16": _bf16_bits,
        "_activate": _activate,
        "_relaunch_or_raise": _launch.relaunch_raw_or_raise,
        "_fs": {},
    }
    lines, body_start = _packer_lines(specs, ns, multi=multi, host=host, library=library, direct=bool(direct),
                                      cooperative=launcher.cooperative)

    # the function on this device, checked against the signature once per device
    def resolve(device_id: int, stream: int) -> Any:
        fn = launcher.function(device_id, stream)
        launcher.check_params(device_id, specs)
        if direct:
            fn = int(fn)
        ns["_fs"][device_id] = fn
        if not multi:
            ns["_f"] = fn
        return fn

    ns["_resolve"] = resolve
    ns["_f"] = None
    ns["_launch"] = cu.cuLaunchCooperativeKernel if launcher.cooperative else cu.cuLaunchKernel
    if direct:
        assert fastcall is not None
        fastcall.set_raw_launch(direct)
        ns["_launch"] = fastcall.launch_kernel
    ns["_hs0"] = cu_stream(0)
    if direct and sources_watched():  # a capture: the packer a process without the compiled call path compiles
        other, other_start = _packer_lines(specs, {}, multi=multi, host=host, library=library, direct=False,
                                           cooperative=launcher.cooperative)
        note_source(_packer_source(other, other_start, len(types), host), "raw-kernel launch")
    packer = _compile_packer(launcher, lines, body_start, types, ns)
    packer.native = _native_call(fastcall, launcher, specs, types, library, resolve, packer) if direct and not multi else None  # type: ignore[attr-defined]
    return packer


def _packer_lines(specs: list[_Arg], ns: dict[str, Any], *, multi: bool, host: bool, library: str | None, direct: bool,
                  cooperative: bool) -> tuple[list[str], int]:  # fmt: skip
    """The lines of a packer's body and where they start after the arguments' unpacking; what they read that
    depends on the choices is put in ``ns``."""
    lines: list[str] = []
    w = lines.append
    n = len(specs)
    if n == 1:
        w("    a0, = args")
    elif n:
        w(f"    {', '.join(f'a{i}' for i in range(n))} = args")
    body_start = len(lines)

    # 1. pointers and devices
    values, device_exprs, deferred = _read_arguments(specs, multi, w)
    if multi and device_exprs:
        w(f"    dev = {device_exprs[0]}")
        for expr in device_exprs[1:]:
            w(f"    if {expr} != dev: raise _mismatch(_name, args)")
    elif multi:
        w("    dev = _current_device()")
    else:
        w(f"    dev = {HOST_DEVICE_ID if host else 0}")

    # NumPy arguments on the CPU device: a checked launch copies them next to guard pages (host/_checked.py)
    host_arrays = [f"a{i}" for i, spec in enumerate(specs) if spec.kind == _interop.HOST]
    if host and host_arrays:
        ns["_checked"], ns["_note"] = checked_state, checked_note
        w(f"    if _checked[0]: _note(({', '.join(host_arrays)},))")

    # 2. stream
    _choose_stream(library, ns, w, direct)
    lines.extend(deferred)

    # 3. values
    if values:
        w("    try:")
        w(f"        _pack(_buf, 0, {', '.join(values)})")
        w("    except (_StructError, OverflowError):")
        w("        raise _bad_scalar(_name, args, _specs) from None")

    # 4. dims
    for var, prefix in (("grid", "g"), ("block", "b")):
        w(f"    if type({var}) is tuple and len({var}) == 1:")
        w(f"        {prefix}x = {var}[0]; {prefix}y = {prefix}z = 1")
        w(f"    elif type({var}) is int:")
        w(f"        {prefix}x = {var}; {prefix}y = {prefix}z = 1")
        w("    else:")
        w(f"        {prefix}x, {prefix}y, {prefix}z = _dim3({var}, '{var}')")

    # 5. the function on this device (_resolve: checked against the signature once per device)
    if multi:
        w("    f = _fs.get(dev)")
        w("    if f is None:")
        w("        f = _resolve(dev, s)")
        w("    _activate(dev)")
    else:
        w("    f = _f")
        w("    if f is None:")
        w("        f = _resolve(dev, s)")
    if cooperative:
        w("    _launcher.check_cooperative(dev, (gx, gy, gz), (bx, by, bz), shared_mem)")

    # 6. launch; a non-zero status goes to the one error branch every launch shares
    call_args = "f, gx, gy, gz, bx, by, bz, shared_mem, hs, _params" + ("" if cooperative else ", 0")
    w("    try:")
    w(f"        err, = _launch({call_args})")
    w("    except (TypeError, OverflowError) as exc:")
    w("        raise _bad_launch_value(_name, exc, grid, block, shared_mem) from None")
    w("    if err:")
    w(f"        _relaunch_or_raise(err, dev, _launch, ({call_args}),")
    w("                           lambda e: _launcher.failed(int(e), dev, (gx, gy, gz), (bx, by, bz), shared_mem, s))")
    return lines, body_start


_RAW_KINDS = {_interop.CUPY: 1, _interop.TORCH: 2, _interop.KSPEC: 3, "none": 4, "handle": 5, "int": 0, "scalar": 0}


def _native_call(fastcall: Any, launcher: PackerOwner, specs: list[_Arg], types: tuple[type, ...], library: str | None,
                 resolve: Callable[[int, int], Any], packer: Any) -> Any:  # fmt: skip
    """The packer's method in C (kspec/_fastcall_c/'s RawCall) for the calling thread, or None where an
    argument needs what only the Python packer does (CAI and DLPack inputs, complex and bfloat16 values)."""
    kinds = [_RAW_KINDS.get(spec.kind) for spec in specs]
    if None in kinds or any(spec.kind in ("int", "scalar") and len(spec.fmt) != 1 for spec in specs):
        return None
    formats = "".join(spec.fmt if spec.kind in ("int", "scalar") else "P" for spec in specs)
    stream_of: Any = None
    attribute = None
    if library == _interop.CUPY:
        stream_of, attribute = sys.modules["cupy"].cuda.get_current_stream, "ptr"
        prepare_cupy_layout()  # pointers and the stream read as CuPy's Cython code reads them, where that holds
    elif library == _interop.TORCH:
        stream_of = default_stream_getter(_interop.TORCH)
    return fastcall.raw_call(tuple(types), tuple(kinds), formats, launcher.launch, packer.body, resolve,
                             _stream_module._entered, _stream_module.current_stream, stream_of, attribute,
                             stream_handle, _device_kind, _device_kind.host_active)  # fmt: skip


def _compile_packer(
    launcher: PackerOwner, lines: list[str], body_start: int, types: tuple[type, ...], ns: dict[str, Any]
) -> Callable[..., None]:
    """``method`` becomes the kernel's own __call__ (Launcher's ``install``): it checks the thread and the
    argument types (a few ``is`` tests, cheaper than building a key tuple) and sends anything else to the
    launcher's general launch. ``body`` is the same without the checks, for that general path."""
    thread = threading.get_ident()
    for i, tp in enumerate(types):
        ns[f"_T{i}"] = tp
    ns["_miss"] = launcher.launch
    ns["_get_ident"], ns["_THREAD"] = threading.get_ident, thread
    ns["_kind"] = _device_kind
    source = _packer_source(lines, body_start, len(types), _device_kind.host_active)
    exec(compiled(source, "raw-kernel launch"), ns)  # the same source for every kernel of one signature: compiled once
    packer = ns["method"]
    packer.body = ns["body"]
    packer.thread = thread
    packer.source = source  # for debugging: print(next(iter(kernel._launcher.packers().values())).source)
    return packer


def _packer_source(lines: list[str], body_start: int, n: int, host: bool) -> str:
    """The source of ``method`` (the guarded fast path) and ``body`` (see :func:`_compile_packer`). The thread is the
    namespace's, not the source's: the source (the key of its compiled code, kept on disk across processes and
    shipped in builds: kspec/_generated_code.py) must be the same in every process."""
    guard = ["def method(self, grid, block, args, *, shared_mem=0, stream=None):"]
    guard.append(f"    if _get_ident() != _THREAD or type(args) is not tuple or len(args) != {n} or _kind.host_active is not {host}:")
    guard.append("        return _miss(grid, block, args, shared_mem, stream)")
    guard.extend(lines[:body_start])
    if n:
        checks = " or ".join(f"type(a{i}) is not _T{i}" for i in range(n))
        guard.append(f"    if {checks}:")
        guard.append("        return _miss(grid, block, args, shared_mem, stream)")
    guard.extend(lines[body_start:])
    body = ["def body(grid, block, args, shared_mem, stream):", *lines]
    return "\n".join(guard) + "\n\n" + "\n".join(body) + "\n"
