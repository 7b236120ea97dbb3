#!/usr/bin/env bash
# run 73g (session 65): the host's ring depth up to 12 (THIN_MAX_STAGES): the thin and thread CUDA tests.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 120 python3 -c "from ftcompile.ops import cuda_gemm as c; print(c.build())" > $OUT/run73g_build.txt 2>&1; st build rc=$?
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py -k "thin or thread" > $OUT/run73g_tests.txt 2>&1; st tests rc=$?
tail -2 $OUT/run73g_tests.txt; grep -E "^(FAILED|ERROR)|Error" $OUT/run73g_tests.txt | head -10
