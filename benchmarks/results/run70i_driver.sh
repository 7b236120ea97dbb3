#!/usr/bin/env bash
# run 70i (session 62): every GEMM CUDA test on the committed code (G), the session's last device minutes.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 150 python3 -c "from ftcompile.ops import cuda_gemm as c; print(c.build())" > $OUT/run70i_build.txt 2>&1; st build rc=$?
timeout 230 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py > $OUT/run70i_tests.txt 2>&1; st tests rc=$?
tail -3 $OUT/run70i_tests.txt; grep -E "^(FAILED|ERROR)" $OUT/run70i_tests.txt | head
