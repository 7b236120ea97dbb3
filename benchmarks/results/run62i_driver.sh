#!/usr/bin/env bash
# run 62i: the tile-local range without selects (tree) against HEAD; the global CUDA tests on the tree
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
ABLATE=0 REF=ab_ref/main.cu STAGE=build bash benchmarks/ablate_global.sh > /tmp/b.log 2>&1; st build; ls /tmp/ablate/*.so
FTCOMPILE_GEMM_LIB=/tmp/ablate/libgemm_0.so timeout 60 python3 -m pytest -q -p no:cacheprovider -x --timeout=60 tests/test_cuda_gemm.py -k global > $OUT/run62i_tests.txt 2>&1; st tests rc=$?
tail -2 $OUT/run62i_tests.txt
OUT=/tmp/ab ABLATE=0 REF=ab_ref/main.cu STAGE=run NAMES=on@tiles BASE=off#192 SHAPES=8192x2304x768,4096x3072x768,8192x768x3072,4096x768x768 timeout 80 bash benchmarks/ablate_global.sh > /dev/null 2>&1; st run rc=$?
cp /tmp/ab/ablate_global.txt $OUT/run62i_ab.txt; cat $OUT/run62i_ab.txt
