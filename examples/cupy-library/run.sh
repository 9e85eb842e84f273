#!/usr/bin/env bash
# The whole loop on a GPU machine with CuPy: capture what app.py builds, build a wheel of it, install it into a fresh
# venv and run app.py there with kspec's NVRTC blocked, KSPEC_COMPILE=never and an empty kspec cache.
set -euo pipefail
cd "$(dirname "$0")"
export KSPEC_LOG=compile
# 1. capture: app.py runs with kspec under CuPy; its kernels become spec files in captured/ (one per cupyx module)
python -m kspec capture -o captured -- python app.py
python -m kspec validate captured
# 2. a wheel of them (the hatch hook compiles each captured specialization for sm_80 and sm_90)
python -m build --wheel --no-isolation --outdir dist .
# 3. a fresh venv with the wheel; app.py served from it, nothing compiled. The venv sees this environment's
#    packages (CuPy) through a .pth file: --system-site-packages would not, where this environment is a venv itself
rm -rf venv && python -m venv --without-pip venv
python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" \
  >"$(venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/outer-environment.pth"
python -m pip install -q --no-deps --prefix venv dist/cupyx_kernels-0.1.0-py3-none-any.whl  # into the venv's scheme
export KSPEC_COMPILE=never KSPEC_CACHE_DIR=$(mktemp -d) KSPEC_MEMO_DIR=$(mktemp -d)
venv/bin/python -c "import kspec; print('registered:', [str(s.directory) for s in kspec.registered_binaries()])"
venv/bin/python -c "
import sys, runpy
sys.modules['cuda.bindings.nvrtc'] = None  # kspec's NVRTC blocked
import kspec.cupy; kspec.cupy.enable()
runpy.run_path('app.py', run_name='__main__')
import kspec; print('kernel loads by source:', {s: sum(e.source == s for e in kspec.compile_log()) for s in ('binary', 'cache', 'compiled')})"
