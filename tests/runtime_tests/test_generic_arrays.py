"""Arrays of other libraries (DLPack, ``__cuda_array_interface__``) read through cuda.core's StridedMemoryView
(kspec/runtime/_generic.py), on a machine without a GPU.

DLPack producers here are kspec's own capsule writer over fake device pointers: cuda.core reads a capsule
without touching the memory or the driver. CAI arrays need the driver for their pointer's device, which the
fake driver of tests/helpers/fake_driver.py answers (its fixture points cuda.core at it too); a driver
error (a pointer the driver does not know) needs the real one. The GPU side, with real producers and their
streams, is tests/runtime_tests/test_generic_arrays_gpu.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import fake_device
from helpers.child_env import child_env
from helpers.fake_device import DL, Cai
from helpers.fake_driver import fake_array
from test_runtime_launch_cpu import SOURCE, u64

import kspec
from kspec.runtime import _dlpack, array_info

REPO = Path(__file__).resolve().parents[2]
fake = fake_device.fake  # the fake driver's fixture, which points cuda.core's driver calls at it too


# -- DLPack ----------------------------------------------------------------------------------------------------


def test_dlpack_array_info_reads_pointer_layout_and_flags(fake):
    before = _dlpack.exported_count()
    producer = DL(ptr=0xD000, shape=(3, 2), strides=(4, 12), readonly=True, byte_offset=64)  # a transposed view
    info = array_info(producer)
    assert (info.ptr, info.shape, info.strides, info.dtype) == (0xD040, (3, 2), (4, 12), np.dtype(np.float32))
    assert info.device_id == 0 and info.library is None and info.readonly  # versioned capsule: its read-only flag
    assert not info.is_c_contiguous
    assert _dlpack.exported_count() == before + 1  # the view holds the capsule...
    del info
    assert _dlpack.exported_count() == before  # ...and calls its deleter when it goes


def test_dlpack_stream_is_the_protocols_spelling_of_the_consumer_stream(fake):
    producer = DL()
    array_info(producer)  # no consumer stream (binding a call): __dlpack__(stream=None), as kspec always asked
    array_info(producer, stream=0)  # the legacy default stream is 1 in the protocol
    array_info(producer, stream=0x55)
    assert producer.streams == [None, 1, 0x55]


def test_raw_kernel_reads_a_dlpack_argument_on_the_launch_stream(fake):
    producer = DL(ptr=0xD000)
    k = kspec.RawKernel(SOURCE, "k1")
    k(1, 1, (producer, fake_array(0xA000), 0, 0.0))
    k(1, 1, (producer, fake_array(0xA000), 0, 0.0), stream=0x77)
    assert [u64(launch["values"][0]) for launch in fake.launches] == [0xD000, 0xD000]
    assert producer.streams == [1, 0x77]
    assert _dlpack.exported_count() == 0  # each view, and with it the capsule, went when its launch was queued


def test_dlpack_errors_keep_kspecs_messages(fake):
    with pytest.raises(TypeError, match=r"^x: DL is on DLPack device type 1 \(not CUDA\); copy it to the device"):
        array_info(DL(device_type=_dlpack.KDL_CPU), param="x")
    with pytest.raises(kspec.KspecTypeError, match=r"did not return a DLPack capsule \('dltensor' or 'dltensor_"):
        array_info(DL(capsule=False))
    with pytest.raises(kspec.KspecTypeError, match="^DLPack dtype with 4 lanes is not supported$"):
        array_info(DL(dl_dtype=(2, 32, 4)))
    with pytest.raises(kspec.KspecTypeError, match=r"^DLPack dtype is not supported \(.*9"):
        array_info(DL(dl_dtype=(9, 32, 1)))


def test_bfloat16_dlpack_without_ml_dtypes_names_the_package(fake):
    try:
        import ml_dtypes  # noqa: F401
    except ImportError:
        with pytest.raises(kspec.KspecTypeError, match="^a bfloat16 DLPack tensor needs the ml_dtypes package"):
            array_info(DL(dtype=np.float16, dl_dtype=(4, 16, 1)))
    else:
        assert array_info(DL(dtype=np.float16, dl_dtype=(4, 16, 1))).dtype.name == "bfloat16"


# -- __cuda_array_interface__ --------------------------------------------------------------------------------


def test_cai_checks_run_before_anything_is_read():
    # no fixture, no driver: kspec's own checks come first, with their messages
    with pytest.raises(TypeError, match=r"^x: __cuda_array_interface__ version 1 is too old \(need 2 or 3\)$"):
        array_info(Cai(version=1), param="x")
    with pytest.raises(TypeError, match="^x: masked __cuda_array_interface__ arrays are not supported$"):
        array_info(Cai(mask=object()), param="x")
    with pytest.raises(TypeError, match=r"^x: big-endian dtype >f4 is not supported on the device$"):
        array_info(Cai(typestr=">f4"), param="x")


def test_cai_version_2_null_pointer_and_producer_streams(fake):
    info = array_info(Cai(ptr=0xC000, shape=(2, 3), typestr="<i2", version=2, strides=(2, 4)))
    assert (info.ptr, info.shape, info.strides, info.dtype, info.device_id) == (0xC000, (2, 3), (2, 4), np.int16, 0)
    empty = array_info(Cai(ptr=0, shape=(0,)))
    assert (empty.ptr, empty.shape, empty.strides, empty.device_id) == (0, (0,), (4,), 0)
    # a producer stream that is the consumer's needs no event (cuda.core would order it through the real
    # driver, which this machine lacks): 1 is the protocol's legacy default stream, kspec's 0; 0 reads as 1
    for producer, consumer in ((1, 0), (0x55, 0x55), (0, 0)):
        assert array_info(Cai(stream=producer), stream=consumer).ptr == 0xC000
    assert array_info(Cai(stream=0x66)).ptr == 0xC000  # no consumer stream: no ordering


# -- cuda.core is imported lazily ------------------------------------------------------------------------------


def _imports(script: str) -> dict:
    done = subprocess.run([sys.executable, "-c", script], env=child_env(REPO / "tests", REPO), capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_cuda_core_is_imported_only_for_a_generic_array():
    script = """
import json, sys
import numpy as np
import kspec
from kspec.runtime import array_info, _driver
from helpers.fake_driver import FakeDriver, fake_array
from helpers.fake_device import DL
_driver._driver, _driver._failure, _driver._device_count = FakeDriver({}), None, 1
seen = ["cuda.core" in sys.modules]
array_info(fake_array(0x1000))  # kspec's own arrays: a direct read
seen.append("cuda.core" in sys.modules)
array_info(DL())
seen.append("cuda.core" in sys.modules)
print(json.dumps(seen))
"""
    assert _imports(script) == [False, False, True]


def test_a_broken_cuda_core_is_a_kspec_error_naming_the_package(fake, monkeypatch):
    from kspec.runtime import _generic

    monkeypatch.setattr(_generic, "_VIEW", None)
    monkeypatch.setitem(sys.modules, "cuda.core.utils", None)  # what a broken install looks like to `import`
    with pytest.raises(kspec.KspecError, match=r"needs cuda.core.*pip install 'cuda-core>=1.2,<2'"):
        array_info(DL())
