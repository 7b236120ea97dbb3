#!/usr/bin/env bash
# run 76e (session 68): kernel_choice_probe.py at 33-64 rows of weights <= 2 MB (streaming against the
# thin kernel with its 64-row replica).
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 240 python3 -c "from ftcompile.ops import cuda_gemm; print(cuda_gemm.build())" > $OUT/run76e_build.txt 2>&1; st build rc=$?
timeout 200 python3 benchmarks/kernel_choice_probe.py --shapes 40x1024x1024,48x1024x1024,64x1024x1024,40x768x768,48x768x768,64x768x768,64x1024x768,64x768x1024,64x2048x512 > $OUT/run76e_probe.txt 2>&1; st probe rc=$?
cut -c1-400 $OUT/run76e_probe.txt
