"""The FFI handler written in Python (ctypes callbacks): the fallback where no host C++ compiler exists.

Same ABI, same attributes and the same checks as ``_handler.cc`` (see kspec/jax/_library.py for when it is
used): XLA calls it through a C function pointer, it reads the XLA FFI call frame with ctypes
(``xla/ffi/api/c_api.h``: the structs below mirror it), writes the buffers into each step's parameter buffer
and launches (cuLaunchKernel on XLA's stream, or the CPU device's entry). Each call takes the GIL and costs
tens of microseconds of host time; an exception never crosses into XLA: it becomes an FFI error.
"""

from __future__ import annotations

import ctypes as C
import secrets
import struct
import threading
from typing import Any

from ._describe import KIND_CUDA, KIND_HOST, Description

_METADATA_EXTENSION = 1
_EXECUTE = 3
_ATTR_SCALAR = 3
_S64 = 5
_INVALID_ARGUMENT, _OUT_OF_RANGE, _FAILED_PRECONDITION, _INTERNAL = 3, 11, 9, 13
_FFI_API_VERSION = (0, 1)  # the FFI API this file was written against: what XLA's metadata query is told


class _ExtBase(C.Structure):
    pass


_ExtBase._fields_ = [("struct_size", C.c_size_t), ("type", C.c_int), ("next", C.POINTER(_ExtBase))]


class _ApiVersion(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("extension_start", C.c_void_p), ("major_version", C.c_int),
                ("minor_version", C.c_int)]  # fmt: skip


class _Metadata(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("api_version", _ApiVersion), ("traits", C.c_uint32)]


class _MetadataExt(C.Structure):
    _fields_ = [("extension_base", _ExtBase), ("metadata", C.POINTER(_Metadata))]


class _List(C.Structure):  # XLA_FFI_Args and XLA_FFI_Rets
    _fields_ = [("struct_size", C.c_size_t), ("extension_start", C.c_void_p), ("size", C.c_int64),
                ("types", C.POINTER(C.c_int)), ("items", C.POINTER(C.c_void_p))]  # fmt: skip


class _ByteSpan(C.Structure):
    _fields_ = [("ptr", C.c_void_p), ("len", C.c_size_t)]


class _Attrs(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("extension_start", C.c_void_p), ("size", C.c_int64),
                ("types", C.POINTER(C.c_int)), ("names", C.POINTER(C.POINTER(_ByteSpan))),
                ("attrs", C.POINTER(C.c_void_p))]  # fmt: skip


class _Scalar(C.Structure):
    _fields_ = [("dtype", C.c_int), ("value", C.c_void_p)]


class _CallFrame(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("extension_start", C.POINTER(_ExtBase)), ("api", C.c_void_p),
                ("ctx", C.c_void_p), ("stage", C.c_int), ("args", _List), ("rets", _List), ("attrs", _Attrs),
                ("future", C.c_void_p)]  # fmt: skip


class _Buffer(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("extension_start", C.c_void_p), ("dtype", C.c_int),
                ("data", C.c_void_p), ("rank", C.c_int64), ("dims", C.POINTER(C.c_int64))]  # fmt: skip


_API_FUNCTIONS = ("Error_Create", "Error_GetMessage", "Error_Destroy", "Handler_Register", "Stream_Get",
                  "Type_Register", "ExecutionContext_Get", "State_Set", "State_Get", "DeviceMemory_Allocate",
                  "DeviceMemory_Free", "ThreadPool_Schedule", "ThreadPool_NumThreads", "Future_Create",
                  "Future_SetAvailable", "Future_SetError", "RunId_Get", "DeviceOrdinal_Get")  # fmt: skip


class _Api(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("extension_start", C.c_void_p), ("api_version", _ApiVersion),
                ("internal_api", C.c_void_p), *((name, C.c_void_p) for name in _API_FUNCTIONS)]  # fmt: skip


class _ErrorCreateArgs(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("extension_start", C.c_void_p), ("message", C.c_char_p),
                ("errc", C.c_int)]  # fmt: skip


class _ContextArgs(C.Structure):  # XLA_FFI_Stream_Get_Args and XLA_FFI_DeviceOrdinal_Get_Args
    _fields_ = [("struct_size", C.c_size_t), ("extension_start", C.c_void_p), ("ctx", C.c_void_p),
                ("value", C.c_void_p)]  # fmt: skip


class _HostLaunch(C.Structure):  # kspec_host_launch (templates/include_host/kspec_host/entry.h)
    _fields_ = [("grid", C.c_uint * 3), ("block", C.c_uint * 3), ("shared_bytes", C.c_ulonglong), ("threads", C.c_int)]


