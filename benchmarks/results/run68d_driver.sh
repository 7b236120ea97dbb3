#!/usr/bin/env bash
# run 68d (session 60): T2's tail test with its shape mended (32 k-steps: a split of 8 k-steps a
# unit; 1024's 16 fell under the model's gain), then the global table (bench_gemm.py --parts global).
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 150 python3 -c "from ftcompile.ops import cuda_gemm as c; print(c.build())" > $OUT/run68d_build.txt 2>&1; st build rc=$?
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py -k "tail" > $OUT/run68d_tests.txt 2>&1; st tests rc=$?
tail -2 $OUT/run68d_tests.txt
timeout 150 python3 benchmarks/bench_gemm.py --parts global --out $OUT > $OUT/run68d_table.log 2>&1; st table rc=$?
grep -A24 "Global scheme" $OUT/gemm_bench.md | cut -d'|' -f2,8,9,11 | head -26
