#!/usr/bin/env bash
# run 64f (session 57): the few-row width / split model against explicit variants (knob_ab.py).
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
python3 -c "from ftcompile.ops import cuda_gemm as c; print(c.build())" > /tmp/build.log 2>&1; echo "[$(( $(date +%s) - t0 ))s] build"
KNOB_AB_ROUNDS=1 KNOB_AB_VARIANTS=off,off#128/1,off#128/2,off#128/4,off#192/1,off#192/2,off#256/1,off#256/2 \
KNOB_AB_SHAPES=256x4096x4096,128x4096x4096,256x11008x4096,128x11008x4096,256x2048x2048,256x4096x11008 \
  timeout 100 python3 benchmarks/knob_ab.py > $OUT/run64f_fewrows.txt 2>&1; echo "[$(( $(date +%s) - t0 ))s] probe"
grep "^|" $OUT/run64f_fewrows.txt
