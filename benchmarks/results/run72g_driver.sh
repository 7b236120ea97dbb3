#!/usr/bin/env bash
# run 72g (session 64, the last device minutes): thin_pdl_probe.py on the production library.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 120 python3 -c "from ftcompile.ops import cuda_gemm as c; print(c.build())" > $OUT/run72g_build.txt 2>&1; st build rc=$?
timeout 100 python3 benchmarks/thin_pdl_probe.py > $OUT/run72g_probe.txt 2>&1; st probe rc=$?
grep -v Warn $OUT/run72g_probe.txt | tail -8
