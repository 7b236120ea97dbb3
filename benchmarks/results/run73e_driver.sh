#!/usr/bin/env bash
# run 73e (session 65): the end-to-end and other CUDA tests on the final code (the attention library
# built beside the GEMM one); cuBLAS's kernels at the decode shapes.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
(timeout 300 python3 -c "from ftcompile.ops import cuda_attention as a; a.library(); print('attention built')" > $OUT/run73e_attn_build.txt 2>&1) &
timeout 200 python3 -c "from ftcompile.ops import cuda_gemm as c; print(c.build())" > $OUT/run73e_build.txt 2>&1; st build rc=$?
timeout 40 python3 benchmarks/cublas_kernel_probe.py > $OUT/run73e_cublas.txt 2>&1; st cublas rc=$?
cut -c1-220 $OUT/run73e_cublas.txt
wait; st attention build; tail -1 $OUT/run73e_attn_build.txt
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_e2e.py tests/test_cuda_decode.py tests/test_fastpath.py \
  tests/test_replay.py tests/test_cudagraphs.py tests/test_inference_ops.py > $OUT/run73e_tests.txt 2>&1; st tests rc=$?
tail -2 $OUT/run73e_tests.txt; grep -E "^(FAILED|ERROR)|Error" $OUT/run73e_tests.txt | head -10
