"""kspec capture: what a program's constructor calls build, recorded and written as spec files.

A front end like fuse and jit: it produces specs and reuses everything below them. ``kspec capture -o DIR --
COMMAND`` runs a program (a test run, a script) with kspec under CuPy (kspec.cupy's switch) and a
:class:`Recorder` observing the kernels (kspec/kernels/records/_observers.py) in every Python process it starts; each
process appends what it built to a records file. :func:`write_captured` then merges the records into spec files,
one per source module that built the kernels (:func:`merge_captured` unites the outputs of several captures),
which ``kspec validate``, ``generate``, ``build`` and the hatch hook take like any spec file. A build of them
serves the same constructor calls in a later process by content (kspec/kernels/binaries/_stores.py), without
NVRTC.

The recorder needs the kernels layer; the writer only the spec layer (the CLI imports the writer alone).
"""

from __future__ import annotations

from .._lazy import lazy_getattr

_LAZY = {
    "CAPTURE_ENV": "_recorder", "Recorder": "_recorder", "record_from_environment": "_recorder",
    "recording_environment": "_recorder",
    "CaptureMergeError": "_writer", "CaptureReport": "_writer", "merge_captured": "_writer", "write_captured": "_writer",
    "read_records": "_records",
}

__getattr__ = lazy_getattr(__name__, _LAZY, globals())

__all__ = ["CAPTURE_ENV", "CaptureMergeError", "CaptureReport", "Recorder", "merge_captured", "read_records",
           "record_from_environment", "recording_environment", "write_captured"]
