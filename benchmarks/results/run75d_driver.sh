#!/usr/bin/env bash
# run 75d (session 67), the final code on the machine of run 75c (attention library built there): the
# thread table (bench_gemm.py --parts thread); the end-to-end, decode, fast-path, replay, CUDA-graph and
# inference-op tests.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
(timeout 400 python3 -c "from ftcompile.ops import cuda_attention as a; a.library(); print('attention built')" > $OUT/run75d_attn_build.txt 2>&1) &
timeout 200 python3 -c "from ftcompile.ops import cuda_gemm; print(cuda_gemm.build())" > $OUT/run75d_build.txt 2>&1; st build rc=$?
timeout 120 python3 benchmarks/bench_gemm.py --parts thread --out $OUT > $OUT/run75d_table.txt 2>&1; st table rc=$?
grep -E "^\| (1|8|16|32|64|128)x" $OUT/gemm_bench.md | head -48 | cut -d'|' -f2-8
wait; st attention build; tail -1 $OUT/run75d_attn_build.txt
timeout 220 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_e2e.py tests/test_cuda_decode.py tests/test_fastpath.py \
  tests/test_replay.py tests/test_cudagraphs.py tests/test_inference_ops.py > $OUT/run75d_tests.txt 2>&1; st tests rc=$?
tail -1 $OUT/run75d_tests.txt; grep -E "^(FAILED|ERROR)|Error" $OUT/run75d_tests.txt | head -10
