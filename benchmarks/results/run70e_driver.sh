#!/usr/bin/env bash
# run 70e (session 62): the final code's thread table (bench_gemm.py --parts thread), the attention
# library built in its background; then the end-to-end CUDA tests.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 200 python3 -c "from ftcompile.ops import cuda_gemm as c; print(c.build())" > $OUT/run70e_build.txt 2>&1; st build rc=$?
(timeout 300 python3 -c "from ftcompile.ops import cuda_attention as a; a.library(); print('attention built')" > $OUT/run70e_attn_build.txt 2>&1) &
timeout 200 python3 benchmarks/bench_gemm.py --parts thread --out $OUT > $OUT/run70e_table.log 2>&1; st table rc=$?
grep -A60 "Thread scheme (bf16)" $OUT/gemm_bench.md | grep -E "^\| (1|16|32|64|128)x" | cut -d'|' -f2,4,5,6,8
wait; st attention build
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_e2e.py > $OUT/run70e_e2e.txt 2>&1; st e2e rc=$?
tail -2 $OUT/run70e_e2e.txt
