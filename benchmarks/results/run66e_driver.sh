#!/usr/bin/env bash
# run 66e (session 59): main with B48 (three consumer warpgroups at d=128): the attention CUDA tests
# whole, then the attention table on the paper configurations (quick timing).
set -u
export OUT=${OUT:-/tmp/o} PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/torch_ext MAX_JOBS=16; t0=$(date +%s)
st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1
timeout 200 python3 -c "from ftcompile.ops import cuda_attention as c; print(c.library())" > $OUT/run66e_build.txt 2>&1; st build rc=$?
timeout 200 python3 -m pytest -q -p no:cacheprovider --maxfail=5 -rf tests/test_cuda_attention.py > $OUT/run66e_tests.txt 2>&1; st tests rc=$?
tail -3 $OUT/run66e_tests.txt
left=$(( 520 - ($(date +%s) - t0) ))
timeout $left python3 benchmarks/bench_attention.py --quick --out $OUT --tag run66e > $OUT/run66e_bench.log 2>&1; st bench rc=$?
grep "^|\|Paper\|mean" $OUT/*run66e*.md 2>/dev/null | tail -25
