#!/usr/bin/env bash
# run 78c (session 70): HALF (64-row thin tiles at the decode rows): the library, the thin / thread /
# choice CUDA tests, half_tile_probe.py, then every GEMM CUDA test.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=$PWD/build/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 240 python3 -c "from ftcompile.ops import cuda_gemm; print(cuda_gemm.build())" > $OUT/run78c_build.txt 2>&1; st build rc=$?
tail -1 $OUT/run78c_build.txt
timeout 120 python3 -m pytest -q -p no:cacheprovider -rs tests/test_cuda_gemm.py -k "thin or thread or choice" > $OUT/run78c_tests.txt 2>&1; st tests rc=$?
tail -1 $OUT/run78c_tests.txt; grep -E "^(FAILED|ERROR)|SKIPPED|Error" $OUT/run78c_tests.txt | head -10
timeout 150 python3 benchmarks/half_tile_probe.py > $OUT/run78c_probe.txt 2>&1; st probe rc=$?
cut -c1-300 $OUT/run78c_probe.txt
timeout 230 python3 -m pytest -q -p no:cacheprovider -rs tests/test_cuda_gemm.py > $OUT/run78c_tests_all.txt 2>&1; st all tests rc=$?
tail -1 $OUT/run78c_tests_all.txt; grep -E "^(FAILED|ERROR)" $OUT/run78c_tests_all.txt | head -10
