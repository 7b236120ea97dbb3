#!/usr/bin/env bash
# run 61f: the k-loop's next fragments loaded a step early (tree) against HEAD (K32): global tests on the tree, 3 A/B rounds
set -u
export OUT=${OUT:-/tmp/o}; t0=$(date +%s); L=$OUT/log61f.txt
st() { echo "[$(( $(date +%s) - t0 ))s] $*" >> $L; }
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1; st pip rc=$?
ABLATE=0 REF="ab_ref/main.cu" STAGE=build bash benchmarks/ablate_global.sh; st build; ls /tmp/ablate/*.so >> $L
FTCOMPILE_GEMM_LIB=/tmp/ablate/libgemm_0.so timeout 100 python3 -m pytest -q -p no:cacheprovider -x tests/test_cuda_gemm.py -k "global" > /tmp/t.log 2>&1; st tests rc=$?; tail -2 /tmp/t.log >> $L
for r in 1 2 3; do
  OUT=/tmp/ab$r ABLATE=0 REF="ab_ref/main.cu" STAGE=run NAMES=on,noop,fault BASE=off \
    SHAPES=8192x2304x768,8192x768x3072,4096x2304x768,4096x768x768,4096x768x3072,4096x4096x4096 timeout 60 bash benchmarks/ablate_global.sh > /dev/null 2>&1
  cat /tmp/ab$r/ablate_global.txt >> $OUT/ab61f.txt; st round $r
done
cat $L
