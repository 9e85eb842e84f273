"""``kspec tune``: time a tuned raw spec's configs, or the planner's knobs on an elementwise or
reduction spec's ``tune.cases`` (:mod:`._planner`), on a GPU and write the spec file's tuning record.

A tool layer beside ``kspec.build``: it launches (it needs a GPU and the runtime), and what it writes is data
(kspec/_tuning.py's record) that build, the hook, warm and the kernels read. Nothing else imports it.
"""

from __future__ import annotations

from ._timing import Timer
from ._tuner import TuneOptions, TuneReport, time_shape, tune_files

__all__ = ["Timer", "TuneOptions", "TuneReport", "time_shape", "tune_files"]
