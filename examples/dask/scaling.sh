#!/usr/bin/env bash
# The scaling table of examples/dask on one machine with GPUS (default 1,2,4): kspec's rows from workers that
# never compile, then CuPy's rows, then the table. Needs kspec, CuPy, dask[array] and distributed.
#   1. capture: a small run on one GPU under `kspec capture` records every kernel the workers construct (the
#      pipeline's ElementwiseKernel, cupyx.scipy.ndimage's Laplacian, the ReductionKernel) as spec files. It runs
#      the measured runs' chunk sizes (PIPELINE_CHUNK_MIB, STENCIL_CHUNK_MIB), over a few chunks: ndimage writes
#      other code (64-bit indices) for a chunk over 2 GiB than for a smaller one, so a capture of other chunk
#      sizes misses the kernels the measured runs build (their workers then refuse to compile them);
#   2. `kspec build` compiles them for this machine's GPU;
#   3. kspec's rows: the workers load every kernel from that build and the typed module's binaries, with
#      KSPEC_COMPILE=never, empty kspec caches and kspec's NVRTC blocked; each worker's kernel loads are printed;
#   4. CuPy's rows, the same graphs with CuPy's kernels, in the same call.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT_DIR:-$PWD/dask-scaling}
gpus=${GPUS:-1,2,4}
py=${PYTHON:-python3}
rm -rf "$out" && mkdir -p "$out"
# chunks of pipeline.largest_chunk_mib(): 8 GiB on a GPU of 120 GiB or more (an H200), 4 GiB on smaller ones
largest=$("$py" -c "import sys; sys.path.insert(0, '$here'); import pipeline; print(pipeline.largest_chunk_mib())")
pchunk=${PIPELINE_CHUNK_MIB:-$largest} schunk=${STENCIL_CHUNK_MIB:-$largest}
chunks=(--pipeline-chunk-mib "$pchunk" --stencil-chunk-mib "$schunk")
"$py" -m kspec capture -o "$out/captured" -- "$py" "$here/scaling.py" --gpus 1 --repeats 1 "${chunks[@]}" \
  --pipeline-gib "$(awk "BEGIN {print $pchunk * 4 / 1024}")" --stencil-gib "$(awk "BEGIN {print $schunk * 2 / 1024}")" \
  >"$out/capture.log" 2>&1 || { tail -30 "$out/capture.log"; exit 1; }
"$py" -m kspec validate "$out/captured"
arch=$("$py" -c "import kspec; print(kspec.get_device().arch)")
"$py" -m kspec build "$out/captured" -o "$out/build" --arch "$arch" -q
# shellcheck disable=SC2086
"$py" -m kspec.cupy "$here/scaling.py" --gpus "$gpus" --served "$out/build" --out "$out/kspec.jsonl" "${chunks[@]}" ${SCALING_ARGS:-}
# shellcheck disable=SC2086
"$py" "$here/scaling.py" --gpus "$gpus" --out "$out/cupy.jsonl" "${chunks[@]}" ${SCALING_ARGS:-}
"$py" "$here/scaling.py" --table "$out/kspec.jsonl" "$out/cupy.jsonl"
