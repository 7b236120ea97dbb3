#!/usr/bin/env bash
# run 61a: builds tree (W) + ref1 main, ref2-4 probes p1-p3, ref5 W0; W's global tests; two timing rounds
set -u
export OUT=${OUT:-/tmp/o}; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*" >> $OUT/log61a.txt; }
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1; st pip rc=$?
ABLATE=0 REF="ab_ref/main.cu ab_ref/p1.cu ab_ref/p2.cu ab_ref/p3.cu ab_ref/w0.cu" STAGE=build bash benchmarks/ablate_global.sh
st build; ls -la /tmp/ablate/*.so >> $OUT/log61a.txt 2>&1; grep -il "error" /tmp/ablate/build_*.log >> $OUT/log61a.txt
FTCOMPILE_GEMM_LIB=/tmp/ablate/libgemm_0.so timeout 120 python3 -m pytest -q -p no:cacheprovider -x tests/test_cuda_gemm.py -k "global" > $OUT/tests61a_w.log 2>&1; st tests rc=$?
for r in 1 2; do
  OUT=/tmp/r$r ABLATE=0 REF="ab_ref/main.cu ab_ref/p1.cu ab_ref/p2.cu ab_ref/p3.cu ab_ref/w0.cu" STAGE=run NAMES=on,noop,fault BASE=off \
    SHAPES=8192x2304x768,8192x768x3072,4096x2304x768,4096x768x768,1024x1024x1024,4096x768x3072 timeout $(( r == 1 ? 210 : 560 - ($(date +%s) - t0) )) bash benchmarks/ablate_global.sh > /dev/null 2>&1
  cp /tmp/r$r/ablate_global.txt $OUT/ablate61a_r$r.txt; st round $r
done
