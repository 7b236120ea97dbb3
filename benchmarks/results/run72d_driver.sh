#!/usr/bin/env bash
# run 72d (session 64): the production library with PRE, the thread scheme's table (bench_gemm.py
# --parts thread, nothing building in the background), then every GEMM CUDA test.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 200 python3 -c "from ftcompile.ops import cuda_gemm as c; print(c.build())" > $OUT/run72d_build.txt 2>&1; st build rc=$?
timeout 200 python3 benchmarks/bench_gemm.py --parts thread --out $OUT > $OUT/run72d_table.log 2>&1; st table rc=$?
grep -A60 "Thread scheme (bf16)" $OUT/gemm_bench.md | grep -E "^\| (1|16|32|64|128)x" | cut -d'|' -f2,4,5,6,8
left=$(( 570 - ($(date +%s) - t0) ))
timeout $left python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py > $OUT/run72d_tests.txt 2>&1; st tests rc=$?
tail -2 $OUT/run72d_tests.txt; grep -E "^(FAILED|ERROR)" $OUT/run72d_tests.txt | head -10
