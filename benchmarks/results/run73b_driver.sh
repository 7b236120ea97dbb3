#!/usr/bin/env bash
# run 73b (session 65): thin_replica_probe (replica checks at x's wider paddings), every GEMM CUDA
# test on the tree (REP), the thread table.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 200 python3 -c "from ftcompile.ops import cuda; print(cuda.build_library('gemm', 'ftcompile_gemm_ab_tree'))" > $OUT/run73b_build.txt 2>&1
st build rc=$?; tail -1 $OUT/run73b_build.txt
export FTCOMPILE_GEMM_LIB=$(ls /tmp/torch_ext/ftcompile_gemm_ab_tree/*.so | head -1)
timeout 150 python3 benchmarks/thin_replica_probe.py > $OUT/run73b_probe.txt 2>&1; st probe rc=$?
cat $OUT/run73b_probe.txt | cut -c1-400
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py > $OUT/run73b_tests.txt 2>&1; st tests rc=$?
tail -2 $OUT/run73b_tests.txt; grep -E "^(FAILED|ERROR)|Error" $OUT/run73b_tests.txt | head -10
timeout 120 python3 benchmarks/bench_gemm.py --parts thread --out $OUT > $OUT/run73b_table.txt 2>&1; st table rc=$?
grep -E "^\| (1|2|4|8|16|32)x(14336|11008)x4096" $OUT/gemm_bench.md | cut -d'|' -f2-9
