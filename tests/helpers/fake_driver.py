"""A fake libcuda for the CPU machine: the real ``cuda.bindings.driver`` enums and types, with the calls kspec
makes replaced. It decodes each launch's ``kernelParams`` array exactly as the driver would, from the
parameter sizes the fake kernel declares, so the bytes kspec packs are checked for real.

A module of its own, free of pytest, so a test's subprocess can use it without importing the test runner
(tests/kernels_tests/test_serving_imports.py checks what a serving process imports).
"""

from __future__ import annotations

import ctypes

import cuda.bindings.driver as cu_real
import numpy as np

from kspec.runtime._devicearray import DeviceArray

R = cu_real.CUresult


class FakeDriver:
    """What kspec calls in libcuda, recorded. ``kernels`` maps symbol -> parameter sizes."""

    def __init__(self, kernels: dict[str, tuple[int, ...]]) -> None:
        self.kernels = dict(kernels)
        self._names = sorted(self.kernels)  # function handle - 0x3000 -> kernel name
        self.any_kernel = False  # True: any name loads, its launches record no parameter values
        self.launches: list[dict] = []
        self.calls: list[tuple[str, int]] = []  # ("record" | "wait" | "launch", stream), in the order made
        self.events = 0
        self.loaded: list[bytes] = []
        self.attrs: dict[tuple[int, str], int] = {}
        self.current = 0x1000
        self.fail_next: list[int] = []
        self.occupancy = 2
        self.capturing: set[int] = set()  # stream handles cuStreamIsCapturing reports as capturing
        self.capture_queries = 0

    def __getattr__(self, name: str):  # enums and handle types come from the real bindings
        return getattr(cu_real, name)

    # device and context
    def cuInit(self, flags):
        return (R.CUDA_SUCCESS,)

    def cuDeviceGetCount(self):
        return (R.CUDA_SUCCESS, 1)

    def cuDeviceGetAttribute(self, attr, dev):
        values = {
            cu_real.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: 9,
            cu_real.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: 0,
            cu_real.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: 132,
        }
        return (R.CUDA_SUCCESS, values.get(attr, 1))

    def cuDevicePrimaryCtxRetain(self, dev):
        return (R.CUDA_SUCCESS, cu_real.CUcontext(0x1000))

    def cuCtxGetCurrent(self):
        return (R.CUDA_SUCCESS, cu_real.CUcontext(self.current))

    def cuCtxSetCurrent(self, ctx):
        self.current = int(ctx)
        return (R.CUDA_SUCCESS,)

    def cuGetErrorString(self, err):
        return (R.CUDA_SUCCESS, b"fake description")

    # cuda.core's StridedMemoryView asks which device a CAI array's pointer is on (the current one for NULL)
    def cuPointerGetAttribute(self, attr, ptr):
        return (R.CUDA_SUCCESS, 0)

    def cuCtxGetDevice(self):
        return (R.CUDA_SUCCESS, cu_real.CUdevice(0))

    # modules and functions
    def cuModuleLoadData(self, image):
        self.loaded.append(bytes(image))
        return (R.CUDA_SUCCESS, cu_real.CUmodule(0x2000 + len(self.loaded)))

    def cuModuleUnload(self, module):
        return (R.CUDA_SUCCESS,)

    def cuModuleGetFunction(self, module, name):
        name = name.decode()
        if name not in self.kernels:
            if not self.any_kernel:
                return (R.CUDA_ERROR_NOT_FOUND, None)
            self.kernels[name] = ()
        if name not in self._names:
            self._names.append(name)
        return (R.CUDA_SUCCESS, cu_real.CUfunction(0x3000 + self._names.index(name)))

    def _name_of(self, fn) -> str:
        return self._names[int(fn) - 0x3000]

    def cuModuleGetFunctionCount(self, module):
        self._names += sorted(set(self.kernels) - set(self._names))  # kernels a test added after construction
        return (R.CUDA_SUCCESS, len(self._names))

    def cuModuleEnumerateFunctions(self, count, module):
        return (R.CUDA_SUCCESS, [cu_real.CUfunction(0x3000 + i) for i in range(count)])

    def cuFuncGetName(self, fn):
        return (R.CUDA_SUCCESS, self._name_of(fn).encode())

    def cuFuncGetParamInfo(self, fn, index):
        sizes = self.kernels[self._name_of(fn)]
        if index >= len(sizes):
            return (R.CUDA_ERROR_INVALID_VALUE, 0, 0)
        return (R.CUDA_SUCCESS, sum(sizes[:index]), sizes[index])

    def cuFuncGetAttribute(self, attr, fn):
        key = (int(fn), attr.name)
        if attr == cu_real.CUfunction_attribute.CU_FUNC_ATTRIBUTE_PTX_VERSION:
            return (R.CUDA_ERROR_INVALID_VALUE, 0)  # stands for an attribute the driver lacks
        return (R.CUDA_SUCCESS, self.attrs.get(key, 48 * 1024 if "DYNAMIC" in attr.name else 7))

    def cuFuncSetAttribute(self, fn, attr, value):
        self.attrs[(int(fn), attr.name)] = value
        return (R.CUDA_SUCCESS,)

    def cuOccupancyMaxActiveBlocksPerMultiprocessor(self, fn, threads, shared):
        return (R.CUDA_SUCCESS, self.occupancy)

    # graph capture: a first call checks its launch stream (tests mark streams capturing in `capturing`)
    def cuStreamIsCapturing(self, stream):
        self.capture_queries += 1
        active = int(stream) in self.capturing
        return (R.CUDA_SUCCESS, cu_real.CUstreamCaptureStatus(1 if active else 0))

    # events: a stream waiting on another's work
    def cuEventCreate(self, flags):
        self.events += 1
        return (R.CUDA_SUCCESS, cu_real.CUevent(0x7000 + self.events))

    def cuEventRecord(self, event, stream):
        self.calls.append(("record", int(stream)))
        return (R.CUDA_SUCCESS,)

    def cuStreamWaitEvent(self, stream, event, flags):
        self.calls.append(("wait", int(stream)))
        return (R.CUDA_SUCCESS,)

    def cuEventDestroy(self, event):
        return (R.CUDA_SUCCESS,)

    # launches
    def _record(self, cooperative, f, gx, gy, gz, bx, by, bz, shared, stream, params):
        if not isinstance(params, int):
            raise TypeError("kernelParams must arrive as an int address")
        sizes = self.kernels[self._name_of(f)]
        slots = (ctypes.c_void_p * max(len(sizes), 1)).from_address(params)
        values = [ctypes.string_at(slots[i], size) for i, size in enumerate(sizes)]
        if self.fail_next:
            return (self.fail_next.pop(0),)
        self.calls.append(("launch", int(stream)))
        self.launches.append(
            dict(kernel=self._name_of(f), grid=(gx, gy, gz), block=(bx, by, bz), shared=shared,
                 stream=int(stream), values=values, cooperative=cooperative)
        )
        return (R.CUDA_SUCCESS,)

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        for v in (gx, gy, gz, bx, by, bz, shared):
            if v < 0:
                raise OverflowError("can't convert negative value to unsigned int")
        if 0 in (gx, gy, gz, bx, by, bz):
            return (R.CUDA_ERROR_INVALID_VALUE,)
        return self._record(False, f, gx, gy, gz, bx, by, bz, shared, stream, params)

    def cuLaunchCooperativeKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params):
        return self._record(True, f, gx, gy, gz, bx, by, bz, shared, stream, params)


def fake_array(ptr: int, shape=(4,), dtype=np.float32) -> DeviceArray:
    return DeviceArray._wrap(ptr, shape, np.dtype(dtype), 0, None)
