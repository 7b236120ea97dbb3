#!/usr/bin/env bash
# run 64c (session 57): the global scheme's widths and K splits at many-row shapes the cost model
# splits (NOTES_gemm.md session 57), unprotected and both checks, two rounds (knob_ab.py, no knob).
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
python3 -c "from ftcompile.ops import cuda_gemm as c; print(c.build())" > /tmp/build.log 2>&1; st build rc=$?
KNOB_AB_VARIANTS=off,off#128/1,off#256/1,on@rows,on@rows#128/1,on@tiles,on@tiles#128/1 \
KNOB_AB_SHAPES=2048x1024x4096,1024x2048x4096,1024x1024x4096,2048x1024x2048,2048x768x3072,1024x768x3072,4096x3072x768,2048x2048x2048 \
  timeout 300 python3 benchmarks/knob_ab.py > $OUT/run64c_widths.txt 2>&1; st probe rc=$?
grep "^|" $OUT/run64c_widths.txt