class _HostFault(C.Structure):  # kspec_host_fault
    _fields_ = [("code", C.c_int), ("message", C.c_char * 2048)]


_HANDLER = C.CFUNCTYPE(C.c_void_p, C.POINTER(_CallFrame))
_ERROR_CREATE = C.CFUNCTYPE(C.c_void_p, C.POINTER(_ErrorCreateArgs))
_CONTEXT_GET = C.CFUNCTYPE(C.c_void_p, C.POINTER(_ContextArgs))
_CU_LAUNCH = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_uint, C.c_uint, C.c_uint, C.c_uint, C.c_uint, C.c_uint, C.c_uint,
                         C.c_void_p, C.POINTER(C.c_void_p), C.c_void_p)  # fmt: skip
_CU_ERROR_TEXT = C.CFUNCTYPE(C.c_int, C.c_int, C.POINTER(C.c_char_p))
_HOST_ENTRY = C.CFUNCTYPE(C.c_int, C.POINTER(C.c_void_p), C.POINTER(_HostLaunch), C.POINTER(_HostFault))
_STREAM_ARGS_SIZE = C.sizeof(_ContextArgs)
_ORDINAL_ARGS_SIZE = _ContextArgs.value.offset + 4  # the int32 ordinal is its last field
_ORDINAL_END = _Api.DeviceOrdinal_Get.offset + C.sizeof(C.c_void_p)


class _Stale(Exception):
    pass


