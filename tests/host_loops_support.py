"""Test support for the host loop templates (templates/host/*.cpp.j2): build a rendered host module with the
contract's host compiler command, and run calls through the real planner and parameter frames with NumPy
arrays standing in for device arrays (their pointers are host pointers; the host entries read them directly).

Until the lead's host compiler lands in kspec.compiler, :func:`host_entries` appends the extern "C" entries
as the contract specifies and :func:`build` runs the contract's command.
"""

from __future__ import annotations

import ctypes
import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from kspec.kernels._bind import bind
from kspec.kernels._elementwise import _static_values as elementwise_static
from kspec.kernels._frame import Frame
from kspec.kernels._plan import plan_elementwise
from kspec.kernels._plan_reduction import plan_reduction, reduction_strategy
from kspec.kernels._reduction import _static_values as reduction_static
from kspec.render import RenderedModule, render_host
from kspec.runtime._devicearray import DeviceArray

ROOT = Path(__file__).resolve().parent.parent
INCLUDE_HOST = ROOT / "templates" / "include_host"
STANDIN = Path(__file__).resolve().parent / "host_runtime_standin"
FLAGS = ["-std=c++17", "-O2", "-march=native", "-fPIC", "-shared", "-fvisibility=hidden", "-fno-math-errno", "-pthread",
         "-DKSPEC_HOST=1"]


def host_compiler() -> str | None:
    return shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")


def entry_symbol(expression: str) -> str:
    return "kspec_entry_" + hashlib.sha256(expression.encode()).hexdigest()[:16]


def host_entries(expressions: tuple[str, ...], uses_sync: bool = False) -> str:
    """The source the host compiler appends after a module: one extern "C" entry per name expression, and the
    list of expressions (the contract, T_CONTRACT.md)."""
    sync = "true" if uses_sync else "false"
    lines = [
        f'extern "C" __attribute__((visibility("default"))) int {entry_symbol(e)}(void** params, '
        f"const kspec_host_launch* launch, kspec_host_fault* fault) {{ return ::kspec_host::run_entry<{sync}>("
        f'&{e}, "{e}", params, launch, fault); }}'
        for e in expressions
    ]
    listing = "\\n".join(expressions)
    lines.append(f'extern "C" __attribute__((visibility("default"))) const char kspec_host_entries[] = "{listing}";')
    return "\n" + "\n".join(lines) + "\n"


def _include_flags() -> list[str]:
    flags = ["-I", str(INCLUDE_HOST), "-I", str(ROOT / "templates" / "include")]
    if "blockIdx" not in (INCLUDE_HOST / "kspec_host" / "runtime.h").read_text():
        flags = ["-I", str(STANDIN)] + flags  # helper EXEC's runtime has not landed in this tree
    return flags


_BUILT: dict[str, ctypes.CDLL] = {}
_RENDERED: dict[str, RenderedModule] = {}
_DIR = Path(tempfile.mkdtemp(prefix="kspec-host-loops-"))


def build(module: RenderedModule) -> ctypes.CDLL:
    """Compile ``module`` (with its entries appended) into a shared object and load it; memoized by source."""
    source = module.source + host_entries(module.name_expressions)
    key = hashlib.sha256(source.encode()).hexdigest()[:20]
    if key not in _BUILT:
        compiler = host_compiler()
        assert compiler is not None
        src, out = _DIR / f"{key}.cpp", _DIR / f"{key}.so"
        src.write_text(source)
        command = [compiler, *FLAGS, *_include_flags(), "-include", "kspec_host/cuda.h", str(src), "-o", str(out)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            raise AssertionError(f"host compile failed:\n{done.stderr[:6000]}")
        _BUILT[key] = ctypes.CDLL(str(out))
    return _BUILT[key]


class Launch(ctypes.Structure):
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared_bytes", ctypes.c_ulonglong),
                ("threads", ctypes.c_int)]


class Fault(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("message", ctypes.c_char * 2048)]


class HostFault(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


def call_entry(lib: ctypes.CDLL, expression: str, params: int, grid: int, block: int, threads: int) -> None:
    fn = getattr(lib, entry_symbol(expression))
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.POINTER(Launch), ctypes.POINTER(Fault)]
    launch = Launch((grid, 1, 1), (block, 1, 1), 0, threads)
    fault = Fault()
    code = fn(params, ctypes.byref(launch), ctypes.byref(fault))
    if code:
        raise HostFault(code, fault.message.decode())


