#!/usr/bin/env bash
# run 73d (session 65): timing with an L2 flush before each timed replay (bench_gemm.flush_l2):
# the order probe, gemm_ab tree / base (9e67512), the thread table.
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
GEMM_AB_FLAGS="tree=" GEMM_AB_BASE=ab_base/csrc GEMM_AB_BUILD_ONLY=1 timeout 200 python3 benchmarks/gemm_ab.py > $OUT/run73d_build.txt 2>&1
st build rc=$?; tail -3 $OUT/run73d_build.txt
TREE=$(ls /tmp/torch_ext/ftcompile_gemm_ab_tree/*.so | head -1)
FTCOMPILE_GEMM_LIB=$TREE timeout 90 python3 benchmarks/harness_order_probe.py > $OUT/run73d_order.txt 2>&1; st order rc=$?
cut -c1-300 $OUT/run73d_order.txt
FTCOMPILE_GEMM_LIB=$TREE timeout 150 python3 benchmarks/bench_gemm.py --parts thread --out $OUT > $OUT/run73d_table.txt 2>&1; st table rc=$?
grep -E "^\| (1|8|16|32|64|128)x(14336|11008)x4096 " $OUT/gemm_bench.md | cut -d'|' -f2-9
GEMM_AB_FLAGS="tree=" GEMM_AB_BASE=ab_base/csrc GEMM_AB_ROUNDS=2 \
GEMM_AB_SHAPES=1x14336x4096,16x14336x4096,24x14336x4096,32x14336x4096,16x11008x4096,32x11008x4096,32x4096x11008 \
  timeout 120 python3 benchmarks/gemm_ab.py > $OUT/run73d_ab.txt 2>&1; st ab rc=$?
grep "^|" $OUT/run73d_ab.txt | grep -v cublas | tail -16; grep -i "error\|Traceback" $OUT/run73d_ab.txt | head -5