class PythonHandler:
    """The table of descriptions and the two ctypes handlers (CUDA, CPU device) that run them."""

    kind = "python"

    def __init__(self) -> None:
        self.process = secrets.randbits(62) + 1
        self._table: list[Description] = []
        self._lock = threading.Lock()
        self._callbacks = {"CUDA": _HANDLER(self._cuda), "cpu": _HANDLER(self._host)}  # kept alive: XLA holds them
        self._cu_launch: Any = None
        self._cu_text: tuple[Any, Any] | None = None
        self._cuda_traits = 0

    def register(self, description: Description) -> int:
        with self._lock:
            self._table.append(description)
            return len(self._table) - 1

    def capsule(self, platform: str) -> Any:
        import jax

        return jax.ffi.pycapsule(self._callbacks[platform])

    def set_cuda_traits(self, traits: int) -> None:
        self._cuda_traits = traits

    def set_cuda(self, launch: int, error_string: int, error_name: int) -> None:
        self._cu_text = (_CU_ERROR_TEXT(error_name), _CU_ERROR_TEXT(error_string))
        self._cu_launch = _CU_LAUNCH(launch)

    def _cuda(self, frame_p: Any) -> int | None:
        return self._run(frame_p, KIND_CUDA)

    def _host(self, frame_p: Any) -> int | None:
        return self._run(frame_p, KIND_HOST)

    def _run(self, frame_p: Any, kind: int) -> int | None:
        frame = frame_p.contents
        ext = frame.extension_start
        if ext and ext.contents.type == _METADATA_EXTENSION:  # at registration (XLA's api is not needed)
            metadata = C.cast(ext, C.POINTER(_MetadataExt)).contents.metadata.contents
            metadata.api_version.major_version, metadata.api_version.minor_version = _FFI_API_VERSION
            metadata.traits = self._cuda_traits if kind == KIND_CUDA else 0
            return None
        api = C.cast(frame.api, C.POINTER(_Api)).contents
        try:
            description = self._find(frame)
            if frame.stage != _EXECUTE:
                return None
            return self._execute(frame, api, description, kind)
        except _Stale as exc:
            return _error(api, _FAILED_PRECONDITION, str(exc))
        except Exception as exc:  # noqa: BLE001 - nothing may cross into XLA
            return _error(api, _INTERNAL, f"kspec: the Python FFI handler failed: {type(exc).__name__}: {exc}")

    def _find(self, frame: Any) -> Description:
        found = {}
        attrs = frame.attrs
        for i in range(attrs.size):
            span = attrs.names[i].contents
            name = C.string_at(span.ptr, span.len)
            if attrs.types[i] == _ATTR_SCALAR:
                scalar = C.cast(attrs.attrs[i], C.POINTER(_Scalar)).contents
                if scalar.dtype == _S64:
                    found[name] = C.cast(scalar.value, C.POINTER(C.c_int64)).contents.value
        index, process = found.get(b"kspec_launch"), found.get(b"kspec_process")
        if index is None or process is None:
            raise _Stale("kspec: the custom call has no kspec_launch / kspec_process attributes (int64): it was not "
                         "made by kspec.jax")  # fmt: skip
        if process != self.process or not 0 <= index < len(self._table):
            raise _Stale("kspec: this executable holds a kspec launch planned by another process (a serialized, "
                         "exported or cached executable from elsewhere); kspec plans its launches when JAX traces the "
                         "function, in the process that runs it: trace and compile it again here (the launch was not run)")  # fmt: skip
        return self._table[index]

    def _execute(self, frame: Any, api: Any, d: Description, kind: int) -> int | None:
        where = {KIND_CUDA: "a CUDA GPU", KIND_HOST: "the CPU"}
        if d.kind != kind:
            return _error(api, _FAILED_PRECONDITION, f"kspec: kernel '{d.name}' was planned for {where[d.kind]}, XLA "
                          f"runs it on {where[kind]}; plan it for the device the computation runs on (jax.default_device)")  # fmt: skip
        results = d.outputs + (1 if d.workspace else 0)
        if frame.args.size != d.inputs or frame.rets.size != results:
            return _error(api, _INVALID_ARGUMENT, f"kspec: kernel '{d.name}' was planned for {d.inputs} array "
                          f"argument(s) and {results} result(s), XLA passed {frame.args.size} and {frame.rets.size}")  # fmt: skip
        buffers = {0: [_data(frame.args.items[i]) for i in range(d.inputs)],
                   1: [_data(frame.rets.items[i]) for i in range(d.outputs)]}  # fmt: skip
        workspace = _data(frame.rets.items[results - 1]) if d.workspace else 0
        stream = None
        if kind == KIND_CUDA:
            if self._cu_launch is None:
                return _error(api, _FAILED_PRECONDITION, "kspec: the CUDA launch function was not set")
            if api.struct_size >= _ORDINAL_END and api.DeviceOrdinal_Get:
                args = _ContextArgs(_ORDINAL_ARGS_SIZE, None, frame.ctx, None)
                failed = _CONTEXT_GET(api.DeviceOrdinal_Get)(C.byref(args))
                if failed:
                    return int(failed)
                ordinal = C.c_int32.from_buffer(args, _ContextArgs.value.offset).value
                if ordinal != d.device:
                    return _error(api, _FAILED_PRECONDITION, f"kspec: kernel '{d.name}' was planned and loaded for "
                                  f"CUDA device {d.device}, XLA runs it on device {ordinal}; kspec plans for JAX's "
                                  "default device when it traces (jax.default_device)")  # fmt: skip
            args = _ContextArgs(_STREAM_ARGS_SIZE, None, frame.ctx, None)
            failed = _CONTEXT_GET(api.Stream_Get)(C.byref(args))
            if failed:
                return int(failed)
            stream = args.value
        for number, step in enumerate(d.steps, 1):
            params = C.create_string_buffer(step.params, len(step.params))
            for offset, role, index in step.pointers:
                pointer = workspace + index if role == 2 else buffers[role][index]
                struct.pack_into("<Q", params, offset, pointer)
            base = C.addressof(params)
            slots = (C.c_void_p * max(1, len(step.slot_offsets)))(*(base + s for s in step.slot_offsets))
            if kind == KIND_CUDA:
                result = self._cu_launch(step.function, step.grid, 1, 1, step.block, 1, 1, step.shared, stream, slots, None)
                if result:
                    return _error(api, _INTERNAL, f"kspec: launching kernel '{d.name}' (step {number} of "
                                  f"{len(d.steps)}, grid {step.grid}, block {step.block}, {step.shared} bytes of shared "
                                  f"memory) failed: {self._cuda_error(result)}")  # fmt: skip
            else:
                launch = _HostLaunch((C.c_uint * 3)(step.grid, 1, 1), (C.c_uint * 3)(step.block, 1, 1), step.shared,
                                     d.threads)  # fmt: skip
                fault = _HostFault()
                code = _HOST_ENTRY(step.function)(slots, C.byref(launch), C.byref(fault))
                if code:
                    message = fault.message.decode(errors="replace")
                    return _error(api, _OUT_OF_RANGE if code == 1 else _INTERNAL,
                                  f"kspec: kernel '{d.name}' faulted on the CPU device (code {code}): {message}")  # fmt: skip
        return None

    def _cuda_error(self, result: int) -> str:
        texts = []
        for getter in self._cu_text or ():
            text = C.c_char_p()
            getter(result, C.byref(text))
            texts.append((text.value or b"?").decode(errors="replace"))
        return f"{texts[0]} ({result}): {texts[1]}" if len(texts) == 2 else f"CUDA error {result}"


def _data(buffer: int) -> int:
    return int(C.cast(buffer, C.POINTER(_Buffer)).contents.data or 0)


def _error(api: Any, code: int, message: str) -> int | None:
    args = _ErrorCreateArgs(C.sizeof(_ErrorCreateArgs), None, message.encode(errors="replace"), code)
    result: int | None = _ERROR_CREATE(api.Error_Create)(C.byref(args))
    return result
