#!/usr/bin/env bash
# run 75e (session 67): the final code (XREP without its rotated A/B path, ALIAS reverted, the N = 16
# wgmma wrapper gone): every GEMM CUDA test on the production library.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 200 python3 -c "from ftcompile.ops import cuda_gemm; print(cuda_gemm.build())" > $OUT/run75e_build.txt 2>&1; st build rc=$?
timeout 280 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py > $OUT/run75e_tests.txt 2>&1; st tests rc=$?
tail -1 $OUT/run75e_tests.txt; grep -E "^(FAILED|ERROR)|Error" $OUT/run75e_tests.txt | head -10
