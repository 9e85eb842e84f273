# Sourced by benchmarks/clients/peer_groups.sh and benchmarks/clients/library_suites.sh: how a test suite runs in each mode.
# Sets `launch` (the command before pytest's arguments) and `plugins`, and exports what the mode needs:
#   kspec    kspec under CuPy through `python -m kspec.cupy` (in every xdist worker);
#   capture  the same under `kspec capture`'s recorder (records in $res/records, merged by capture_merge);
#   served   the same from a build of captured specs only ($CAPTURE_BUILD): KSPEC_COMPILE=never, kspec's NVRTC
#            blocked, an empty cache; each worker logs its kernel loads to $KSPEC_SERVED_LOG
#            (benchmarks/clients/served_summary.py);
#   other    CuPy itself (with KSPEC_CORPUS=DIR, peer_groups.sh also records what CuPy constructs).
suite_mode() {
  local mode=$1 root=$2
  plugins=()
  case $mode in
    kspec) launch=(python3 -m kspec.cupy -m pytest); unset KSPEC_CORPUS;;
    capture) launch=(python3 -m kspec.cupy -m pytest); unset KSPEC_CORPUS
       export KSPEC_CAPTURE_DIR=$res/records KSPEC_CALL_RECORDS=0;;
    served) launch=(python3 -m kspec.cupy -m pytest); unset KSPEC_CORPUS
       export KSPEC_COMPILE=never KSPEC_BINARIES=${CAPTURE_BUILD:?set CAPTURE_BUILD} KSPEC_CACHE_DIR=$(mktemp -d) \
              KSPEC_MEMO_DIR=$(mktemp -d) KSPEC_SERVED_LOG=${KSPEC_SERVED_LOG:-$res/served-log}
       export PYTHONPATH="$PYTHONPATH:$root/benchmarks/helpers:$root/benchmarks/helpers/_no_nvrtc"; plugins+=(-p _compile_log_plugin);;
    *) launch=(python3 -m pytest);;
  esac
}

# After a capture run: merge its records into the spec files of ${CAPTURE_OUT:-$res/captured}.
capture_merge() {
  python3 -m kspec capture --records "$KSPEC_CAPTURE_DIR" -o "${CAPTURE_OUT:-$res/captured}"
}
