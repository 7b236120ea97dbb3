#!/usr/bin/env bash
# run 69j (session 61, review mend): the thin kernel's output-stage fault match as one helper
# (output_fault_row; only the injecting builds' PTX changes): the thin CUDA tests.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 150 python3 -c "from ftcompile.ops import cuda_gemm as c; print(c.build())" > $OUT/run69j_build.txt 2>&1; st build rc=$?
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py -k "thin" > $OUT/run69j_tests.txt 2>&1; st tests rc=$?
tail -2 $OUT/run69j_tests.txt
