"""Timing one launch on the GPU for ``kspec tune``: CUDA events around the launch alone, L2 flushed before each.

Each repetition writes a scratch buffer of twice the L2 size (``cuMemsetD8Async``) before its start event, so
no candidate reads what the one before it left in L2; the events bracket the launch only. Warm-up launches
come first; the median and the spread (interquartile range over the median) are reported.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from ..runtime import Stream, check_driver, cuda_driver, empty, get_device


class Timer:
    """Times launches on its own stream, the L2 flushed before each repetition."""

    def __init__(self) -> None:
        cu = cuda_driver()
        self.cu = cu
        self.stream = Stream()
        l2 = int(check_driver(cu.cuDeviceGetAttribute(cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, get_device().id),
                     "cuDeviceGetAttribute"))  # fmt: skip
        self.scratch = empty((max(2 * l2, 1 << 20),), "uint8")
        self.handle = cu.CUstream(int(self.stream.ptr))

    def flush(self, k: int) -> None:
        check_driver(self.cu.cuMemsetD8Async(self.scratch.ptr, k & 0xFF, self.scratch.nbytes, self.handle), "cuMemsetD8Async")

    def poison(self, array: Any) -> None:
        """Every byte of a C-contiguous array set to 0xFF (NaN in floating types) on the timing stream."""
        check_driver(self.cu.cuMemsetD8Async(array.ptr, 0xFF, array.nbytes, self.handle), "cuMemsetD8Async")

    def time(self, launch: Callable[[Any], None], warmup: int, reps: int) -> tuple[float, float, list[float]]:
        """(median ms, spread, samples) of ``launch(stream)``."""
        cu = self.cu
        for k in range(warmup):
            self.flush(k)
            launch(self.stream)
        flags = int(cu.CUevent_flags.CU_EVENT_DEFAULT)
        events = [(check_driver(cu.cuEventCreate(flags), "cuEventCreate"), check_driver(cu.cuEventCreate(flags), "cuEventCreate")) for _ in range(reps)]
        try:
            for k, (start, end) in enumerate(events):
                self.flush(k)
                check_driver(cu.cuEventRecord(start, self.handle), "cuEventRecord")
                launch(self.stream)
                check_driver(cu.cuEventRecord(end, self.handle), "cuEventRecord")
            self.synchronize()
            samples = [float(check_driver(cu.cuEventElapsedTime(start, end), "cuEventElapsedTime")) for start, end in events]
        finally:
            for pair in events:
                for event in pair:
                    cu.cuEventDestroy(event)
        median = statistics.median(samples)
        quartiles = statistics.quantiles(samples, n=4) if len(samples) >= 2 else [median, median, median]
        return median, (quartiles[2] - quartiles[0]) / median if median > 0 else 0.0, samples

    def synchronize(self) -> None:
        self.stream.synchronize()
