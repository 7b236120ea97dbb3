#!/usr/bin/env bash
# run 76a (session 68): WIDE on (FTG_THIN_REPLICA_NX 64, THIN_REPLICA_WIDE_MAX_N 3072): the production
# library; every GEMM CUDA test; the thread table; the attention library built alongside for run 76b.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
(timeout 500 python3 -c "from ftcompile.ops import cuda_attention as a; a.library(); print('attention built')" > $OUT/run76a_attn_build.txt 2>&1) &
timeout 240 python3 -c "from ftcompile.ops import cuda_gemm; print(cuda_gemm.build())" > $OUT/run76a_build.txt 2>&1; st build rc=$?
tail -1 $OUT/run76a_build.txt
timeout 280 python3 -m pytest -q -p no:cacheprovider -rs tests/test_cuda_gemm.py > $OUT/run76a_tests.txt 2>&1; st tests rc=$?
tail -1 $OUT/run76a_tests.txt; grep -E "^(FAILED|ERROR)|Error|SKIPPED" $OUT/run76a_tests.txt | head -10
timeout 100 python3 benchmarks/bench_gemm.py --parts thread --out $OUT > $OUT/run76a_table.txt 2>&1; st table rc=$?
grep -E "^\| (1|8|16|32|64|128)x" $OUT/gemm_bench.md | head -48 | cut -d'|' -f2-8
st attention build so far; tail -1 $OUT/run76a_attn_build.txt
