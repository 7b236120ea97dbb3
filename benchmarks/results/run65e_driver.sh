#!/usr/bin/env bash
# run 65e (session 58): the shapes whose automatic check TILE_CHECK_SLACK (K <= 3072, <= 4 waves)
# turns from rows to tiles, both checks timed, two rounds (knob_ab.py); the table's 4096x3072x768
# and 8192x3072x768 as anchors.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
python3 -c "from ftcompile.ops import cuda_gemm as c; print(c.build())" > /tmp/build.log 2>&1; st build rc=$?
S=1024x11008x768,1024x11008x3072,1024x14336x2048,2048x5120x768,2048x5120x3072,4096x3072x3072
S=$S,16384x768x768,16384x768x3072,512x2304x3072,384x3072x3072,4096x3072x768,8192x3072x768
KNOB_AB_SHAPES=$S KNOB_AB_VARIANTS=off,on,on@rows,on@tiles timeout 300 python3 benchmarks/knob_ab.py \
  > $OUT/run65e_checks.txt 2>&1; st checks rc=$?
grep "^|" $OUT/run65e_checks.txt
