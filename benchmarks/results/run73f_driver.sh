#!/usr/bin/env bash
# run 73f (session 65): thin_depth_probe (ring depth 8 against the deepest that fits, MAX_STAGES 12).
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 200 python3 -c "from ftcompile.ops import cuda_gemm as c; print(c.build())" > $OUT/run73f_build.txt 2>&1; st build rc=$?
timeout 120 python3 benchmarks/thin_depth_probe.py > $OUT/run73f_probe.txt 2>&1; st probe rc=$?
cut -c1-330 $OUT/run73f_probe.txt
