#!/usr/bin/env bash
# run 61b: K32 (tree) against main: CUDA tests on the tree's production build, 2 alternating A/B rounds, both global tables
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 MAX_JOBS=16 TORCH_EXTENSIONS_DIR=/tmp/torch_ext; t0=$(date +%s)
L=$OUT/log61b.txt
st() { echo "[$(( $(date +%s) - t0 ))s] $*" >> $L; }
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1; st pip rc=$?
( timeout 300 python3 -c "from ftcompile.ops import cuda_gemm as c; print('gemm', c.build())" > /tmp/build_prod.log 2>&1 ) &
ABLATE=0 REF="ab_ref/main.cu" STAGE=build bash benchmarks/ablate_global.sh
wait; st build; tail -2 /tmp/build_prod.log >> $L; ls /tmp/ablate/*.so >> $L
timeout 300 python3 -m pytest -q -p no:cacheprovider -ra --timeout=60 tests/test_cuda_gemm.py > /tmp/gt.log 2>&1; st gemm tests rc=$?
tail -3 /tmp/gt.log >> $L; grep -E "^(FAILED|ERROR)" /tmp/gt.log | head >> $L
timeout 200 python3 -m pytest -q -p no:cacheprovider -ra tests/test_cuda_e2e.py > /tmp/e2e.log 2>&1; st e2e rc=$?
tail -3 /tmp/e2e.log >> $L; grep -E "^(FAILED|ERROR)" /tmp/e2e.log | head >> $L
for r in 1 2; do
  OUT=/tmp/ab$r ABLATE=0 REF="ab_ref/main.cu" STAGE=run NAMES=on,noop,fault BASE=off MORE=1 timeout 100 bash benchmarks/ablate_global.sh > /dev/null 2>&1
  cat /tmp/ab$r/ablate_global.txt >> $OUT/ab61b.txt; st round $r
done
timeout 120 python3 benchmarks/bench_gemm.py --parts global --out $OUT/t > /tmp/g1.log 2>&1; st table tree rc=$?
FTCOMPILE_GEMM_LIB=/tmp/ablate/libgemm_ref1.so timeout 120 python3 benchmarks/bench_gemm.py --parts global --out $OUT/m > /tmp/g2.log 2>&1; st table main rc=$?
python3 benchmarks/compare_global.py main=$OUT/m/gemm_bench.json K32=$OUT/t/gemm_bench.json > $OUT/compare61b.md 2>&1
cat $L
