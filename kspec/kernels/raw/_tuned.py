"""A raw kernel with a tuning space: each call runs the config its tuning record gives its key.

The record (kspec/_tuning.py) was written by ``kspec tune`` and shipped beside the binaries (``kspec build``
copies the winners into its output) or beside the spec file. A call reads its key (int arguments named by
the space's ``key``), rounds it to its bucket and takes that bucket's winner (else the nearest bucket's, else
the space's default): a fixed rule, the same in every process; nothing is timed here. Each config is its own
raw kernel (kspec/_tuning.py's ``config_table``), loaded from the build's binaries when it has them, compiled
on first use otherwise, and its block, grid and dynamic shared memory come from the space's expressions.
``KSPEC_LOG=tune`` prints each choice once; :meth:`TunedKernel.choices` lists them.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ..._errors import KspecTypeError, KspecValueError, about_kernel
from ..._tuning import (
    choose,
    bucket,
    bucket_label,
    compile_expr,
    config_label,
    config_table,
    kernel_entry,
    parse_arg,
)
from ...runtime import current_device_id, get_device
from ..planning import printing
from ._spec_table import raw_kernel_of_table


_KEPT_LAUNCHES = 1024  # launches kept per tuned kernel


class TunedKernel:
    """``kernel(*args, stream=None)``: ``args`` in the order of the space's ``args``."""

    def __init__(self, table: Mapping[str, Any], binaries: Any = None, records: Sequence[Mapping[str, Any]] = ()) -> None:
        self._table = dict(table)
        self.name: str = self._table["name"]
        tune = self._table["tune"]
        self._tune = tune
        self._arg_names = [parse_arg(a, k)[0] for k, a in enumerate(tune["args"])]
        self._key = list(tune.get("key") or ())
        self._key_positions = [self._arg_names.index(k) for k in self._key]
        names = [*tune["params"], *self._key]
        self._block = [compile_expr(e, names, f"tune.block[{k}]") for k, e in enumerate(tune["block"])]
        self._grid = [compile_expr(e, names, f"tune.grid[{k}]") for k, e in enumerate(tune["grid"])]
        self._shared = compile_expr(tune.get("shared_mem", 0), names, "tune.shared_mem")
        self._binaries = binaries
        self._records = [r for r in records if r]
        self._lock = threading.Lock()
        self._kernels: dict[str, Any] = {}  # config label -> its raw kernel
        self._chosen: dict[tuple[int, tuple[int, ...]], tuple[dict[str, int], str, Any]] = {}  # (device, bucket)
        # (device, key values) -> (raw kernel, grid, block, shared memory): a call whose key values were seen
        # launches with one lookup (the bucket, the config and its expressions were worked out the first time)
        self._launches: dict[tuple[int, tuple[int, ...]], tuple[Any, tuple[int, ...], tuple[int, ...], int]] = {}
        self._log: list[tuple[str, str, dict[str, int], str]] = []

    @property
    def space(self) -> dict[str, Any]:
        """The tuning space (the spec's ``tune`` table)."""
        return dict(self._tune)

    @property
    def default(self) -> dict[str, int]:
        return dict(self._tune["default"])

    def entry(self, arch: str) -> dict[str, Any] | None:
        """The record's entry for this kernel on ``arch`` (the first record that has one), or None."""
        for record in self._records:
            found = kernel_entry(record, arch, self.name)
            if found is not None:
                return found
        return None

    def config_for(self, key_values: Sequence[int], arch: str) -> tuple[dict[str, int], str]:
        """The config a call with these key values runs on ``arch``, and where it came from."""
        return choose(self.entry(arch), self.default, key_values)

    def kernel_for(self, config: Mapping[str, int]) -> Any:
        """The raw kernel of one config (made once; its binary from the build's output where it has one)."""
        label = config_label(config)
        found = self._kernels.get(label)
        if found is None:
            with self._lock:
                found = self._kernels.get(label)
                if found is None:
                    table = config_table(self._table, config)
                    made = raw_kernel_of_table(table, self._binaries)
                    if table.get("name_expressions"):  # a RawModule: its one kernel
                        made = made.get_function(table["name_expressions"][0])
                    found = self._kernels[label] = made
        return found

    def launch_config(self, config: Mapping[str, int], key_values: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...], int]:
        """(grid, block, shared_mem) of a config for these key values."""
        env = {**dict(zip(self._key, key_values)), **config}
        return tuple(g(env) for g in self._grid), tuple(b(env) for b in self._block), self._shared(env)

    def __call__(self, *args: Any, stream: Any = None) -> None:
        if len(args) != len(self._arg_names):
            raise KspecTypeError(about_kernel(self.name, f"takes {len(self._arg_names)} arguments ({', '.join(self._arg_names)}), "
                                                         f"got {len(args)}"))  # fmt: skip
        key_values = []
        for name, k in zip(self._key, self._key_positions):
            value = args[k]
            if isinstance(value, bool) or not hasattr(value, "__index__"):
                raise KspecTypeError(about_kernel(self.name, f"argument {name} (a key of its tuning space) must be an int, "
                                                             f"got {type(value).__name__}"))  # fmt: skip
            if int(value) <= 0:
                raise KspecValueError(about_kernel(self.name, f"argument {name} must be positive, got {int(value)}"))
            key_values.append(int(value))
        where = (current_device_id(), tuple(key_values))
        launch = self._launches.get(where)
        if launch is None:
            launch = self._launch_for(where)
        kernel, grid, block, shared = launch
        kernel(grid, block, args, shared_mem=shared, stream=stream)

    def _launch_for(self, where: tuple[int, tuple[int, ...]]) -> tuple[Any, tuple[int, ...], tuple[int, ...], int]:
        """The launch of a call on device ``where[0]`` with key values ``where[1]`` (its config chosen once per
        bucket), kept."""
        device, key_values = where
        in_bucket = (device, bucket(key_values))
        chosen = self._chosen.get(in_bucket)
        if chosen is None:  # once per device and bucket: the arch is asked only here
            arch = get_device(device).arch
            config, source = self.config_for(key_values, arch)
            chosen = self._chosen[in_bucket] = (config, source, self.kernel_for(config))
            self._log.append((arch, bucket_label(self._key, key_values), config, source))
            if printing():
                print(f"kspec tune: {self.name} [{self._log[-1][1]}] {arch}: {config_label(config)} ({source})",
                      file=sys.stderr, flush=True)  # fmt: skip
        config, _, kernel = chosen
        grid, block, shared = self.launch_config(config, key_values)
        if len(self._launches) >= _KEPT_LAUNCHES:  # a program cycling through sizes: start over (still correct)
            self._launches.clear()
        launch = self._launches[where] = (kernel, grid, block, shared)
        return launch

    def choices(self) -> list[tuple[str, str, dict[str, int], str]]:
        """Each (arch, bucket, config, source) this object chose, in order: source ``record``, ``record, nearest
        <bucket>`` or ``default``."""
        return list(self._log)

    def __repr__(self) -> str:
        return f"<kspec TunedKernel {self.name!r}: {len(self._records)} record(s)>"
