"""Tuning spaces, records, the build of tuned raw kernels and their choice at run time (issue [AT]), no GPU."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kspec import SpecError
from kspec._tuning import (
    BUILD_RECORD,
    TuningError,
    bucket,
    bucket_label,
    choose,
    compile_expr,
    config_table,
    configs,
    dumps,
    record_path,
    space_digest,
    winners,
)
from kspec.build import plan_build, precompile, write_output
from kspec.cli import main
from kspec.compiler import BinaryCache
from kspec.render import specialization_key, specialize
from kspec.spec import load_library, parse_spec

REPO = Path(__file__).resolve().parents[2]
TUNED = REPO / "specs" / "tuned.toml"

SOURCE = "template <int B> __global__ void k(float* x, int n) { int i = blockIdx.x * B + threadIdx.x; if (i < n) x[i] *= 2; }"


def space(**changes):
    tune = {
        "args": ["float32[n] x", "int32 n"], "key": ["n"], "params": {"B": [64, 128, 256]},
        "constraints": ["B >= 64"], "name_expression": "k<{B}>", "block": ["B"], "grid": ["cdiv(n, B)"],
        "default": {"B": 128},
    }
    tune.update(changes)
    return {"kind": "raw", "name": "k", "source": SOURCE, "tune": tune}


def record_of(entry_buckets, arch="sm_90", name="k", key=("n",)):
    return {"format": 1, "archs": {arch: {"device": "test GPU", "kernels": {
        name: {"digest": "d", "key": list(key), "default": {"B": 128}, "complete": True, "buckets": entry_buckets}}}}}


def bucket_of(config, ms=1.0):
    return {"shape": {}, "winner": {"config": config, "ms": ms, "spread": 0.0}, "candidates": 3, "skipped": []}


def test_the_repository_spaces_validate_and_count():
    library = load_library([TUNED])
    assert {n: len(configs(library[n].tune)) for n in library} == {"transpose_tiled": 17, "stencil5": 76}
    for name in library:
        spec = library[name]
        assert spec.tune["default"] in configs(spec.tune)


@pytest.mark.parametrize("changes, field, words", [
    ({"params": {}}, "tune.params", "params is empty"),
    ({"params": {"B": []}}, "tune.params.B", "non-empty list of ints"),
    ({"params": {"B": [64, 1.5]}}, "tune.params.B", "non-empty list of ints"),
    ({"params": {"B": list(range(65))}}, "tune.params.B", "at most 64"),
    ({"params": {"A": list(range(1, 64)), "B": list(range(1, 64)), "C": [1, 2]}}, "tune.params", "at most 4096"),
    ({"constraints": ["B > 1000"]}, "tune.constraints", "allow no config"),
    ({"constraints": ["B < 128"]}, "tune.default", "breaks the constraints"),
    ({"constraints": ["B.real > 1"]}, "tune.constraints[0]", "not allowed"),
    ({"constraints": ["n > 1"]}, "tune.constraints[0]", "unknown name 'n'"),
    ({"grid": ["n / B"]}, "tune.grid[0]", "not allowed"),
    ({"grid": ["cdiv(m, B)"]}, "tune.grid[0]", "unknown name 'm'"),
    ({"block": []}, "tune.block", "1 to 3"),
    ({"key": ["x"]}, "tune.key[0]", "not an int argument"),
    ({"key": [], "args": ["float32[8] x", "int32 n"]}, "tune.args[1]", "is not a key"),
    ({"args": ["float32[m] x", "int32 n"]}, "tune.args[0]", "dims must be ints or keys"),
    ({"args": ["complex64[n] x", "int32 n"]}, "tune.args[0]", "DTYPE one of"),
    ({"args": []}, "tune.args", "args is empty"),
    ({"default": {"B": 32}}, "tune.default.B", "not one of its values"),
    ({"default": {}}, "tune.default", "every parameter"),
    ({"name_expression": "k<{C}>"}, "tune.name_expression", "not a parameter"),
    ({"name_expression": None}, "tune.name_expression", "give name_expression"),
    ({"defines": ["Q"]}, "tune.defines[0]", "not a parameter"),
    ({"shapes": [{"m": 4}]}, "tune.shapes[0]", "every key"),
])  # fmt: skip
def test_a_bad_space_is_a_spec_error_naming_the_field(changes, field, words):
    with pytest.raises(SpecError) as info:
        parse_spec(space(**changes))
    assert info.value.field == field and words in str(info.value)


def test_a_tuned_spec_exposes_one_kernel():
    with pytest.raises(SpecError, match="one kernel"):
        parse_spec({**space(), "kernels": ["k", "j"]})


def test_expressions():
    env = {"n": 1000, "B": 128}
    assert compile_expr("cdiv(n, B)", ["n", "B"], "f")(env) == 8
    assert compile_expr("min(n, B) * 2 + (n % 7) - (B >> 2)", ["n", "B"], "f")(env) == 256 + 6 - 32
    assert compile_expr("B <= 256 and not n < 10", ["n", "B"], "f")(env) == 1
    assert compile_expr(512, [], "f")({}) == 512
    for bad in ("__import__('os')", "B ** 2", "1.5 * B", "[B]", "B if n else 1"):
        with pytest.raises(TuningError):
            compile_expr(bad, ["n", "B"], "f")
    with pytest.raises(TuningError, match="divides by zero"):
        compile_expr("n // B", ["n", "B"], "f")({"n": 1, "B": 0})


def test_buckets_and_the_choice_are_a_fixed_rule():
    assert bucket([1, 2, 3, 4096, 4097]) == (1, 2, 4, 4096, 8192)
    assert bucket_label(["n", "m"], [1000, 5000]) == "n=1024,m=8192"
    default = {"B": 128}
    assert choose(None, default, [100]) == (default, "default")
    entry = record_of({"n=1024": bucket_of({"B": 64}), "n=65536": bucket_of({"B": 256})})["archs"]["sm_90"]["kernels"]["k"]
    assert choose(entry, default, [1000]) == ({"B": 64}, "record")
    assert choose(entry, default, [1 << 20]) == ({"B": 256}, "record, nearest n=65536")
    # equidistant in log2 (8192 is 3 from 1024 and 3 from 65536): the smaller label, every time
    assert choose(entry, default, [8192]) == ({"B": 64}, "record, nearest n=1024")
    assert winners(entry) == [{"B": 64}, {"B": 256}]


def test_a_config_is_the_same_kernel_for_the_build_and_the_serving_path():
    spec = parse_spec(space(defines=["B"]))
    table = spec.to_data()
    for config in configs(spec.tune):
        made = spec.config_spec(config)
        assert made.name == f"k__B{config['B']}" and made.tune is None
        assert made.name_expressions == (f"k<{config['B']}>",) and made.options == (f"-DB={config['B']}",)
        plain = config_table(table, config)
        assert specialize(made).key == specialization_key({**plain, "source_text": plain["source"]}, {}, frozenset())


def test_the_digest_follows_the_code_and_space_not_the_shapes():
    base = space()
    assert space_digest(base) == space_digest(space(shapes=[{"n": 4}]))
    assert space_digest(base) != space_digest(space(params={"B": [64, 128]}))
    assert space_digest(base) != space_digest({**base, "source": SOURCE + " "})


@pytest.fixture()
def spec_dir(tmp_path):
    target = tmp_path / "tuned.toml"
    shutil.copy(TUNED, target)
    return target


def write_record(spec_file, record):
    path = record_path(spec_file)
    path.write_text(dumps(record))
    return path


def test_build_compiles_defaults_and_record_winners_and_carries_the_record(spec_dir, tmp_path):
    winner = {"TILE": 32, "ROWS": 8}
    write_record(spec_dir, record_of({"n=4096,m=4096": bucket_of(winner)}, name="transpose_tiled", key=("n", "m")))
    library = load_library([spec_dir])
    plan = plan_build(library.values(), ["sm_90", "sm_80"])
    names = sorted((u.spec.name, u.arch) for u in plan.units)
    assert ("transpose_tiled__ROWS8_TILE32", "sm_90") in names and ("transpose_tiled__ROWS8_TILE32", "sm_80") not in names
    assert ("transpose_tiled__ROWS32_TILE32", "sm_80") in names and ("stencil5__BX16_BY16_PY1", "sm_90") in names
    assert len(names) == 5
    results = precompile(plan.units, cache=BinaryCache(tmp_path / "cache"))
    assert all(r.error is None for r in results), [str(r.error) for r in results if r.error]
    out = tmp_path / "out"
    write_output(results, out)
    carried = json.loads((out / BUILD_RECORD).read_text())
    assert list(carried["archs"]) == ["sm_90"]
    assert carried["archs"]["sm_90"]["device"] == "test GPU"
    assert carried["archs"]["sm_90"]["kernels"]["transpose_tiled"]["buckets"]["n=4096,m=4096"]["winner"]["config"] == winner
    # the kernel served from that output reads the carried record
    import kspec

    kernel = kspec.load(spec_dir, binaries=out).transpose_tiled
    assert kernel.config_for((4000, 4000), "sm_90") == (winner, "record")
    assert kernel.config_for((4000, 4000), "sm_80") == (kernel.default, "default")
    # served from a build without a record, a kernel runs the defaults that build compiled, whatever lies
    # beside the spec file
    bare = tmp_path / "bare"
    write_output([r for r in results if r.unit.arch == "sm_80"], bare)
    assert not (bare / BUILD_RECORD).exists()
    assert kspec.load(spec_dir, binaries=bare).transpose_tiled.config_for((4000, 4000), "sm_90")[1] == "default"
    # a build without a record: the defaults alone, and no tuning.json left behind
    record_path(spec_dir).unlink()
    results = precompile(plan_build(load_library([spec_dir]).values(), ["sm_90"]).units, cache=BinaryCache(tmp_path / "cache"))
    write_output(results, out)
    assert not (out / BUILD_RECORD).exists()


def test_a_damaged_record_is_an_error_naming_it(spec_dir):
    record_path(spec_dir).write_text("{not json")
    with pytest.raises(SpecError, match="tuned.tune.json.*not JSON"):
        plan_build(load_library([spec_dir]).values(), ["sm_90"])
    record_path(spec_dir).write_text('{"format": 99}')
    with pytest.raises(SpecError, match="not a kspec tuning record"):
        plan_build(load_library([spec_dir]).values(), ["sm_90"])


def test_the_record_beside_the_spec_file_drives_a_loaded_kernel(spec_dir):
    import kspec

    write_record(spec_dir, record_of({"ny=1024,nx=1024": bucket_of({"BX": 64, "BY": 4, "PY": 2})}, name="stencil5", key=("ny", "nx")))
    kernel = kspec.load(spec_dir).stencil5
    assert isinstance(kernel, kspec.kernels.TunedKernel)
    config, source = kernel.config_for((1000, 1000), "sm_90")
    assert (config, source) == ({"BX": 64, "BY": 4, "PY": 2}, "record")
    assert kernel.launch_config(config, (1000, 1000)) == ((16, 125), (64, 4), 0)
    with pytest.raises(TypeError, match="takes 4 arguments"):
        kernel(1, 2)
    with pytest.raises(TypeError, match="argument ny .* must be an int"):
        kernel(None, None, 1.5, 4)
    with pytest.raises(ValueError, match="argument nx must be positive"):
        kernel(None, None, 4, 0)


def test_the_generated_module_serves_tuned_kernels_without_the_spec_models():
    code = ("import sys, generated.tuned as g, kspec\n"
            "k = g.transpose_tiled\n"
            "assert isinstance(k, kspec.kernels.TunedKernel), type(k)\n"
            "assert 'pydantic' not in sys.modules and 'jinja2' not in sys.modules\n"
            "print(k.config_for((4096, 4096), 'sm_90')[1])")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip() in ("default", "record")


def test_cli_tune_without_a_gpu_and_bad_shapes(capsys):
    assert main(["tune", str(TUNED), "--shapes", "n=4x"]) == 2
    assert "--shapes" in capsys.readouterr().err
    assert main(["tune", str(TUNED), "--budget", "0"]) == 2
    from kspec.runtime import why_no_gpu

    if why_no_gpu() is not None:
        assert main(["tune", str(TUNED)]) == 1
        assert "no CUDA device" in capsys.readouterr().err


def test_cli_show_prints_the_record(spec_dir, capsys):
    pytest.importorskip("tomli_w")  # kspec show writes TOML (the GPU machine's image lacks the wheel)
    assert main(["show", "transpose_tiled", "--specs", str(spec_dir)]) == 0
    assert "none for transpose_tiled" in capsys.readouterr().out
    write_record(spec_dir, record_of({"n=4096,m=4096": bucket_of({"TILE": 32, "ROWS": 8}, 0.05)}, name="transpose_tiled", key=("n", "m")))
    assert main(["show", "transpose_tiled", "--specs", str(spec_dir)]) == 0
    out = capsys.readouterr().out
    assert "sm_90 (test GPU" in out and "n=4096,m=4096: winner ROWS8_TILE32 0.0500 ms" in out


def test_the_record_names_the_driver_release():
    """A record's ``driver`` is the driver's release with the CUDA version it supports: two 580 drivers both
    support CUDA 13.0, and a tuning result may differ between them."""
    from kspec.runtime import driver_release

    text = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22)  "
            "Thu Oct 30 2025\nGCC version:  gcc version 12.3.0\n")  # fmt: skip
    assert driver_release(text) == "580.159.04"
    assert driver_release("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n") == "550.54.15"
    assert driver_release("") == "" and driver_release("no module here\n") == ""


def test_a_tuned_call_keeps_its_launch_per_key(on_cpu_device, monkeypatch):
    """A call whose key values were seen launches with one lookup (the config and its grid, block and shared memory
    worked out once); other values in the same bucket get their own grid; results are the transpose each time."""
    import numpy as np

    import kspec

    kernel = kspec.load(REPO / "specs" / "tuned.toml").transpose_tiled
    worked_out = []
    launch_config = kernel.launch_config
    monkeypatch.setattr(kernel, "launch_config", lambda config, key: worked_out.append(tuple(key)) or launch_config(config, key))
    rng = np.random.default_rng(0)
    for n, m in ((64, 48), (64, 48), (63, 47), (64, 48)):  # (63, 47): the bucket of (64, 48), another grid
        src = rng.standard_normal((n, m)).astype(np.float32)
        dst = np.zeros((m, n), np.float32)
        kernel(src, dst, np.int32(n), np.int32(m))
        np.testing.assert_array_equal(dst, src.T)
    assert worked_out == [(64, 48), (63, 47)]
    assert len(kernel.choices()) == 1  # one bucket: the config was chosen once
