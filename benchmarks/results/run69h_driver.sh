#!/usr/bin/env bash
# run 69h (session 61): the final code (T3, the protected depth-1 peel): the streaming-kernel CUDA
# tests, then the thread scheme's table (bench_gemm.py --parts thread).
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 200 python3 -c "from ftcompile.ops import cuda_gemm as c; print(c.build())" > $OUT/run69h_build.txt 2>&1; st build rc=$?
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py -k "stream" > $OUT/run69h_tests.txt 2>&1; st tests rc=$?
tail -2 $OUT/run69h_tests.txt
timeout 150 python3 benchmarks/bench_gemm.py --parts thread --out $OUT > $OUT/run69h_table.log 2>&1; st table rc=$?
grep -A60 "Thread scheme (bf16)" $OUT/gemm_bench.md | grep -E "^\| (1|8|16)x" | cut -d'|' -f2,4,5,6,8,12
