#!/usr/bin/env bash
# After ../shared/device/prepare.sh, once per checkout: the wheels the GPU machine's image lacks beyond pydantic's.
#   .device/whl        kspec's own dependencies it lacks (tomli-w for `kspec capture` and `kspec show`, rich for
#                      `kspec build`): .device/run.sh installs them with the rest
#   .device/whl-extra  what some tests and steps need: hatchling and build (the hook and deploy tests build wheels),
#                      pytest-xdist and pytest-timeout (the suite, CuPy's peer suites), dask[array] and distributed
#                      (examples/dask); gpu_batch.sh installs them after the checkout on PYTHONPATH
# Carry [".device"] (or its parts) with the device call. Without these, the capture, hatch and Dask GPU tests fail
# or skip for want of a package, not for anything of kspec's.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
[ -x .device/run.sh ] || { echo "run bash ../shared/device/prepare.sh first" >&2; exit 1; }
get() {  # wheels for the machine's Python 3.12 on x86-64 Linux
  local into=$1; shift
  python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$into" "$@" 2>&1 | grep -v '^WARNING' || true
}
get .device/whl --no-deps tomli-w rich markdown-it-py mdurl pygments
mkdir -p .device/whl-extra
get .device/whl-extra hatchling build pytest-xdist pytest-timeout "dask[array]" distributed
# the image's own numpy, jinja2 and CuPy's pins stay: an upgrade here would shadow them
rm -f .device/whl-extra/{numpy,jinja2,markupsafe,MarkupSafe,pytest}-[0-9]*.whl
ls .device/whl .device/whl-extra | tr '\n' ' '; echo
