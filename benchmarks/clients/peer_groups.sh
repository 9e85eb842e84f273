#!/usr/bin/env bash
# CuPy's own test suites (../shared/peer's groups) with kspec under CuPy or CuPy itself, on the GPU machine, after
# `bash ../shared/device/prepare.sh` (which copies ../shared/peer to .device/peer):
#   bash .device/run.sh bash benchmarks/clients/peer_groups.sh kspec "cupy:3000:230:2 cupyx:3000:100:2 core:0:60:1"
# Mode kspec runs pytest through `python -m kspec.cupy` (the switch a user would use: CuPy's constructors, cupy.fuse
# and cupyx.jit are kspec's from CuPy's import on, in every xdist worker); modes capture and served (issue [CAP])
# run it under `kspec capture` and then from a build of what it captured alone; mode cupy runs CuPy itself and, with
# KSPEC_CORPUS=DIR, records every kernel CuPy's code constructs (benchmarks/helpers/_corpus_recorder.py) for
# `benchmarks/clients/cupy_corpus.py check`. Each word is GROUP:SAMPLE:SECONDS:SEED (SAMPLE 0 = the whole group). Groups:
# core, fusejit, client, cupyx, cupy (CuPy's whole library: always sample). Every test's outcome is a line of the
# -v log, read even when the time limit cuts a run short; logs go to ${RESULTS:-/tmp/res}. Count them with
# `python3 benchmarks/clients/client_compare.py RESULTS` (it pairs cupy-GROUP-sSEED.log with kspec-GROUP-sSEED.log).
# PEER_SHARD=K/N runs every Nth test from the Kth (benchmarks/helpers/_shard.py: a whole group over N calls);
# PEER_GPUS=G spreads the PEER_JOBS xdist workers over G GPUs (CUDA_VISIBLE_DEVICES per worker).
set -u
mode=$1; specs=$2
root=$PWD; peer=$root/.device/peer; res=${RESULTS:-/tmp/res}; mkdir -p "$res"
export PYTHONPATH="$peer:$root/benchmarks/helpers:$peer/cupy-tests/tests:$root${PYTHONPATH:+:$PYTHONPATH}"
unset KSPEC_PEER  # the peer's own alias plugin then only samples; the switch is kspec.cupy's
# shellcheck source=benchmarks/helpers/_suite_modes.sh
. "$root/benchmarks/helpers/_suite_modes.sh"
suite_mode "$mode" "$root"
plugins=(-p kspec_alias -p _corpus_recorder -p _shard "${plugins[@]}")
workers=(-n "${PEER_JOBS:-15}")
if [ "${PEER_GPUS:-1}" -gt 1 ]; then  # xdist's gateway specs: N*popen//env:... per GPU
  workers=(--dist load)
  for ((g = 0; g < PEER_GPUS; g++)); do workers+=(--tx "$(( ${PEER_JOBS:-15} / PEER_GPUS ))*popen//env:CUDA_VISIBLE_DEVICES=$g"); done
fi
for spec in $specs; do
  IFS=: read -r group n seconds seed <<<"$spec"
  case $group in
    core) files="cupy_tests/core_tests/test_userkernel.py cupy_tests/core_tests/test_elementwise.py cupy_tests/core_tests/test_carray.py
           cupy_tests/core_tests/test_reduction.py cupy_tests/core_tests/test_raw.py";;
    fusejit) files="cupy_tests/core_tests/fusion_tests/test_misc.py cupy_tests/core_tests/fusion_tests/test_reduction.py
           cupy_tests/core_tests/fusion_tests/test_kernel_cache.py cupy_tests/core_tests/fusion_tests/test_ufunc.py
           cupyx_tests/jit_tests/test_raw.py cupyx_tests/jit_tests/test_device_function.py cupyx_tests/jit_tests/test_cooperative_groups.py";;
    client) files="cupyx_tests/scipy_tests/ndimage_tests cupyx_tests/scipy_tests/interpolate_tests cupyx_tests/scipy_tests/signal_tests";;
    cupyx) files="cupyx_tests/scipy_tests/sparse_tests cupyx_tests/scipy_tests/fft_tests cupyx_tests/scipy_tests/fftpack_tests
           cupyx_tests/scipy_tests/linalg_tests cupyx_tests/scipy_tests/spatial_tests cupyx_tests/scipy_tests/stats_tests cupyx_tests/signal_tests";;
    cupy) files="$(cd "$peer/cupy-tests/tests" && ls -d cupy_tests/*_tests | grep -v -e cuda_tests -e io_tests)";;
    *) echo "unknown group $group (core, fusejit, client, cupyx, cupy)"; continue;;
  esac
  log=$res/$mode-$group-s$seed${PEER_SHARD:+-shard${PEER_SHARD/\//of}}.log
  # shellcheck disable=SC2086  # $files is a list of paths
  (cd "$peer/cupy-tests/tests" && PEER_SAMPLE=$n PEER_SEED=$seed timeout "$seconds" "${launch[@]}" -v "${plugins[@]}" \
     -p no:cacheprovider "${workers[@]}" --timeout="${PEER_TEST_TIMEOUT:-120}" -k "not nvcc and not jitify" $files >"$log" 2>&1)
  if [ "$mode" = capture ]; then capture_merge; fi
  echo "$mode $group sample=$n seed=$seed: $(grep -cE ' PASSED ' "$log") passed, $(grep -cE ' (FAILED|ERROR) ' "$log") failed, $(tail -1 "$log" | cut -c1-120)"
done
