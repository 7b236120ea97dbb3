#!/usr/bin/env bash
# run 68e (session 60): every tile width forced, with the tail split, where a tail-aware width
# model would pick another width than today's (tail_width_probe.py).
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 150 python3 -c "from ftcompile.ops import cuda_gemm as c; print(c.build())" > $OUT/run68e_build.txt 2>&1; st build rc=$?
timeout 200 python3 benchmarks/tail_width_probe.py > $OUT/run68e_probe.txt 2>&1; st probe rc=$?
cut -c1-400 $OUT/run68e_probe.txt
