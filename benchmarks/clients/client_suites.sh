#!/usr/bin/env bash
# CuPy's cupyx.scipy suites (ndimage / interpolate / signal: real kernels written for CuPy) with CuPy's constructors
# replaced by kspec's (mode kspec) or CuPy itself (mode cupy), on the GPU machine, after
# `bash ../shared/device/prepare.sh` (which copies ../shared/peer to .device/peer):
#   bash .device/run.sh bash benchmarks/clients/client_suites.sh kspec "ndimage:3000:400 signal:3000:200"
# Each word is SUITE:SAMPLE:SECONDS (a seeded sample, PEER_SEED, default 1; SAMPLE 0 = the whole suite). Every test's
# outcome is a line of the -v log (read even when the time limit cuts a run short); logs go to ${RESULTS:-/tmp/res}.
# KSPEC_CORPUS / KSPEC_COMPILE_STATS: see benchmarks/helpers/_corpus_recorder.py. Count with benchmarks/clients/client_compare.py.
set -u
mode=$1; specs=$2
root=$PWD; peer=$root/.device/peer; res=${RESULTS:-/tmp/res}; mkdir -p "$res"
export PYTHONPATH="$peer:$root/benchmarks/helpers:$peer/cupy-tests/tests:$root${PYTHONPATH:+:$PYTHONPATH}"
if [ "$mode" = kspec ]; then export KSPEC_PEER=1; else unset KSPEC_PEER; fi
for spec in $specs; do
  IFS=: read -r suite n seconds <<<"$spec"
  log=$res/$mode-$suite-s${PEER_SEED:-1}.log
  (cd "$peer/cupy-tests/tests" && PEER_SAMPLE=$n timeout "$seconds" python3 -m pytest -v -p kspec_alias -p _corpus_recorder \
     -p no:cacheprovider -n "${PEER_JOBS:-14}" --timeout="${PEER_TEST_TIMEOUT:-60}" -k "not nvcc and not jitify" \
     "cupyx_tests/scipy_tests/${suite}_tests" >"$log" 2>&1)
  echo "$mode $suite sample=$n seed=${PEER_SEED:-1}: $(grep -cE ' PASSED ' "$log") passed, $(grep -cE ' (FAILED|ERROR) ' "$log") failed, $(tail -1 "$log" | cut -c1-120)"
done
