#!/usr/bin/env bash
# Issue [CAP]'s whole-group check, a shard at a time: each shard of a ../shared/peer group (PEER_SHARD=K/N) is run
# under `kspec capture`, its captured specs validated and built (each captured launch variant alone: the capture
# run's binary cache serves the build), then run again served from that build alone (KSPEC_COMPILE=never, kspec's
# NVRTC blocked, empty caches). On the GPU machine, after `bash ../shared/device/prepare.sh`:
#   bash .device/run.sh bash benchmarks/clients/captured_shards.sh client 5 "0 1" [CAPTURE_SECONDS] [SERVED_SECONDS]
# Every shard writes $RESULTS/GROUP-K-of-N/ (the two -v logs, the served run's kernel loads, build.json, the captured
# specs as captured.tgz); `python3 benchmarks/clients/shard_table.py $RESULTS` prints the table over every shard run so
# far (the whole group once all N are there). PEER_GPUS (default: every GPU) and PEER_JOBS (default: the cores less
# four) spread the xdist workers; ARCH (default sm_90) is what the build compiles for.
set -u
group=$1; n=$2; shards=$3; t_capture=${4:-300}; t_served=${5:-300}
root=$PWD; res=${RESULTS:-/tmp/shards}; mkdir -p "$res"
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
export PEER_GPUS=${PEER_GPUS:-$(( gpus > 0 ? gpus : 1 ))} PEER_JOBS=${PEER_JOBS:-$(( $(nproc) - 4 ))}
for k in $shards; do
  out=$res/$group-$k-of-$n; rm -rf "$out"; mkdir -p "$out"
  export PEER_SHARD=$k/$n
  start=$SECONDS
  RESULTS=$out CAPTURE_OUT=$out/captured bash "$root/benchmarks/clients/peer_groups.sh" capture "$group:0:$t_capture:1" | tail -1
  captured=$((SECONDS - start))
  python3 -m kspec validate "$out/captured" | tail -1
  start=$SECONDS
  python3 -m kspec build "$out/captured" -o "$out/build" --arch "${ARCH:-sm_90}" --json >"$out/build.json" 2>"$out/build.err"
  built=$((SECONDS - start)); bytes=$(du -sb "$out/build" 2>/dev/null | cut -f1)
  kernels=$(cat "$out"/captured/*.toml 2>/dev/null | grep -c '^\[\[kernel\]\]')
  start=$SECONDS
  RESULTS=$out CAPTURE_BUILD=$out/build KSPEC_SERVED_LOG=$out/served-log \
    bash "$root/benchmarks/clients/peer_groups.sh" served "$group:0:$t_served:1" | tail -1
  echo "{\"capture_s\": $captured, \"build_s\": $built, \"served_s\": $((SECONDS - start)), \"build_bytes\": ${bytes:-0}, \"kernels\": $kernels}" >"$out/times.json"
  tar czf "$out/captured.tgz" -C "$out" captured && rm -rf "$out/captured" "$out/build"
  python3 "$root/benchmarks/clients/shard_table.py" "$res" | tail -3
done
