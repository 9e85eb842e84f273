#!/usr/bin/env bash
# Third-party libraries written against CuPy's kernel APIs, their own test suites, with kspec under CuPy
# (`python -m kspec.cupy`, issue [RC2]'s switch; modes kspec, capture, served as in benchmarks/helpers/_suite_modes.sh) or
# with CuPy itself, on the GPU machine:
#   LIB_WHEELS=DIR SIGPY_TESTS=DIR bash .device/run.sh bash benchmarks/clients/library_suites.sh kspec "cucim:1500:150:1 sigpy:0:200:1"
# LIB_WHEELS holds the libraries' wheels and the dependencies the machine lacks (installed without dependencies,
# outside the image, into $LIB_SITE); SIGPY_TESTS is the tests/ folder of sigpy's repository (its wheel has none;
# cuCIM's tests are inside its package). Each word is LIB:SAMPLE:SECONDS:SEED (SAMPLE 0 = the whole suite, a seeded
# sample otherwise, the same in both modes: ../shared/peer's kspec_alias plugin). Every test's outcome is a line of
# the -v log ${RESULTS:-/tmp/res}/MODE-LIB-sSEED.log; pair them with `python3 benchmarks/clients/client_compare.py RESULTS`.
set -u
mode=$1; specs=$2
root=$PWD; peer=$root/.device/peer; res=${RESULTS:-/tmp/res}; mkdir -p "$res"
site=${LIB_SITE:-/tmp/lib-site}
if [ ! -d "$site" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "${LIB_WHEELS:?set LIB_WHEELS}"/*.whl || exit 1
fi
export PYTHONPATH="$site:$peer:$root${PYTHONPATH:+:$PYTHONPATH}"
unset KSPEC_PEER  # the peer's plugin only samples; the switch is kspec.cupy's
# shellcheck source=benchmarks/helpers/_suite_modes.sh
. "$root/benchmarks/helpers/_suite_modes.sh"
suite_mode "$mode" "$root"
for spec in $specs; do
  IFS=: read -r lib n seconds seed <<<"$spec"
  case $lib in
    cucim) where=$site; files="cucim/skimage";;
    sigpy) where=${SIGPY_TESTS:?set SIGPY_TESTS}/..; files="tests";;
    *) echo "unknown library $lib (cucim, sigpy)"; continue;;
  esac
  log=$res/$mode-$lib-s$seed.log
  # shellcheck disable=SC2086  # $files is a list of paths
  (cd "$where" && PEER_SAMPLE=$n PEER_SEED=$seed timeout "$seconds" "${launch[@]}" -v -p kspec_alias "${plugins[@]}" -p no:cacheprovider \
     -n "${PEER_JOBS:-15}" --timeout="${PEER_TEST_TIMEOUT:-120}" $files >"$log" 2>&1)
  if [ "$mode" = capture ]; then capture_merge; fi
  echo "$mode $lib sample=$n seed=$seed: $(grep -cE ' PASSED ' "$log") passed, $(grep -cE ' (FAILED|ERROR) ' "$log") failed, $(tail -1 "$log" | cut -c1-120)"
done
