#!/usr/bin/env bash
# run 78e (session 70): HALF with SELF (the 64-row replica from a second wgmma): the library, the thin /
# thread / choice CUDA tests (stop there on a failure), half_tile_probe.py.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=$PWD/build/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 240 python3 -c "from ftcompile.ops import cuda_gemm; print(cuda_gemm.build())" > $OUT/run78e_build.txt 2>&1; st build rc=$?
tail -1 $OUT/run78e_build.txt
timeout 100 python3 -m pytest -q -x -p no:cacheprovider -rs tests/test_cuda_gemm.py -k "thin or thread or choice" > $OUT/run78e_tests.txt 2>&1; rc=$?; st tests rc=$rc
tail -1 $OUT/run78e_tests.txt; grep -E "^(FAILED|ERROR)|SKIPPED|Error" $OUT/run78e_tests.txt | head -10
[ $rc -eq 0 ] || exit 1
timeout 150 python3 benchmarks/half_tile_probe.py > $OUT/run78e_probe.txt 2>&1; st probe rc=$?
cut -c1-300 $OUT/run78e_probe.txt
