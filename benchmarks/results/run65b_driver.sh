#!/usr/bin/env bash
# run 65b (prepared in session 57 on wip/lazy-s2, run from main in session 58): the tile-local
# check's weighted row sums (s2) only for a warp with a flagged row (the branch's global_gemm.cu,
# build ref1) against main's epilogue (s2 in every tile, build 0); the global CUDA tests on ref1's
# library; two rounds of both builds in turn.
# Before the device call, here:  mkdir -p ab_lazy && git archive wip/lazy-s2 csrc/gemm csrc/common | tar -x -C ab_lazy
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
[ -f ab_lazy/csrc/gemm/global_gemm.cu ] || { echo "ab_lazy missing (see the header)"; exit 1; }
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
R=ab_lazy/csrc/gemm/global_gemm.cu
ABLATE=0 REF="$R" STAGE=build bash benchmarks/ablate_global.sh > /tmp/b.log 2>&1; st build; ls /tmp/ablate/*.so
FTCOMPILE_GEMM_LIB=/tmp/ablate/libgemm_ref1.so timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py -k global \
  > $OUT/run65b_tests.txt 2>&1; st tests rc=$?
tail -2 $OUT/run65b_tests.txt
for r in 1 2; do
  OUT=/tmp/ab$r ABLATE=0 REF="$R" STAGE=run NAMES=on@tiles BASE=off#192 \
    SHAPES=8192x2304x768,4096x3072x768,4096x2304x768,8192x768x3072,4096x768x768 timeout 150 bash benchmarks/ablate_global.sh > /dev/null 2>&1
  cat /tmp/ab$r/ablate_global.txt >> $OUT/run65b_ab.txt; st round $r
done
cat $OUT/run65b_ab.txt