def stand_in(obj: Any) -> Any:
    """A NumPy array as a kspec device array over the same memory (host pointers, on the CPU device)."""
    if isinstance(obj, np.ndarray):
        return DeviceArray._wrap(obj.ctypes.data, obj.shape, obj.dtype, 0, obj, strides=obj.strides)
    return obj


def rendered(specialization: Any) -> RenderedModule:
    """render_host, once per specialization (a timing should not count Jinja)."""
    if specialization.key not in _RENDERED:
        _RENDERED[specialization.key] = render_host(specialization)
    return _RENDERED[specialization.key]


def _bound(kernel: Any, args: tuple[Any, ...]) -> Any:
    inputs, outputs = kernel._split_args(tuple(stand_in(a) for a in args), {}, "")
    return bind(kernel._spec, inputs, outputs)


def _allocate(items: tuple[tuple[str, str], ...], shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    return {name: np.zeros(shape, np.dtype(dtype)) for name, dtype in items}


def _pointers(bound: Any, allocated: dict[str, np.ndarray]) -> dict[str, int]:
    pointers = {name: arg.info.ptr for name, arg in bound.arrays.items()}
    pointers.update({name: a.ctypes.data for name, a in allocated.items()})
    return pointers


def run_elementwise(kernel: Any, *args: Any, size: object = None, block_size: object = None, threads: int = 2,
                    sm_count: int = 2) -> tuple[Any, str]:
    """``kernel(*args)`` on the host: the kernel's own planner, frames and launch, a host module's entry; also
    the entry the planner chose ("none" for an empty loop)."""
    bound = _bound(kernel, args)
    plan = plan_elementwise(kernel._spec, bound, kernel._specializer, size=size, block_size=block_size)
    allocated = _allocate(plan.allocate, plan.shape)
    entry = "none"
    if plan.variant is not None:
        entry = plan.variant.entry
        module = rendered(plan.specialization)
        lib = build(module)
        frame = Frame(module.abi[plan.variant], elementwise_static(plan))
        address = frame.fill(_pointers(bound, allocated), bound.scalars)
        call_entry(lib, module.variants[plan.variant], address, plan.grid(sm_count), plan.block, threads)
    return _results(kernel, args, allocated), entry


def _results(kernel: Any, args: tuple[Any, ...], allocated: dict[str, np.ndarray]) -> Any:
    nin = len(kernel._spec.in_params)
    results = [allocated[p.name] if p.name in allocated else args[nin + j] for j, p in enumerate(kernel._spec.out_params)]
    return results[0] if len(results) == 1 else tuple(results)


def run_reduction(kernel: Any, *args: Any, axis: object = None, keepdims: bool = False, threads: int = 2,
                  sm_count: int = 2) -> tuple[Any, str]:
    """``kernel(*args, axis=, keepdims=)`` on the host; also the strategy kind the planner chose."""
    bound = _bound(kernel, args)
    plan = plan_reduction(kernel._spec, bound, kernel._specializer, axis=axis, keepdims=keepdims)
    allocated = _allocate(plan.allocate, plan.out_shape)
    kind = "none"
    if plan.out_size:
        strategy = reduction_strategy(plan, sm_count)
        kind = strategy.kind
        module = rendered(plan.specialization)
        lib = build(module)
        pointers = _pointers(bound, allocated)
        workspace = None
        if strategy.workspace_items:
            item = module.reduce_item
            assert item is not None
            itemsize = item.itemsize
            if itemsize is None:  # an opaque reduce type: sizeof/alignof from the module's global
                size, align = (ctypes.c_uint64 * 2).in_dll(lib, item.symbol)
                itemsize = -(-size // align) * align
            workspace = np.zeros(strategy.workspace_items * itemsize + 256, np.uint8)
            pointers["_workspace"] = -(-workspace.ctypes.data // 256) * 256
        for step in strategy.passes:
            frame = Frame(module.abi[step.variant], reduction_static(plan, step))
            address = frame.fill(pointers, bound.scalars)
            call_entry(lib, module.variants[step.variant], address, step.grid, step.block, threads)
    return _results(kernel, args, allocated), kind
