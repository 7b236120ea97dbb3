#!/usr/bin/env bash
# run 76f (session 68): thread_kernel takes the thin kernel at 33-64 rows of 1.5-2 MB weights (run 76e):
# the thin / thread GEMM CUDA tests on the production library.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 240 python3 -c "from ftcompile.ops import cuda_gemm; print(cuda_gemm.build())" > $OUT/run76f_build.txt 2>&1; st build rc=$?
timeout 200 python3 -m pytest -q -p no:cacheprovider -rs tests/test_cuda_gemm.py -k "thin or thread or choice" > $OUT/run76f_tests.txt 2>&1; st tests rc=$?
tail -1 $OUT/run76f_tests.txt; grep -E "^(FAILED|ERROR)|SKIPPED" $OUT/run76f_tests.txt | head -10
