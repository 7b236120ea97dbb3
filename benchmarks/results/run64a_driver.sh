#!/usr/bin/env bash
# A record: it ran on session 57's R1 tree (Args::mt_runs, FTCOMPILE_GEMM_MT_RUNS), reverted after
# runs 64a-b (NOTES_gemm.md session 57 describes it); it does not apply to main.
# run 64a (session 57): R1, the tile-local check's M-tile runs (NOTES_gemm.md session 57). The
# package's library built once; the global CUDA tests (with the new run-order tests); runs off /
# on timed in alternating processes (benchmarks/knob_ab.py, two rounds); the global table with runs
# on (the default).
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
python3 -c "from ftcompile.ops import cuda_gemm as c; print(c.build())" > /tmp/build.log 2>&1; st build rc=$?
tail -2 /tmp/build.log
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gemm.py -k "global or runs" > $OUT/run64a_tests.txt 2>&1; st tests rc=$?
grep -E "passed|failed|FAILED|Error" $OUT/run64a_tests.txt | tail -8
KNOB_AB=FTCOMPILE_GEMM_MT_RUNS=0,1 KNOB_AB_SHAPES=8192x2304x768,4096x3072x768,4096x2304x768,2048x2048x2048,8192x768x3072,4096x768x768 \
  timeout 220 python3 benchmarks/knob_ab.py > $OUT/run64a_ab.txt 2>&1; st ab rc=$?
grep -A40 "FTCOMPILE_GEMM_MT_RUNS:" $OUT/run64a_ab.txt
timeout 120 python3 benchmarks/bench_gemm.py --parts global --out $OUT > $OUT/run64a_table.log 2>&1; st table rc=$?
grep -E "^\| [0-9]" $OUT/gemm_bench.md | head -22
