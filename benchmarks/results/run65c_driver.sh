#!/usr/bin/env bash
# run 65c (session 58): main with lazy s2 (run 65b) and the tile check's cost slack at K <= 3072
# (run 65a): the global table (the CUDA tests and whole models follow: `gpu_check.sh tests models`,
# run 65d).
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
python3 -c "from ftcompile.ops import cuda_gemm as c; print(c.build())" > /tmp/build.log 2>&1; st build rc=$?
timeout 120 python3 benchmarks/bench_gemm.py --parts global --out $OUT > $OUT/run65c_table.log 2>&1; st table rc=$?
grep -A24 "Global scheme" $OUT/gemm_bench.md | cut -d'|' -f2,8,9,11 | head -26
