#!/usr/bin/env bash
# One device call's worth of GPU work (the device tool returns at most 8 files, so logs go into one tarball):
#   bash .device/run.sh bash benchmarks/gpu_batch.sh [STEP ...]
# Steps (default: tests train jax): tests (the GPU test suite, 12 workers, then the stream-order file alone, then
# the PyTorch tests on kspec's CPU device, which CI cannot run),
# train (benchmarks/kernels/train_step.py), jax (benchmarks/host/jax_jit.py at 4096 elements: eager and jitted host cost),
# cupyx (benchmarks/clients/cupyx_scipy.py: 3 processes a mode for first calls, 4 of both for later ones), layouts (benchmarks/kernels/layout_sweep.py, 4 cases per class,
# dtype and rank), dask (examples/dask/scaling.sh on the GPUs of the machine, GPUS=1,2,4 by default; SCALING_ARGS pass
# on). Each step prints its summary; logs land in
# $OUT/gpu_batch.tar.gz (or /tmp/gpu_batch without $OUT). A step's time limit keeps one call under 10 minutes.
set -u
out=${OUT:-/tmp/gpu_batch}; logs=$(mktemp -d); mkdir -p "$out"
steps=${*:-tests train jax}
if ls .device/whl-extra/*.whl >/dev/null 2>&1; then  # benchmarks/device_wheels.sh: after the checkout on the path
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/kspec-extra .device/whl-extra/*.whl >/dev/null 2>&1
  export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}/tmp/kspec-extra" PATH="/tmp/kspec-extra/bin:$PATH"
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || true
git log --oneline -1 2>/dev/null || true
start=$SECONDS
for step in $steps; do
  case $step in
    tests)
      timeout 300 python3 -m pytest -m gpu -q -n 12 --dist loadfile -p no:cacheprovider \
        --deselect tests/kernels_tests/test_stream_order_gpu.py >"$logs/tests.log" 2>&1
      echo "tests rc=$? $((SECONDS - start)) s: $(tail -1 "$logs/tests.log")"
      grep -E "^(FAILED|ERROR)" "$logs/tests.log" | head -20
      timeout 60 python3 -m pytest -q -p no:cacheprovider tests/kernels_tests/test_stream_order_gpu.py >"$logs/stream.log" 2>&1
      echo "stream order rc=$?: $(tail -1 "$logs/stream.log")"
      # the PyTorch tests on kspec's CPU device: CI has no PyTorch (its Linux wheel brings CUDA's libraries); this machine does
      timeout 240 python3 -m pytest -m "not gpu" -q -n 8 --dist loadfile -p no:cacheprovider tests/torch_tests tests/grad_tests \
        >"$logs/torch_cpu.log" 2>&1
      echo "torch on the CPU device rc=$?: $(tail -1 "$logs/torch_cpu.log")" ;;
    train)
      timeout 150 python3 benchmarks/kernels/train_step.py --reps 50 --rounds 3 >"$logs/train.log" 2>&1
      echo "train rc=$? $((SECONDS - start)) s"; tail -12 "$logs/train.log" ;;
    jax)
      timeout 120 python3 benchmarks/host/jax_jit.py --sizes 4096 --chain 1 --calls 2000 --repeat 9 >"$logs/jax.log" 2>&1
      echo "jax rc=$? $((SECONDS - start)) s"; tail -10 "$logs/jax.log" ;;
    cupyx)
      timeout 280 python3 benchmarks/clients/cupyx_scipy.py --procs 3 --paired 4 --reps 5 --log "$logs/cupyx.jsonl" >"$logs/cupyx.log" 2>&1
      echo "cupyx rc=$? $((SECONDS - start)) s"; tail -14 "$logs/cupyx.log" ;;
    layouts)
      timeout 480 python3 benchmarks/kernels/layout_sweep.py --cases 4 --reps 15 >"$logs/layouts.log" 2>&1
      echo "layouts rc=$? $((SECONDS - start)) s"; grep -A40 "cases: kspec" "$logs/layouts.log" | head -40 ;;
    dask)
      OUT_DIR="$logs/dask" timeout 560 bash examples/dask/scaling.sh >"$logs/dask.log" 2>&1
      echo "dask rc=$? $((SECONDS - start)) s"; grep -E '^\| |kernel loads' "$logs/dask.log" | tail -20
      rm -rf "$logs/dask/build" "$logs/dask/captured" ;;
    *) echo "unknown step $step (tests, train, jax, cupyx, layouts, dask)" ;;
  esac
done
tar -czf "$out/gpu_batch.tar.gz" -C "$logs" .
