#!/usr/bin/env bash
# run 74b (session 66): on run 74a's warm machine: the end-to-end and other CUDA tests (the host's
# thin call without the x-side buffer among them) and the thread table, on the tree's library.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
export FTCOMPILE_GEMM_LIB=$(ls /tmp/torch_ext/ftcompile_gemm_ab_tree/*.so | head -1)
timeout 100 python3 benchmarks/bench_gemm.py --parts thread --out $OUT > $OUT/run74b_table.txt 2>&1; st table rc=$?
grep -E "^\| (1|8|16)x(768x768|2304x768|3072x768|768x3072|4096x4096|4096x11008) " $OUT/gemm_bench.md | cut -d'|' -f2-9,12
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_e2e.py tests/test_cuda_decode.py tests/test_fastpath.py \
  tests/test_replay.py tests/test_cudagraphs.py tests/test_inference_ops.py > $OUT/run74b_tests.txt 2>&1; st tests rc=$?
tail -2 $OUT/run74b_tests.txt; grep -E "^(FAILED|ERROR)|Error" $OUT/run74b_tests.txt | head -10
