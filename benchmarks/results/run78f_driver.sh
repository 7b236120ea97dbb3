#!/usr/bin/env bash
# run 78f (session 70): the review mend (thin_gemm.cu's host dispatch through one with_padding; the
# kernels SASS-identical): the library and the thin / thread / choice CUDA tests.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=$PWD/build/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 150 python3 -c "from ftcompile.ops import cuda_gemm; print(cuda_gemm.build())" > $OUT/run78f_build.txt 2>&1; st build rc=$?
timeout 80 python3 -m pytest -q -p no:cacheprovider -rs tests/test_cuda_gemm.py -k "thin or thread or choice" > $OUT/run78f_tests.txt 2>&1; st tests rc=$?
tail -1 $OUT/run78f_tests.txt; grep -E "^(FAILED|ERROR)|SKIPPED" $OUT/run78f_tests.txt | head -5
